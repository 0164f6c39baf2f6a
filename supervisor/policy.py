"""The permission gate: what an agent may do without asking. Pure: no I/O, no clock, no env.

An agent's request becomes an :class:`Action` (a risk class and the full target string: a path,
a command line, a host …). :func:`evaluate` judges it against a :class:`Policy` — an ordered
tuple of :class:`Rule` — and answers a :class:`Verdict`: allow, ask or deny.

1. A rule matches when its risk is the action's (or ``"*"``) and its pattern matches the action's
   *whole* target (:func:`glob_match`: ``*`` any run of characters, ``/`` included; ``?`` any one
   character; everything else, ``[`` too, is literal; case-sensitive).
2. A matching *hard* rule (always a deny) is terminal: it wins whatever its position, so no later
   rule, no layer and no approval can allow the action.
3. Otherwise the last matching rule wins; no matching rule means ask.

Policies are layered defaults → user config → run options (:meth:`Policy.layered`): a later
layer's rules come after the earlier ones, so they win as the last match — except over a hard
deny.

After the rules, an ask is answered by the person (never by the agent):

* :class:`Approvals` holds single-use grants, each bound to one action's
  :meth:`Action.fingerprint`; :func:`authorise` spends one for an ask of exactly that action.
  A grant never turns a deny (hard or not) into an allow.
* :func:`resolve_ask` puts the rest to the approver: with no live approver (``--unattended``,
  no terminal) an ask becomes a deny whose reason names the action. The person's choice of an
  agent's "allow always" option authorises this one action only; :func:`answer_option` picks the
  option sent back to the agent, which is never an "always" allow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    model_validator,
)

from supervisor.errors import ConfigError

__all__ = [
    "DEFAULT_POLICY",
    "Action",
    "Approvals",
    "DecidedBy",
    "Decision",
    "FinalDecision",
    "Grant",
    "PermissionOption",
    "PermissionOptionKind",
    "Policy",
    "RiskClass",
    "Rule",
    "Verdict",
    "answer_option",
    "authorise",
    "evaluate",
    "glob_match",
    "option_label",
    "policy_from_config",
    "resolve_ask",
    "rule_from_option",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class RiskClass(StrEnum):
    """What kind of thing an action does; the target's shape depends on it (see docs/policy.md)."""

    READ = "read"  # target: a path
    WRITE = "write"  # target: a path
    SHELL = "shell"  # target: the full command line
    NETWORK = "network"  # target: a host name
    CREDENTIAL = "credential"  # target: the secret's name or path
    DELEGATE = "delegate"  # target: the agent id a task is handed to
    DESTRUCTIVE = "destructive"  # target: a path or command line


