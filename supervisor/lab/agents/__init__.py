"""Agent labs: the per-agent half of the vendor lab (see :mod:`supervisor.lab.agents.base`)."""

from __future__ import annotations

import importlib

from supervisor.lab.agents.base import AgentLab, RunContext

__all__ = ["LABS", "AgentLab", "RunContext", "UnknownLabError", "get_lab"]

# agent id → "module:Class"; modules are imported on first use
LABS: dict[str, str] = {
    "claude-cli": "supervisor.lab.agents.claude:ClaudeLab",
    "codex-cli": "supervisor.lab.agents.codex:CodexLab",
}


class UnknownLabError(LookupError):
    pass


def get_lab(agent_id: str) -> AgentLab:
    try:
        target = LABS[agent_id]
    except KeyError:
        known = ", ".join(sorted(LABS))
        raise UnknownLabError(f"no lab for agent {agent_id!r}: known are {known}") from None
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    lab = cls()
    if not isinstance(lab, AgentLab):
        raise TypeError(f"{target} is not an AgentLab")
    return lab
