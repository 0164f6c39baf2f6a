"""Codec for Claude Code's headless stream (``claude -p … --output-format stream-json``)."""

from __future__ import annotations

import json

from supervisor.registry import Mode

READ_ONLY_TOOLS = ("Read", "Grep", "Glob")
WRITE_TOOLS = ("Read", "Grep", "Glob", "Edit", "Write")


def build_argv(
    prompt: str,
    *,
    mode: Mode = Mode.READ_ONLY,
    model: str | None = None,
    session_id: str | None = None,
    resume: str | None = None,
    binary: str = "claude",
) -> list[str]:
    """The headless argv. The prompt sits right after ``-p``: ``--tools`` takes several values
    and would swallow a prompt placed after it. No MCP server is loaded (strict, empty config).
    """
    argv = [binary, "-p", prompt, "--output-format", "stream-json", "--verbose"]
    if model is not None:
        argv += ["--model", model]
    argv += ["--strict-mcp-config", "--mcp-config", json.dumps({"mcpServers": {}})]
    match mode:
        case Mode.READ_ONLY:
            argv += ["--tools", ",".join(READ_ONLY_TOOLS)]
        case Mode.WORKTREE_WRITE:
            argv += ["--tools", ",".join(WRITE_TOOLS), "--permission-mode", "acceptEdits"]
    if session_id is not None:
        argv += ["--session-id", session_id]
    if resume is not None:
        argv += ["--resume", resume]
    return argv
