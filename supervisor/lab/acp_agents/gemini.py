"""gemini 0.61.0 (``gemini --acp``, ``@google/gemini-cli``) in the ACP lab: the Gemini API wire
(:mod:`supervisor.lab.wire_gemini`); settings from the product's recipe (model pinned, one
attempt per request, the ``gateway`` auth type for the fake endpoint). The client answers a
missing file inside the repo with empty content (gemini checks existence that way)."""

from __future__ import annotations

from typing import ClassVar

from supervisor.lab.acp_agents.base import (
    APP,
    NOTES,
    THOUGHT,
    AcpAgentLab,
    AcpScenario,
    http_500,
    plain_text,
    read_file,
    scenario_set,
    write_file,
)
from supervisor.lab.script import ToolCall

__all__ = ["GeminiAcpLab"]

SCENARIOS = scenario_set(
    # gemini shows a thought part as "**subject**\nbody": the wire sends one part per Thinking
    plain_text("A thought, then one text answer; no tools.", "**Greeting the lab**\n\n" + THOUGHT),
    read_file(
        "Read a file of the repo (read_file → fs/read_text_file), then answer from it.",
        ToolCall("read_file", {"file_path": APP}),
    ),
    write_file(
        "Create a new file with write_file; the permission request is answered "
        "proceed_once (allow_once), the write goes through fs/write_text_file.",
        ToolCall("write_file", {"file_path": "<repo>/NOTES.md", "content": NOTES}),
    ),
    http_500("Every model request answers HTTP 500; general.maxAttempts=1."),
)


class GeminiAcpLab(AcpAgentLab):
    agent_id: ClassVar[str] = "gemini-acp"
    version: ClassVar[str] = "0.61.0"
    binary_rel: ClassVar[str] = "gemini/node_modules/.bin/gemini"
    install_hint: ClassVar[str] = "scripts/install-gemini.sh"
    dummy_key: ClassVar[str] = "gemini-lab-dummy-key-not-a-secret"
    scenarios: ClassVar[dict[str, AcpScenario]] = SCENARIOS
