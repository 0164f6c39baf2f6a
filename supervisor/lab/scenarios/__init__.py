"""Lab scenarios: what one recorded run of a vendor CLI is meant to show, as data.

A :class:`Scenario` names the seed files of a scratch git repo, the mode the CLI runs in, extra
environment variables, and one or more :class:`Step` values (one CLI invocation each: a prompt
plus the replies the fake model server gives during that invocation). :class:`Expect` states what
a correct run looks like, independently of any codec: exit code, outcome, tools called, files
changed on disk, text the final answer contains.

Tool inputs and texts may hold path placeholders, replaced when a run is prepared
(:func:`bind_replies`):

- ``<repo>``: the scratch repo (the CLI's cwd), an absolute path;
- ``<outside>``: an existing empty directory outside the repo (a sibling of it);
- ``<home>``: the per-run HOME.

Scenario sets live one module per agent (``scenarios/claude.py``, ``scenarios/codex.py``), each
exposing ``SCENARIOS: dict[str, Scenario]``; :func:`scenarios_for` loads one lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from supervisor.events import FailureKind, FileChangeKind, OutcomeStatus
from supervisor.lab.script import Block, Reply, Script, Text, Thinking, ToolCall
from supervisor.registry import Mode

__all__ = [
    "PLACEHOLDERS",
    "Expect",
    "Scenario",
    "SessionUse",
    "Step",
    "UnknownScenarioError",
    "bind_replies",
    "get_scenario",
    "scenarios_for",
]

PLACEHOLDERS = ("<repo>", "<outside>", "<home>")

SessionUse = Literal["none", "new", "resume"]

# agent id → module holding its SCENARIOS dict
_MODULES: dict[str, str] = {
    "claude-cli": "supervisor.lab.scenarios.claude",
    "codex-cli": "supervisor.lab.scenarios.codex",
}


@dataclass(frozen=True, slots=True)
class Step:
    """One CLI invocation.

    ``session``: ``"none"`` runs a fresh session; ``"new"`` starts a session whose id the run
    keeps (the agent lab may choose the id up front, e.g. claude's ``--session-id``, or read it
    from the stdout afterwards, e.g. codex's ``thread.started``); ``"resume"`` resumes the id
    kept by the last ``"new"`` step. ``exit_code`` is the expected exit code of this invocation
    (``None``: only the last step's, in :class:`Expect`, is checked).
    """

    prompt: str
    replies: tuple[Reply, ...]
    session: SessionUse = "none"
    exit_code: int | None = None

    def script(self, mapping: Mapping[str, str]) -> Script:
        """A fresh server script for this step with placeholders bound."""
        return Script(list(bind_replies(self.replies, mapping)))


@dataclass(frozen=True, slots=True)
class Expect:
    """What a correct run of the scenario shows, checked without any codec.

    - ``exit_code``: the last invocation's exit code;
    - ``status`` / ``failure_kind``: the outcome a codec must classify the run as;
    - ``tools``: names of the tools the model called, in order, over all steps;
    - ``failed_tools``: names of the calls whose tool result is an error, in order;
    - ``files``: repo-relative path → change kind vs the base commit; exactly these change;
    - ``final_text_contains``: substrings of the final answer (result text / last message);
    - ``denied_tools``: tool names the CLI must report as permission denials;
    - ``absent_paths``: paths (placeholders allowed) that must not exist after the run.
    """

    exit_code: int
    status: OutcomeStatus
    failure_kind: FailureKind | None = None
    tools: tuple[str, ...] = ()
    failed_tools: tuple[str, ...] = ()
    files: Mapping[str, FileChangeKind] = field(default_factory=dict)
    final_text_contains: tuple[str, ...] = ()
    denied_tools: tuple[str, ...] = ()
    absent_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Scenario:
    """One recorded situation. ``timeout_s`` bounds each invocation (killed after it)."""

    name: str
    description: str
    steps: tuple[Step, ...]
    expect: Expect
    mode: Mode = Mode.READ_ONLY
    seed_files: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 60.0


def _bind_value(value: Any, mapping: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for key, sub in mapping.items():
            value = value.replace(key, sub)
        return value
    if isinstance(value, dict):
        return {k: _bind_value(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_bind_value(v, mapping) for v in value]
    return value


def _bind_block(block: Block, mapping: Mapping[str, str]) -> Block:
    match block:
        case Text(text=text):
            return Text(_bind_value(text, mapping))
        case Thinking(text=text):
            return Thinking(_bind_value(text, mapping))
        case ToolCall(input=value):
            return replace(block, input=_bind_value(value, mapping))


def bind_replies(replies: tuple[Reply, ...], mapping: Mapping[str, str]) -> tuple[Reply, ...]:
    """Replace placeholders (e.g. ``<repo>``) in every text and tool input."""
    return tuple(
        replace(r, blocks=tuple(_bind_block(b, mapping) for b in r.blocks)) for r in replies
    )


class UnknownScenarioError(LookupError):
    pass


def scenarios_for(agent_id: str) -> dict[str, Scenario]:
    """The scenario set of one agent, by name."""
    try:
        module_name = _MODULES[agent_id]
    except KeyError:
        raise UnknownScenarioError(f"no lab scenarios for agent {agent_id!r}") from None
    module = importlib.import_module(module_name)
    scenarios: dict[str, Scenario] = module.SCENARIOS
    return scenarios


def get_scenario(agent_id: str, name: str) -> Scenario:
    scenarios = scenarios_for(agent_id)
    try:
        return scenarios[name]
    except KeyError:
        known = ", ".join(sorted(scenarios))
        raise UnknownScenarioError(
            f"no scenario {name!r} for {agent_id}: known scenarios are {known}"
        ) from None