class Decision(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


def glob_match(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches the whole of ``text``.

    ``*`` matches any run of characters including ``/`` and the empty run; ``?`` matches exactly
    one character (``/`` too); every other character matches only itself (``[`` is not a set).
    Case-sensitive. Greedy matching with one backtrack point: O(len(pattern) · len(text)) at
    worst, so no pattern can make a long target slow.
    """
    p = t = 0
    star = -1  # index of the last `*` seen in the pattern
    resume = 0  # where in the text that `*` currently stops
    while t < len(text):
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p, t
            p += 1
        elif p < len(pattern) and pattern[p] in ("?", text[t]):
            p += 1
            t += 1
        elif star >= 0:
            resume += 1  # let the last `*` swallow one more character
            p, t = star + 1, resume
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


class Rule(BaseModel):
    """``risk`` (or ``"*"`` for every class) and a pattern over the action's whole target."""

    model_config = _FROZEN

    risk: RiskClass | Literal["*"]
    pattern: StrictStr = Field(min_length=1)
    decision: Decision
    hard: StrictBool = False

    @model_validator(mode="after")
    def _hard_is_deny(self) -> Rule:
        if self.hard and self.decision is not Decision.DENY:
            raise ValueError("hard = true only applies to decision = deny")
        return self

    def matches(self, action: Action) -> bool:
        return self.risk in ("*", action.risk) and glob_match(self.pattern, action.target)

    def describe(self) -> str:
        return f"{self.risk} {self.pattern!r} -> {'hard ' if self.hard else ''}{self.decision}"


class Policy(BaseModel):
    """An ordered rule list: the last matching rule wins, a matching hard deny always wins."""

    model_config = _FROZEN

    rules: tuple[Rule, ...] = ()

    @classmethod
    def layered(cls, *layers: Policy) -> Policy:
        """One policy from layers in order (defaults, user config, run options): a later layer's
        rules come after, so they win as the last match."""
        return cls(rules=tuple(rule for layer in layers for rule in layer.rules))


class Action(BaseModel):
    """One thing an agent asks to do. Build it the same way where permission is asked and where
    the action is carried out: an approval only covers an action with the same fingerprint."""

    model_config = _FROZEN

    risk: RiskClass
    target: StrictStr
    agent: StrictStr
    tool: StrictStr | None = None
    detail: StrictStr | None = None

    def fingerprint(self) -> str:
        """sha256 (hex) of a canonical JSON of every field: sorted keys, no spaces, ASCII only
        (so any string, even a lone surrogate, encodes), under a versioned tag."""
        canonical = json.dumps(
            {
                "v": "asup.action.1",
                "risk": str(self.risk),
                "target": self.target,
                "agent": self.agent,
                "tool": self.tool,
                "detail": self.detail,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=True,
        )
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

    def describe(self) -> str:
        tool = f" (tool {self.tool!r})" if self.tool is not None else ""
        return f"{self.risk} {self.target!r} by agent {self.agent!r}{tool}"


class Verdict(BaseModel):
    """What the rules say about one action; ``rule`` is the deciding rule (None: none matched)."""

    model_config = _FROZEN

    action: Action
    decision: Decision
    rule: Rule | None
    hard: bool
    reason: str


def evaluate(policy: Policy, action: Action) -> Verdict:
    """Judge ``action``: a matching hard deny (the last one) wins outright, else the last matching
    rule, else ask. Never raises."""
    last: Rule | None = None
    last_hard: Rule | None = None
    for rule in policy.rules:
        if rule.matches(action):
            last = rule
            if rule.hard:
                last_hard = rule
    what = action.describe()
    if last_hard is not None:
        return Verdict(
            action=action,
            decision=Decision.DENY,
            rule=last_hard,
            hard=True,
            reason=f"{what}: hard deny by rule {last_hard.describe()}; no rule or approval "
            "can allow it",
        )
    if last is None:
        return Verdict(
            action=action,
            decision=Decision.ASK,
            rule=None,
            hard=False,
            reason=f"{what}: no rule matches, so the person is asked",
        )
    return Verdict(
        action=action,
        decision=last.decision,
        rule=last,
        hard=False,
        reason=f"{what}: {last.decision} by rule {last.describe()}",
    )


# ---------------------------------------------------------------------------------------------
# Approvals


class Grant(BaseModel):
    """The person's approval of exactly one action, by fingerprint; spent once used."""

    model_config = _FROZEN

    fingerprint: StrictStr
    spent: StrictBool = False


class Approvals(BaseModel):
    """Grants in the order given. Immutable: every method returns a new value."""

    model_config = _FROZEN

    grants: tuple[Grant, ...] = ()

    def grant(self, action: Action) -> Approvals:
        """Approve one future occurrence of exactly ``action``."""
        return Approvals(grants=(*self.grants, Grant(fingerprint=action.fingerprint())))

    def consume(self, action: Action) -> tuple[bool, Approvals]:
        """Spend the oldest unspent grant for ``action``'s fingerprint: ``(True, after)``, or
        ``(False, self)`` when there is none (a grant for any other action does nothing)."""
        fingerprint = action.fingerprint()
        for index, grant in enumerate(self.grants):
            if not grant.spent and grant.fingerprint == fingerprint:
                spent = grant.model_copy(update={"spent": True})
                grants = (*self.grants[:index], spent, *self.grants[index + 1 :])
                return True, Approvals(grants=grants)
        return False, self

    def unspent(self, action: Action) -> int:
        fingerprint = action.fingerprint()
        return sum(1 for g in self.grants if not g.spent and g.fingerprint == fingerprint)


class DecidedBy(StrEnum):
    POLICY = "policy"  # a rule allowed or denied it
    GRANT = "grant"  # an ask answered by a single-use grant
    APPROVER = "approver"  # an ask answered by the person at the terminal
    HEADLESS = "headless"  # an ask with nobody to answer it: denied


class FinalDecision(BaseModel):
    """Allow or deny, for the record: the action, its fingerprint, who decided and why."""

    model_config = _FROZEN

    decision: Literal[Decision.ALLOW, Decision.DENY]
    action: Action
    fingerprint: str
    decided_by: DecidedBy
    rule: Rule | None
    hard: bool
    reason: str

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


def _final(
    verdict: Verdict, decision: Literal[Decision.ALLOW, Decision.DENY], by: DecidedBy, reason: str
) -> FinalDecision:
    return FinalDecision(
        decision=decision,
        action=verdict.action,
        fingerprint=verdict.action.fingerprint(),
        decided_by=by,
        rule=verdict.rule,
        hard=verdict.hard,
        reason=reason,
    )


def authorise(verdict: Verdict, approvals: Approvals) -> tuple[FinalDecision | None, Approvals]:
    """Settle what the rules and grants can settle.

    allow/deny → that, by policy, grants untouched (a grant never turns a deny into an allow);
    ask with an unspent grant for this exact action → allow, that grant spent;
    ask without one → ``(None, approvals)``: put it to the approver with :func:`resolve_ask`.
    """
    if verdict.decision is Decision.ALLOW:
        return _final(verdict, Decision.ALLOW, DecidedBy.POLICY, verdict.reason), approvals
    if verdict.decision is Decision.DENY:
        return _final(verdict, Decision.DENY, DecidedBy.POLICY, verdict.reason), approvals
    used, after = approvals.consume(verdict.action)
    if not used:
        return None, approvals
    reason = f"{verdict.action.describe()}: allowed once by the person's approval (now spent)"
    return _final(verdict, Decision.ALLOW, DecidedBy.GRANT, reason), after


# ---------------------------------------------------------------------------------------------
# The agent's options (ACP session/request_permission) and the person's answer


class PermissionOptionKind(StrEnum):
    """ACP's ``PermissionOptionKind``."""

    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"


class PermissionOption(BaseModel):
    """One option an agent offers with a permission request (ACP ``PermissionOption``)."""

    model_config = _FROZEN

    option_id: StrictStr
    name: StrictStr
    kind: PermissionOptionKind


def option_label(option: PermissionOption) -> str:
    """How an agent's option is shown to the person: its own name, and for an "always" allow the
    fact that asup authorises this one action only."""
    if option.kind is PermissionOptionKind.ALLOW_ALWAYS:
        return f"{option.name} (asup allows this one action only)"
    return option.name


_ALLOWING = (PermissionOptionKind.ALLOW_ONCE, PermissionOptionKind.ALLOW_ALWAYS)


def resolve_ask(
    verdict: Verdict,
    *,
    approver_live: bool,
    approved: bool | PermissionOptionKind | None,
) -> FinalDecision:
    """The final answer to a verdict once the approver had their say.

    ``approved`` is the person's answer: a yes/no, the kind of the agent option they picked, or
    None (no answer). A verdict that is not an ask keeps its decision whatever the answer. With
    no live approver an ask is denied, its reason naming the action. Any allowing answer,
    ``allow_always`` included, authorises this one action only.
    """
    what = verdict.action.describe()
    if verdict.decision is Decision.ALLOW:
        return _final(verdict, Decision.ALLOW, DecidedBy.POLICY, verdict.reason)
    if verdict.decision is Decision.DENY:
        return _final(verdict, Decision.DENY, DecidedBy.POLICY, verdict.reason)
    if not approver_live:
        return _final(
            verdict,
            Decision.DENY,
            DecidedBy.HEADLESS,
            f"{what}: denied, the policy asks but no one can answer (unattended or no "
            "terminal); allow it with a rule to run it unattended",
        )
    if approved is None:
        return _final(verdict, Decision.DENY, DecidedBy.APPROVER, f"{what}: denied, no answer")
    if approved is True or approved in _ALLOWING:
        lowered = (
            " ('allow always' lowered to this one action)"
            if approved is PermissionOptionKind.ALLOW_ALWAYS
            else ""
        )
        return _final(
            verdict,
            Decision.ALLOW,
            DecidedBy.APPROVER,
            f"{what}: allowed once by the person{lowered}",
        )
    return _final(verdict, Decision.DENY, DecidedBy.APPROVER, f"{what}: denied by the person")


def answer_option(
    options: Sequence[PermissionOption], final: FinalDecision
) -> PermissionOption | None:
    """The agent option that carries ``final`` back: ``allow_once`` for an allow (never
    ``allow_always``), ``reject_once`` — else ``reject_always`` — for a deny. None when the
    agent offered no such option: answer the request as cancelled."""
    wanted = (
        (PermissionOptionKind.ALLOW_ONCE,)
        if final.allowed
        else (PermissionOptionKind.REJECT_ONCE, PermissionOptionKind.REJECT_ALWAYS)
    )
    for kind in wanted:
        for option in options:
            if option.kind is kind:
                return option
    return None


# ---------------------------------------------------------------------------------------------
# Defaults and config


def _rules(risk: RiskClass, decision: Decision, *patterns: str, hard: bool = False) -> list[Rule]:
    return [Rule(risk=risk, pattern=p, decision=decision, hard=hard) for p in patterns]


# A path inside the worktree is given relative to its root (`src/main.py`), any other path
# absolute and resolved; `..` anywhere or `~` in front marks a path as not inside the worktree.
_OUTSIDE = ("/*", "~*", "..", "../*", "*/..", "*/../*")

DEFAULT_POLICY = Policy(
    rules=(
        *_rules(RiskClass.READ, Decision.ALLOW, "*"),
        *_rules(RiskClass.READ, Decision.ASK, *_OUTSIDE),
        *_rules(RiskClass.WRITE, Decision.ASK, "*"),
        *_rules(RiskClass.WRITE, Decision.DENY, *_OUTSIDE),
        *_rules(RiskClass.WRITE, Decision.DENY, ".git", ".git/*", "*/.git", "*/.git/*", hard=True),
        *_rules(RiskClass.SHELL, Decision.ASK, "*"),
        *_rules(RiskClass.NETWORK, Decision.ASK, "*"),
        *_rules(RiskClass.CREDENTIAL, Decision.DENY, "*", hard=True),
        *_rules(RiskClass.DELEGATE, Decision.DENY, "*"),
        *_rules(RiskClass.DESTRUCTIVE, Decision.ASK, "*"),
    )
)
"""The built-in first layer; docs/policy.md lists it as TOML."""


def _entry_label(index: int, entry: object) -> str:
    label = f"[[policy.rules]] entry {index + 1}"
    if isinstance(entry, Mapping):
        shown = ", ".join(f"{k} = {entry[k]!r}" for k in ("risk", "pattern") if k in entry)
        if shown:
            label += f" ({shown})"
    return label


def policy_from_config(data: Mapping[str, Any]) -> Policy:
    """The policy layer in a TOML document (user config or run options)::

        [[policy.rules]]
        risk = "shell"          # read write shell network credential delegate destructive, or "*"
        pattern = "git status"  # the whole target; `*` and `?` are wildcards
        decision = "allow"      # allow | ask | deny
        hard = false            # optional; only with deny

    No ``policy`` table is an empty layer. Anything else wrong raises :class:`ConfigError`
    naming the entry.
    """
    section = data.get("policy")
    if section is None:
        return Policy()
    if not isinstance(section, Mapping):
        raise ConfigError("policy must be a table holding [[policy.rules]]; fix that key")
    unknown = sorted(set(section) - {"rules"})
    if unknown:
        raise ConfigError(
            f"policy.{unknown[0]} is not a policy setting asup knows; remove it (the only one "
            "is rules)"
        )
    entries = section.get("rules", [])
    if not isinstance(entries, list):
        raise ConfigError("policy.rules must be an array of tables ([[policy.rules]]); fix it")
    rules = []
    for index, entry in enumerate(entries):
        label = _entry_label(index, entry)
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{label}: must be a table with risk, pattern and decision")
        missing = [key for key in ("risk", "pattern", "decision") if key not in entry]
        if missing:
            raise ConfigError(f"{label}: {missing[0]} is missing; add it")
        try:
            rules.append(Rule.model_validate(dict(entry)))
        except ValidationError as exc:
            raise ConfigError(f"{label}: {_problem(exc)}; fix that entry") from exc
    return Policy(rules=tuple(rules))


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = [str(part) for part in first["loc"] if not isinstance(part, int)]
    key = loc[0] if loc else ""
    if first["type"] == "extra_forbidden":
        return f"{key} is not a rule key asup knows (they are risk, pattern, decision, hard)"
    if key == "risk":
        kinds = ", ".join(RiskClass)
        return f"risk must be one of {kinds} or '*', not {first['input']!r}"
    if key == "decision":
        return f"decision must be one of allow, ask, deny, not {first['input']!r}"
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{key}: {message}" if key else message


def rule_from_option(decision: str, spec: str) -> Rule:
    """One run option (``asup run --allow/--ask/--deny RISK:PATTERN``) as a rule: ``spec`` is a
    risk class (or ``*``), a colon, and the pattern over the whole target (it may hold colons
    itself: only the first one splits). Raises ``ValueError`` naming the fix."""
    risk, sep, pattern = spec.partition(":")
    kinds = ", ".join(RiskClass)
    if not sep or not risk:
        raise ValueError(
            f"--{decision} {spec!r}: write it as RISK:PATTERN, e.g. --{decision} 'shell:git *' "
            f"(RISK is one of {kinds} or '*')"
        )
    if risk != "*" and risk not in set(RiskClass):
        raise ValueError(
            f"--{decision} {spec!r}: {risk!r} is not a risk class; use one of {kinds} or '*'"
        )
    if not pattern:
        raise ValueError(f"--{decision} {spec!r}: the pattern is empty; use '*' for any target")
    return Rule.model_validate({"risk": risk, "pattern": pattern, "decision": decision})
