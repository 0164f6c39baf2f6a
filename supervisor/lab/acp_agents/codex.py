"""codex-acp 0.16.0 (``@zed-industries/codex-acp``) in the ACP lab: the OpenAI Responses wire
(:mod:`supervisor.lab.wire_openai`) and the product's recipe (``CODEX_HOME=$HOME/.codex``
with codex's offline config, ``approval_policy = "untrusted"``, ``sandbox_mode =
"danger-full-access"``, no websockets, no shell snapshots; model ``gpt-5.3-codex``).

The model's tools are codex's own: ``exec_command`` (``{"cmd": …}``) runs a shell command,
``apply_patch`` is a custom (freeform) tool whose input is the patch text. Under ``untrusted``
a command codex does not know to be read-only, and every patch, is a permission request whose
options are ``approved`` (allow_once) and ``abort`` (reject_once). It ignores stdin close
(SIGTERM ends it)."""

from __future__ import annotations

from typing import ClassVar

from supervisor.lab.acp_agents.base import (
    NOTES,
    AcpAgentLab,
    AcpScenario,
    Answer,
    http_500,
    plain_text,
    read_file,
    scenario_set,
    write_file,
)
from supervisor.lab.script import Reply, Text, ToolCall
from supervisor.registry import Mode

__all__ = ["CodexAcpLab"]

PATCH = f"*** Begin Patch\n*** Add File: NOTES.md\n+{NOTES}*** End Patch\n"
COMMAND = "echo approved > OUT.txt"


def _shell(name: str, description: str, answer: Answer, reply: str) -> AcpScenario:
    """The model runs COMMAND with exec_command; a write run."""
    return AcpScenario(
        name,
        description,
        "Write the word approved into OUT.txt.",
        (Reply((ToolCall("exec_command", {"cmd": COMMAND}),)), Reply((Text(reply),))),
        mode=Mode.WORKTREE_WRITE,
        answer=answer,
    )


SCENARIOS = scenario_set(
    plain_text("A reasoning summary, then one text answer; no tools."),
    read_file(
        "Read a file of the repo with exec_command `cat` (a known read-only command: no "
        "permission request), then answer from it.",
        ToolCall("exec_command", {"cmd": "cat src/app.py"}),
    ),
    write_file(
        "Create a new file with apply_patch (a custom tool call); the permission request is "
        "answered with its allow_once option (approved).",
        ToolCall("apply_patch", PATCH, kind="custom"),
    ),
    _shell(
        "shell_command",
        f"exec_command `{COMMAND}` (not known read-only: a permission request), answered "
        "with its allow_once option (approved); the command runs.",
        "allow",
        "Wrote OUT.txt.",
    ),
    _shell(
        "permission_rejected",
        f"exec_command `{COMMAND}`; the permission request is answered with its reject "
        "option (abort); the command never runs.",
        "reject",
        "I was not allowed to write OUT.txt.",
    ),
    http_500(
        "Every model request answers HTTP 500 (the recipe sets request_max_retries and "
        "stream_max_retries to 1)."
    ),
    AcpScenario(
        "cancel",
        "The model's answer stops after 7 events (three text deltas) and the stream stays "
        "open; the client sends session/cancel 1 s after the server held it.",
        "Think for a long time.",
        (Reply((Text("Working on it, this takes a while. " * 5),), hold_after_events=7),),
        cancel="hold",
        timeout_s=60.0,
    ),
)


class CodexAcpLab(AcpAgentLab):
    agent_id: ClassVar[str] = "codex-acp"
    version: ClassVar[str] = "0.16.0"
    binary_rel: ClassVar[str] = "acp/node_modules/.bin/codex-acp"
    install_hint: ClassVar[str] = "scripts/install-acp-vendors.sh"
    dummy_key: ClassVar[str] = "sk-lab-dummy-key-not-a-secret"
    scenarios: ClassVar[dict[str, AcpScenario]] = SCENARIOS
