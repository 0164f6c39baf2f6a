"""opencode 1.18.33 (``opencode acp --pure``, ``opencode-ai``) in the ACP lab: Chat
Completions (:mod:`supervisor.lab.wire_chat`) through the recipe's ``@ai-sdk/openai-compatible``
provider. The model is ``lab-model``: to a GPT-5 family name opencode offers ``apply_patch``
instead of ``write``/``edit``. A failing model is retried silently for ever, so http_500 ends
with the client's ``session/cancel`` after 60 s. opencode exits by itself when stdin closes."""

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

__all__ = ["MODEL", "OpencodeAcpLab"]

MODEL = "lab-model"
SCENARIOS = scenario_set(
    plain_text("Reasoning, then one text answer; no tools."),
    read_file(
        "Read a file of the repo with opencode's read tool, then answer from it.",
        ToolCall("read", {"filePath": APP}),
    ),
    write_file(
        "Create a new file with opencode's write tool; the permission request is answered "
        "with its allow-once option.",
        ToolCall("write", {"filePath": "<repo>/NOTES.md", "content": NOTES}),
    ),
    http_500("Every model request answers HTTP 500.", repeat=50, timeout_s=60.0),
)


class OpencodeAcpLab(AcpAgentLab):
    agent_id: ClassVar[str] = "opencode-acp"
    version: ClassVar[str] = "1.18.33"
    binary_rel: ClassVar[str] = "opencode/node_modules/.bin/opencode"
    install_hint: ClassVar[str] = "scripts/install-opencode.sh"
    dummy_key: ClassVar[str] = "sk-lab-dummy-key-not-a-secret"
    model: ClassVar[str | None] = MODEL
    stdin_close_grace_s: ClassVar[float] = 3.0
    scenarios: ClassVar[dict[str, AcpScenario]] = SCENARIOS
