"""claude-agent-acp 0.23.1 (``@zed-industries/claude-agent-acp``) in the ACP lab: the Anthropic
Messages wire; every scenario of docs/acp.md. It ignores stdin close (SIGTERM ends it)."""

from __future__ import annotations

from typing import ClassVar

from supervisor.lab.acp_agents.base import (
    APP,
    NOTES,
    AcpAgentLab,
    AcpScenario,
    http_500,
    plain_text,
    read_file,
    scenario_set,
    write_file,
)
from supervisor.lab.script import ToolCall

__all__ = ["ClaudeAcpLab"]

SCENARIOS = scenario_set(
    plain_text("A thinking block, then one text answer; no tools."),
    read_file(
        "Read a file of the repo, then answer from it.", ToolCall("Read", {"file_path": APP})
    ),
    write_file(
        "Create a new file with Write; the permission request is answered 'allow'.",
        ToolCall("Write", {"file_path": "<repo>/NOTES.md", "content": NOTES}),
    ),
    http_500(
        "Every model request answers HTTP 500; retries bounded by CLAUDE_CODE_MAX_RETRIES=1.",
        env={"CLAUDE_CODE_MAX_RETRIES": "1"},
    ),
)


class ClaudeAcpLab(AcpAgentLab):
    agent_id: ClassVar[str] = "claude-acp"
    version: ClassVar[str] = "0.23.1"
    binary_rel: ClassVar[str] = "acp/node_modules/.bin/claude-agent-acp"
    install_hint: ClassVar[str] = "scripts/install-acp-vendors.sh"
    dummy_key: ClassVar[str] = "sk-ant-lab-dummy-key-not-a-secret"
    scenarios: ClassVar[dict[str, AcpScenario]] = SCENARIOS
