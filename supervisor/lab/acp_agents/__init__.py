"""ACP agent labs: the per-agent half of the ACP recorder (see
:mod:`supervisor.lab.acp_agents.base`); the recorder itself is :mod:`supervisor.lab.acp_record`."""

from __future__ import annotations

from supervisor.lab.acp_agents.base import AcpAgentLab, AcpContext, AcpLaunch, AcpScenario
from supervisor.lab.acp_agents.claude import ClaudeAcpLab
from supervisor.lab.acp_agents.codex import CodexAcpLab
from supervisor.lab.acp_agents.gemini import GeminiAcpLab
from supervisor.lab.acp_agents.opencode import OpencodeAcpLab

__all__ = [
    "ACP_LABS",
    "AcpAgentLab",
    "AcpContext",
    "AcpLaunch",
    "AcpScenario",
    "UnknownAcpLabError",
    "get_acp_lab",
]

ACP_LABS: dict[str, type[AcpAgentLab]] = {
    lab.agent_id: lab for lab in (ClaudeAcpLab, CodexAcpLab, GeminiAcpLab, OpencodeAcpLab)
}


class UnknownAcpLabError(LookupError):
    pass


def get_acp_lab(agent_id: str) -> AcpAgentLab:
    if agent_id not in ACP_LABS:
        known = ", ".join(sorted(ACP_LABS))
        raise UnknownAcpLabError(f"no ACP lab for {agent_id!r}: known are {known}")
    return ACP_LABS[agent_id]()
