"""policy: one table of cases from the rules through grants to the approver, plus properties."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.errors import ConfigError
from supervisor.policy import (
    DEFAULT_POLICY,
    Action,
    Approvals,
    DecidedBy,
    Decision,
    PermissionOption,
    PermissionOptionKind,
    Policy,
    RiskClass,
    Rule,
    answer_option,
    authorise,
    evaluate,
    glob_match,
    option_label,
    policy_from_config,
    resolve_ask,
)

ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY
R = RiskClass
ALWAYS = PermissionOptionKind.ALLOW_ALWAYS


def rule(risk: RiskClass | str, pattern: str, decision: Decision, hard: bool = False) -> Rule:
    return Rule.model_validate(
        {"risk": risk, "pattern": pattern, "decision": decision, "hard": hard}
    )


def policy(*rules: Rule) -> Policy:
    return Policy(rules=rules)


def act(risk: RiskClass, target: str, tool: str | None = None) -> Action:
    return Action(risk=risk, target=target, agent="claude-code", tool=tool)


SHELL_ASK = rule(R.SHELL, "*", ASK)
GIT_ALLOW = rule(R.SHELL, "git *", ALLOW)
GIT_PUSH_DENY = rule(R.SHELL, "git push*", DENY)
ANY_ALLOW = rule("*", "*", ALLOW)
ANY_DENY = rule("*", "*", DENY)
DOTENV_HARD = rule("*", "*.env", DENY, hard=True)
CURL_HARD = rule(R.SHELL, "curl *", DENY, hard=True)
CURL_ALLOW = rule(R.SHELL, "curl *", ALLOW)
DEFAULTS_USER = policy(GIT_ALLOW, GIT_PUSH_DENY)
RUN_ALLOW_PUSH = policy(rule(R.SHELL, "git push origin feature", ALLOW))
NET_ONE = rule(R.NETWORK, "api.example.?om", ALLOW)
READ_SRC = rule(R.READ, "src/*", ALLOW)
BRACKET = rule(R.READ, "[ab].txt", ALLOW)

PYTEST = act(R.SHELL, "pytest -q", tool="Bash")
OTHER = act(R.SHELL, "pytest -x", tool="Bash")


@dataclass(frozen=True)
class Case:
    id: str
    layers: tuple[Policy, ...]
    action: Action
    decision: Decision  # what evaluate says
    rule: Rule | None
    hard: bool = False
    # Then the same action is tried len(final) times: grants settle an ask first, then the
    # approver (live or not) is asked, taking the next of `answers` each time.
    grants: tuple[Action, ...] = ()
    live: bool = False
    answers: tuple[bool | PermissionOptionKind | None, ...] = ()
    final: tuple[Decision, ...] = ()
    by: tuple[DecidedBy, ...] = ()
    asked: int = 0  # how many tries reached the approver
    reason_has: tuple[str, ...] = ()  # in the last final decision's reason


CASES = [
    # --- matching and order
    Case("last match wins: later allow", (policy(SHELL_ASK, GIT_ALLOW),),
         act(R.SHELL, "git status"), ALLOW, GIT_ALLOW, final=(ALLOW,), by=(DecidedBy.POLICY,)),
    Case("last match wins: later narrower deny", (DEFAULTS_USER,), act(R.SHELL, "git push -f"),
         DENY, GIT_PUSH_DENY, final=(DENY,), by=(DecidedBy.POLICY,)),
    Case("last match wins: a broad rule after a narrow one", (policy(GIT_ALLOW, SHELL_ASK),),
         act(R.SHELL, "git status"), ASK, SHELL_ASK),
    Case("no match asks", (DEFAULTS_USER,), act(R.SHELL, "ls"), ASK, None),
    Case("no rule of that risk asks", (policy(GIT_ALLOW),), act(R.WRITE, "git x"), ASK, None),
    Case("empty policy asks", (), act(R.READ, "a"), ASK, None),
    Case("risk * matches every class", (policy(ANY_ALLOW),), act(R.DELEGATE, "codex"), ALLOW,
         ANY_ALLOW),
    # --- layering: defaults → user → run, later layers win as the last match
    Case("run layer beats user layer", (DEFAULT_POLICY, DEFAULTS_USER, RUN_ALLOW_PUSH),
         act(R.SHELL, "git push origin feature"), ALLOW, RUN_ALLOW_PUSH.rules[0]),
    Case("user layer beats defaults", (DEFAULT_POLICY, DEFAULTS_USER, RUN_ALLOW_PUSH),
         act(R.SHELL, "git push origin main"), DENY, GIT_PUSH_DENY),
    Case("layer order matters", (DEFAULTS_USER, policy(SHELL_ASK)), act(R.SHELL, "git log"),
         ASK, SHELL_ASK),
    # --- `*` and `?` on the full string
    Case("* spans /", (policy(READ_SRC),), act(R.READ, "src/a/b/c.py"), ALLOW, READ_SRC),
    Case("pattern anchored at start", (policy(READ_SRC),), act(R.READ, "lib/src/a.py"), ASK, None),
    Case("pattern anchored at end", (policy(GIT_ALLOW),), act(R.SHELL, "sudo git x"), ASK, None),
    Case("? is one character", (policy(NET_ONE),), act(R.NETWORK, "api.example.com"), ALLOW,
         NET_ONE),
    Case("? is not zero characters", (policy(NET_ONE),), act(R.NETWORK, "api.example.om"), ASK,
         None),
    Case("? is not two", (policy(NET_ONE),), act(R.NETWORK, "api.example.coom"), ASK, None),
    Case("case-sensitive", (policy(GIT_ALLOW),), act(R.SHELL, "GIT status"), ASK, None),
    Case("[ is literal", (policy(BRACKET),), act(R.READ, "a.txt"), ASK, None),
    Case("[ matches itself", (policy(BRACKET),), act(R.READ, "[ab].txt"), ALLOW, BRACKET),
    Case("* spans a newline in a command", (policy(GIT_ALLOW),),
         act(R.SHELL, "git status\nrm -rf ~"), ALLOW, GIT_ALLOW),
    # --- hard deny is terminal
    Case("hard deny beats a later allow", (policy(CURL_HARD, CURL_ALLOW),),
         act(R.SHELL, "curl x"), DENY, CURL_HARD, hard=True, final=(DENY,),
         by=(DecidedBy.POLICY,), reason_has=("hard deny", "curl x")),
    Case("hard deny beats a later layer's allow-all", (policy(DOTENV_HARD), policy(ANY_ALLOW)),
         act(R.READ, "app/.env"), DENY, DOTENV_HARD, hard=True),
    Case("hard deny beats an approval", (policy(CURL_HARD),), act(R.SHELL, "curl x"), DENY,
         CURL_HARD, hard=True, grants=(act(R.SHELL, "curl x"),), live=True, answers=(True,),
         final=(DENY, DENY), by=(DecidedBy.POLICY, DecidedBy.POLICY)),
    Case("a plain deny is not flipped by a grant either", (policy(ANY_DENY),), PYTEST, DENY,
         ANY_DENY, grants=(PYTEST,), final=(DENY,), by=(DecidedBy.POLICY,)),
    Case("a non-matching hard rule does nothing", (policy(CURL_HARD, SHELL_ASK),), PYTEST, ASK,
         SHELL_ASK),
    Case("credential is a hard deny by default", (DEFAULT_POLICY, policy(ANY_ALLOW)),
         act(R.CREDENTIAL, "ANTHROPIC_API_KEY"), DENY, rule(R.CREDENTIAL, "*", DENY, hard=True),
         hard=True),
    # --- grants: single use, bound to the fingerprint
    Case("a grant allows its action once", (policy(SHELL_ASK),), PYTEST, ASK, SHELL_ASK,
         grants=(PYTEST,), final=(ALLOW, DENY), by=(DecidedBy.GRANT, DecidedBy.HEADLESS),
         asked=1),
    Case("a grant for another target does nothing", (policy(SHELL_ASK),), PYTEST, ASK,
         SHELL_ASK, grants=(OTHER,), final=(DENY,), by=(DecidedBy.HEADLESS,), asked=1),
    Case("a grant for another tool does nothing", (policy(SHELL_ASK),), PYTEST, ASK, SHELL_ASK,
         grants=(act(R.SHELL, "pytest -q", tool="Terminal"),), final=(DENY,), asked=1),
    Case("the same action twice needs two grants", (policy(SHELL_ASK),), PYTEST, ASK, SHELL_ASK,
         grants=(PYTEST, PYTEST), final=(ALLOW, ALLOW, DENY),
         by=(DecidedBy.GRANT, DecidedBy.GRANT, DecidedBy.HEADLESS), asked=1),
    Case("an allow leaves the grant unspent", (policy(ANY_ALLOW),), PYTEST, ALLOW, ANY_ALLOW,
         grants=(PYTEST,), final=(ALLOW,), by=(DecidedBy.POLICY,)),
    # --- the approver
    Case("headless ask is denied, naming the action", (DEFAULT_POLICY,),
         act(R.SHELL, "make test", tool="Bash"), ASK, SHELL_ASK, final=(DENY,),
         by=(DecidedBy.HEADLESS,), asked=1,
         reason_has=("shell 'make test'", "'claude-code'", "'Bash'", "no one can answer")),
    Case("headless ignores a stray yes", (policy(SHELL_ASK),), PYTEST, ASK, SHELL_ASK,
         answers=(True,), final=(DENY,), by=(DecidedBy.HEADLESS,), asked=1),
    Case("the person allows once, then is asked again", (policy(SHELL_ASK),), PYTEST, ASK,
         SHELL_ASK, live=True, answers=(True, False), final=(ALLOW, DENY),
         by=(DecidedBy.APPROVER, DecidedBy.APPROVER), asked=2, reason_has=("denied by",)),
    Case("allow always is lowered to once", (policy(SHELL_ASK),), PYTEST, ASK, SHELL_ASK,
         live=True, answers=(ALWAYS, None), final=(ALLOW, DENY), asked=2,
         by=(DecidedBy.APPROVER, DecidedBy.APPROVER), reason_has=("no answer",)),
    Case("reject_once denies", (policy(SHELL_ASK),), PYTEST, ASK, SHELL_ASK, live=True,
         answers=(PermissionOptionKind.REJECT_ONCE,), final=(DENY,), asked=1),
    Case("no answer denies", (policy(SHELL_ASK),), PYTEST, ASK, SHELL_ASK, live=True,
         answers=(None,), final=(DENY,), asked=1),
    # --- the defaults
    Case("default: read in the worktree", (DEFAULT_POLICY,), act(R.READ, "src/app.py"), ALLOW,
         rule(R.READ, "*", ALLOW)),
    Case("default: read outside asks", (DEFAULT_POLICY,), act(R.READ, "/etc/passwd"), ASK,
         rule(R.READ, "/*", ASK)),
    Case("default: read through .. asks", (DEFAULT_POLICY,), act(R.READ, "src/../../x"), ASK,
         rule(R.READ, "*/../*", ASK)),
    Case("default: write in the worktree asks", (DEFAULT_POLICY,), act(R.WRITE, "src/app.py"),
         ASK, rule(R.WRITE, "*", ASK)),
    Case("default: write outside denied", (DEFAULT_POLICY,), act(R.WRITE, "~/.bashrc"), DENY,
         rule(R.WRITE, "~*", DENY)),
    Case("default: write to .git hard", (DEFAULT_POLICY, policy(ANY_ALLOW)),
         act(R.WRITE, ".git/hooks/pre-commit"), DENY, rule(R.WRITE, ".git/*", DENY, hard=True),
         hard=True),
    Case("default: network asks", (DEFAULT_POLICY,), act(R.NETWORK, "pypi.org"), ASK,
         rule(R.NETWORK, "*", ASK)),
    Case("default: delegate denied, overridable", (DEFAULT_POLICY,), act(R.DELEGATE, "codex"),
         DENY, rule(R.DELEGATE, "*", DENY)),
    Case("default: destructive asks", (DEFAULT_POLICY,), act(R.DESTRUCTIVE, "rm -rf build"),
         ASK, rule(R.DESTRUCTIVE, "*", ASK)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_policy_table(case: Case) -> None:
    verdict = evaluate(Policy.layered(*case.layers), case.action)
    assert (verdict.decision, verdict.rule, verdict.hard) == (case.decision, case.rule, case.hard)
    assert verdict.action == case.action

    approvals = Approvals()
    for granted in case.grants:
        approvals = approvals.grant(granted)
    answers = iter(case.answers)
    asked = 0
    finals = []
    for _ in case.final:
        final, approvals = authorise(verdict, approvals)
        if final is None:
            asked += 1
            final = resolve_ask(verdict, approver_live=case.live, approved=next(answers, None))
        assert final.action == case.action
        assert final.fingerprint == case.action.fingerprint()
        assert final.hard == case.hard
        finals.append(final)
    assert tuple(f.decision for f in finals) == case.final
    if case.by:
        assert tuple(f.decided_by for f in finals) == case.by
    assert asked == case.asked
    for text in case.reason_has:
        assert text in finals[-1].reason


def test_allow_always_reason_says_it_was_lowered() -> None:
    verdict = evaluate(policy(SHELL_ASK), PYTEST)
    final = resolve_ask(verdict, approver_live=True, approved=ALWAYS)
    assert final.allowed
    assert "'allow always' lowered to this one action" in final.reason
    plain = resolve_ask(verdict, approver_live=True, approved=PermissionOptionKind.ALLOW_ONCE)
    assert plain.allowed
    assert "lowered" not in plain.reason


def test_consume_spends_the_matching_grant_only() -> None:
    approvals = Approvals().grant(OTHER).grant(PYTEST)
    used, after = approvals.consume(PYTEST)
    assert used
    assert [g.spent for g in after.grants] == [False, True]
    assert approvals.grants[1].spent is False  # the old value is untouched
    assert (after.unspent(PYTEST), after.unspent(OTHER)) == (0, 1)
    again, same = after.consume(PYTEST)
    assert not again
    assert same == after


OPTS = {
    kind: PermissionOption(option_id=f"id-{kind}", name=kind.replace("_", " ").title(), kind=kind)
    for kind in PermissionOptionKind
}


@pytest.mark.parametrize(
    ("offered", "allowed", "expected"),
    [
        (tuple(PermissionOptionKind), True, PermissionOptionKind.ALLOW_ONCE),
        ((ALWAYS, PermissionOptionKind.REJECT_ONCE), True, None),  # never answer "always"
        (tuple(PermissionOptionKind), False, PermissionOptionKind.REJECT_ONCE),
        ((ALWAYS, PermissionOptionKind.REJECT_ALWAYS), False, PermissionOptionKind.REJECT_ALWAYS),
        ((PermissionOptionKind.ALLOW_ONCE,), False, None),
    ],
)
def test_answer_option(
    offered: tuple[PermissionOptionKind, ...],
    allowed: bool,
    expected: PermissionOptionKind | None,
) -> None:
    verdict = evaluate(policy(SHELL_ASK), PYTEST)
    final = resolve_ask(verdict, approver_live=True, approved=allowed)
    chosen = answer_option([OPTS[k] for k in offered], final)
    assert (chosen.kind if chosen else None) == expected


def test_option_label_warns_on_always_only() -> None:
    assert option_label(OPTS[ALWAYS]) == "Allow Always (asup allows this one action only)"
    assert option_label(OPTS[PermissionOptionKind.ALLOW_ONCE]) == "Allow Once"


def test_hard_rule_must_be_a_deny() -> None:
    with pytest.raises(ValueError, match="only applies to decision = deny"):
        rule(R.SHELL, "*", ALLOW, hard=True)


# --- config


def test_policy_from_config_parses_layers() -> None:
    data = tomllib.loads(
        """
        [[policy.rules]]
        risk = "shell"
        pattern = "git *"
        decision = "allow"

        [[policy.rules]]
        risk = "*"
        pattern = "*.pem"
        decision = "deny"
        hard = true
        """
    )
    assert policy_from_config(data) == policy(GIT_ALLOW, rule("*", "*.pem", DENY, hard=True))
    assert policy_from_config({}) == Policy()
    assert policy_from_config({"policy": {}}) == Policy()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"policy": []}, "policy must be a table"),
        ({"policy": {"rule": []}}, "policy.rule is not a policy setting"),
        ({"policy": {"rules": {}}}, "policy.rules must be an array of tables"),
        ({"policy": {"rules": ["x"]}}, r"entry 1: must be a table"),
        (
            {"policy": {"rules": [{"risk": "shell", "pattern": "a", "decision": "allow"}, {}]}},
            r"entry 2: risk is missing",
        ),
        (
            {"policy": {"rules": [{"risk": "disk", "pattern": "a", "decision": "allow"}]}},
            r"entry 1 \(risk = 'disk', pattern = 'a'\): risk must be one of read, .* not 'disk'",
        ),
        (
            {"policy": {"rules": [{"risk": "shell", "pattern": "a", "decision": "yes"}]}},
            r"entry 1 \(risk = 'shell', pattern = 'a'\): decision must be one of allow, ask, deny",
        ),
        (
            {"policy": {"rules": [{"risk": "read", "pattern": "", "decision": "allow"}]}},
            r"entry 1 .*: pattern: String should have at least 1 character; fix that entry",
        ),
        (
            {"policy": {"rules": [{"risk": "read", "pattern": "a", "decision": "ask", "hard": 1}]}},
            r"entry 1 .*: hard: Input should be a valid boolean",
        ),
        (
            {"policy": {"rules": [{"risk": "read", "pattern": "a", "decision": "ask",
                                   "hard": True}]}},
            r"entry 1 .*: hard = true only applies to decision = deny",
        ),
        (
            {"policy": {"rules": [{"risk": "read", "pattern": "a", "decision": "ask", "why": 1}]}},
            r"entry 1 .*: why is not a rule key asup knows",
        ),
    ],
)  # fmt: skip
def test_policy_from_config_errors_name_the_entry(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        policy_from_config(data)


def test_docs_list_the_default_policy() -> None:
    doc = Path(__file__).parents[2] / "docs" / "policy.md"
    blocks = re.findall(r"```toml\n(.*?)```", doc.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "docs/policy.md has no toml block"
    assert policy_from_config(tomllib.loads(blocks[0])) == DEFAULT_POLICY


# --- properties

texts = st.text(max_size=60)
glob_alphabet = st.text(alphabet="ab/*?.", max_size=12)


@settings(max_examples=300, deadline=None)
@given(glob_alphabet, st.text(alphabet="ab/.", max_size=12))
def test_glob_match_is_fnmatchcase_without_sets(pattern: str, text: str) -> None:
    assert glob_match(pattern, text) == fnmatch.fnmatchcase(text, pattern)


def test_glob_match_stays_fast_on_many_stars() -> None:
    assert not glob_match("*a*a*a*a*a*a*a*b", "a" * 5_000)


@settings(max_examples=200, deadline=None)
@given(
    risk=st.sampled_from(RiskClass),
    target=texts,
    agent=texts,
    tool=st.none() | texts,
    detail=st.none() | texts,
    patterns=st.lists(
        st.tuples(st.sampled_from([*RiskClass, "*"]), texts.filter(bool)), max_size=5
    ),
)
def test_evaluate_never_raises(
    risk: RiskClass,
    target: str,
    agent: str,
    tool: str | None,
    detail: str | None,
    patterns: list[tuple[str, str]],
) -> None:
    action = Action(risk=risk, target=target, agent=agent, tool=tool, detail=detail)
    extra = policy(*(rule(r, p, DENY) for r, p in patterns))
    verdict = evaluate(Policy.layered(DEFAULT_POLICY, extra), action)
    assert verdict.decision in Decision
    final = resolve_ask(verdict, approver_live=False, approved=True)
    assert final.decision is (ALLOW if verdict.decision is ALLOW else DENY)
    assert len(action.fingerprint()) == 64


@settings(max_examples=200, deadline=None)
@given(
    risk=st.sampled_from(RiskClass),
    target=st.text(),
    agent=st.text(),
    tool=st.none() | st.text(),
    detail=st.none() | st.text(),
)
def test_fingerprint_is_stable_and_field_sensitive(
    risk: RiskClass, target: str, agent: str, tool: str | None, detail: str | None
) -> None:
    action = Action(risk=risk, target=target, agent=agent, tool=tool, detail=detail)
    same = Action.model_validate_json(action.model_dump_json())
    assert same.fingerprint() == action.fingerprint()
    changed = [
        action.model_copy(update={"target": target + "x"}),
        action.model_copy(update={"agent": agent + "x"}),
        action.model_copy(update={"tool": None if tool is not None else ""}),
        action.model_copy(update={"detail": None if detail is not None else ""}),
        action.model_copy(update={"risk": R.READ if risk is not R.READ else R.WRITE}),
    ]
    assert len({a.fingerprint() for a in [action, *changed]}) == 6


def test_fingerprint_is_pinned() -> None:
    # The canonical form is a contract: grants recorded by one version are checked by the next.
    action = Action(risk=R.SHELL, target="pytest -q", agent="claude-code", tool="Bash")
    canonical = (
        b'{"agent":"claude-code","detail":null,"risk":"shell","target":"pytest -q",'
        b'"tool":"Bash","v":"asup.action.1"}'
    )
    assert action.fingerprint() == hashlib.sha256(canonical).hexdigest()
    assert Action(risk=R.SHELL, target="\ud800", agent="a").fingerprint()  # lone surrogate
