"""Codec for Claude Code's headless stream (``claude -p … --output-format stream-json``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from supervisor.codecs.base import LineCodec, completed_or_denied, failure_outcome, pending_cut
from supervisor.events import (
    AgentSessionStarted,
    FailureKind,
    FileChanged,
    MessageEmitted,
    Outcome,
    OutcomeStatus,
    PermissionDenied,
    RunEvent,
    ToolCallFinished,
    TurnEnded,
    Usage,
    UsageReported,
)
from supervisor.registry import Mode
from supervisor.summary import RunSummary

READ_ONLY_TOOLS = ("Read", "Grep", "Glob")
WRITE_TOOLS = ("Read", "Grep", "Glob", "Edit", "Write")


def build_argv(
    prompt: str,
    *,
    mode: Mode = Mode.READ_ONLY,
    model: str | None = None,
    session_id: str | None = None,
    resume: str | None = None,
    max_turns: int | None = None,
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
    if max_turns is not None:
        argv += ["--max-turns", str(max_turns)]
    if session_id is not None:
        argv += ["--session-id", session_id]
    if resume is not None:
        argv += ["--resume", resume]
    return argv


_FILE_TOOLS = {"Write": "add", "Edit": "update", "MultiEdit": "update", "NotebookEdit": "update"}
_KNOWN_SYSTEM = frozenset(
    {
        "status",
        "thinking_tokens",
        "compact_boundary",
        "hook_started",
        "hook_response",
        "hook_progress",
        "files_persisted",
        "task_started",
        "task_progress",
        "task_notification",
        "informational",
        "local_command_output",
    }
)


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _usage(raw: object, cost: object = None) -> Usage:
    u: dict[str, Any] = raw if type(raw) is dict else {}
    get = u.get
    i, o = get("input_tokens"), get("output_tokens")
    cr, cw = get("cache_read_input_tokens"), get("cache_creation_input_tokens")
    c = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
    return Usage(
        i if type(i) is int else None,
        o if type(o) is int else None,
        cr if type(cr) is int else None,
        cw if type(cw) is int else None,
        None,  # claude reports no reasoning-token figure
        c,
        "USD" if c is not None else None,
    )


def _text_of(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") for b in content if type(b) is dict and b.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return None


class ClaudeCliCodec(LineCodec):
    """Decodes ``claude -p --output-format stream-json --verbose``.

    ``assistant`` events carry one content block each; blocks of one model message share
    ``message.id`` and repeat its usage, so usage is reported per message (keyed by id) and the
    ``result`` event's total for the prompt is reported per turn (authoritative in the fold).
    """

    agent_id: ClassVar[str] = "claude-cli"
    _usage_mid: str | None = None
    _usage_seen: dict[str, Any] | None = None

    def _system(self, obj: dict[str, Any]) -> list[RunEvent]:
        sub = obj.get("subtype")
        if sub == "init":
            cwd = obj.get("cwd")
            if self.cwd is None and isinstance(cwd, str) and cwd:
                self.cwd = cwd.rstrip("/")
            model = obj.get("model")
            return [
                AgentSessionStarted(
                    self.seq(), str(obj["session_id"]), model if isinstance(model, str) else None
                )
            ]
        if sub == "api_retry":
            status = _int(obj.get("error_status"))
            msg = (
                f"API request failed (HTTP {status if status is not None else '?'}), "
                f"retry {obj.get('attempt')} of {obj.get('max_retries')}"
            )
            return [self._error(msg, status, fatal=False)]
        if sub in _KNOWN_SYSTEM:
            return []
        return [self._unrecognized(json.dumps(obj), f"unknown system subtype {sub!r}")]

    def _assistant(self, obj: dict[str, Any]) -> list[RunEvent]:
        msg = obj["message"]
        mid = msg.get("id")
        mid = mid if isinstance(mid, str) else None
        out: list[RunEvent] = []
        for block in msg["content"]:
            btype = block["type"]
            if btype == "text":
                out.append(MessageEmitted(self.seq(), block["text"], False, mid))
            elif btype == "thinking":
                out.append(MessageEmitted(self.seq(), block["thinking"], True, mid))
            elif btype == "redacted_thinking":
                out.append(MessageEmitted(self.seq(), "[redacted thinking]", True, mid))
            elif btype in ("tool_use", "server_tool_use"):
                out.append(self._start_call(block.get("id"), block["name"], block.get("input")))
            else:
                out.append(self._unrecognized(json.dumps(block), f"unknown block {btype!r}"))
        error = obj.get("error")
        if isinstance(error, str):
            text = _text_of(msg["content"]) or error
            status = _int(obj.get("api_error_status"))
            out.append(self._error(f"{text} [{error}]", status))
        usage = msg.get("usage")
        # Each content block of a message repeats the message's usage: report it once.
        if (
            type(usage) is dict
            and msg.get("model") != "<synthetic>"
            and (mid is None or mid != self._usage_mid or usage != self._usage_seen)
        ):
            self._usage_mid, self._usage_seen = mid, usage
            out.append(UsageReported(self.seq(), _usage(usage), "message", mid))
        return out

    def _user(self, obj: dict[str, Any]) -> list[RunEvent]:
        content = obj["message"]["content"]
        if isinstance(content, str):
            return []
        out: list[RunEvent] = []
        extra = obj.get("tool_use_result")
        for block in content:
            if block.get("type") != "tool_result":
                continue
            call_id = block["tool_use_id"]
            ok = not block.get("is_error", False)
            started = self._pending.pop(call_id, None)
            out.append(ToolCallFinished(self.seq(), call_id, ok, _text_of(block.get("content"))))
            if ok and started is not None and started.name in _FILE_TOOLS:
                path = started.input.get("file_path") if type(started.input) is dict else None
                if isinstance(path, str):
                    kind = _FILE_TOOLS[started.name]
                    if type(extra) is dict and extra.get("type") in ("create", "update"):
                        kind = "add" if extra["type"] == "create" else "update"
                    out.append(FileChanged(self.seq(), self._relpath(path), kind))  # type: ignore[arg-type]
        return out

    def _result(self, obj: dict[str, Any]) -> list[RunEvent]:
        subtype = obj.get("subtype")
        is_error = bool(obj.get("is_error")) or subtype != "success"
        text = obj.get("result")
        out: list[RunEvent] = []
        for d in obj.get("permission_denials") or ():
            tool_input = d.get("tool_input")
            path = tool_input.get("file_path") if type(tool_input) is dict else None
            out.append(
                PermissionDenied(
                    self.seq(),
                    str(d.get("tool_name")),
                    d.get("tool_use_id"),
                    path if isinstance(path, str) else None,
                )
            )
        if is_error:
            status = _int(obj.get("api_error_status"))
            errors = obj.get("errors")
            message = (
                text
                if isinstance(text, str) and text
                else "; ".join(map(str, errors))
                if isinstance(errors, list) and errors
                else f"claude reported {subtype}"
            )
            out.append(self._error(message, status))
        if type(obj.get("usage")) is dict or obj.get("total_cost_usd") is not None:
            usage = _usage(obj.get("usage"), obj.get("total_cost_usd"))
            out.append(UsageReported(self.seq(), usage, "turn", obj.get("session_id")))
        reason = obj.get("terminal_reason")
        out.append(
            self._turn_ended(
                TurnEnded(
                    self.seq(),
                    not is_error,
                    text if isinstance(text, str) else None,
                    _int(obj.get("num_turns")),
                    _int(obj.get("duration_ms")),
                    subtype if isinstance(subtype, str) else None,
                    reason if isinstance(reason, str) else None,
                )
            )
        )
        return out

    def _ignore(self, obj: dict[str, Any]) -> list[RunEvent]:
        del obj
        return []

    HANDLERS: ClassVar[dict[str, Callable[[Any, dict[str, Any]], list[RunEvent]]]] = {
        "system": _system,
        "assistant": _assistant,
        "user": _user,
        "result": _result,
        "stream_event": _ignore,
        "control_response": _ignore,
        "rate_limit_event": _ignore,
    }

    def classify(self, exit_code: int | None, stderr_tail: str, summary: RunSummary) -> Outcome:
        last = summary.last_turn
        if last is None:
            cut = pending_cut(summary)
            if cut is not None:
                return cut
            if exit_code == 0 and not summary.fatal_errors:
                return Outcome.failed(
                    FailureKind.PROTOCOL, "claude exited 0 without reporting a result"
                )
            return failure_outcome(summary, exit_code, stderr_tail, "claude ended without a result")
        if last.stop_reason in ("aborted_streaming", "aborted_tools", "interrupted"):
            return Outcome(OutcomeStatus.CANCELED, None, f"interrupted ({last.stop_reason})")
        if not last.ok:
            # HTTP 500 ends in a `result` whose subtype says success but is_error is true.
            if last.subtype == "error_max_turns":
                # The turn budget ran out: a budget, like the wall clock, not a failure.
                return Outcome(
                    OutcomeStatus.TIMED_OUT, None, "claude stopped at the turn budget (--max-turns)"
                )
            return failure_outcome(
                summary, exit_code, stderr_tail, f"claude reported {last.subtype}"
            )
        if exit_code not in (0, None):
            return failure_outcome(
                summary, exit_code, stderr_tail, "claude reported success but exited non-zero"
            )
        return completed_or_denied(summary)
