"""Codec for OpenAI Codex's headless stream (``codex exec --json``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, ClassVar

from supervisor.codecs.base import LineCodec, completed_or_denied, failure_outcome, pending_cut
from supervisor.events import (
    AgentSessionStarted,
    ErrorReported,
    FailureKind,
    FileChanged,
    FileChangeKind,
    MessageEmitted,
    Outcome,
    PermissionDenied,
    RunEvent,
    SeqCounter,
    ToolCallFinished,
    TurnEnded,
    Usage,
    UsageReported,
    WarningRaised,
)
from supervisor.registry import Mode
from supervisor.summary import RunSummary

WRITE_FLAGS = (
    "-s",
    "workspace-write",
    "-c",
    "sandbox_workspace_write.exclude_slash_tmp=true",
    "-c",
    "sandbox_workspace_write.exclude_tmpdir_env_var=true",
    "-c",
    "sandbox_workspace_write.network_access=false",
)


def build_argv(
    prompt: str,
    *,
    mode: Mode = Mode.READ_ONLY,
    model: str | None = None,
    resume: str | None = None,
    config: tuple[str, ...] = (),
    binary: str = "codex",
    own_sandbox: bool = True,
) -> list[str]:
    """``codex exec --json …`` (with ``resume <thread> <prompt>`` last for a follow-up).
    ``config`` items become ``-c key=value`` overrides; ``--strict-config`` makes an unknown key
    an error instead of a warning. Every ``exec`` option goes before ``resume``: the ``resume``
    subcommand has no ``-s``, and a follow-up re-asserts the same flags as the first turn.
    stdin must be /dev/null (an open pipe makes codex wait for EOF).

    ``own_sandbox=False`` is for a codex that asup already contains: codex's own bubblewrap
    cannot start inside a sandbox whose capabilities are dropped (its commands then fail
    without a stream item and codex still exits 0), so codex is told to add none
    (``-s danger-full-access``) and asup's sandbox enforces the mode: a read-only worktree
    mount, no network but the proxy."""
    argv = [binary, "exec", "--json", "--strict-config", "--skip-git-repo-check"]
    if model is not None:
        argv += ["-m", model]
    if not own_sandbox:
        argv += ["-s", "danger-full-access"]
    else:
        match mode:
            case Mode.READ_ONLY:
                argv += ["-s", "read-only"]
            case Mode.WORKTREE_WRITE:
                argv += list(WRITE_FLAGS)
    for item in config:
        argv += ["-c", item]
    if resume is not None:
        argv += ["resume", resume]
    argv.append(prompt)
    return argv


_CHANGE_KINDS: dict[str, FileChangeKind] = {
    "add": "add",
    "update": "update",
    "delete": "delete",
    "rename": "rename",
}
_TOOL_ITEMS = frozenset({"command_execution", "mcp_tool_call", "web_search", "file_change"})
_QUIET_ITEMS = frozenset({"todo_list"})
_RECONNECTING = re.compile(r"^Reconnecting\b", re.I)
# codex words both a cut connection and a response the server marked failed as
# "stream disconnected before completion: <detail>"; only a transport detail is a cut.
_DISCONNECTED = re.compile(r"^stream disconnected before completion:\s*(?P<detail>.*)$", re.S)
_TRANSPORT = re.compile(
    r"^(Transport error|error decoding response body|connection|idle timeout|stream closed)", re.I
)
_SANDBOX_BROKEN = re.compile(
    r"Refusing to create helper binaries under temporary dir|"
    r"sandbox (?:helper )?(?:could not|failed to) start|bwrap: |landlock|seccomp",
    re.I,
)
_STDERR_ERROR = re.compile(r"^\S*\s*ERROR\b[^:]*:\s*(?P<msg>.*)$")
_PATCH_REJECTED = re.compile(
    r"apply_patch|patch rejected|outside (?:of )?the (?:project|workspace)", re.I
)


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _usage(raw: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=_int(raw.get("input_tokens")),
        output_tokens=_int(raw.get("output_tokens")),
        cache_read_tokens=_int(raw.get("cached_input_tokens")),
        cache_write_tokens=_int(raw.get("cache_write_input_tokens")),
        reasoning_tokens=_int(raw.get("reasoning_output_tokens")),
    )


class CodexCliCodec(LineCodec):
    """Decodes ``codex exec --json``.

    Items arrive as ``item.started`` / ``item.updated`` / ``item.completed``; tool-like items
    (command execution, MCP calls, web search, file changes) become tool calls keyed by the item
    id. ``turn.completed`` usage is a running total per thread (reported ``cumulative`` keyed by
    the thread id). Codex reports no model name and no cost.
    """

    agent_id: ClassVar[str] = "codex-cli"

    def __init__(self, seq: SeqCounter | None = None, *, cwd: str | None = None) -> None:
        super().__init__(seq, cwd=cwd)
        self._thread: str | None = None

    def _thread_started(self, obj: dict[str, Any]) -> list[RunEvent]:
        self._thread = str(obj["thread_id"])
        return [AgentSessionStarted(self.seq(), self._thread, None)]

    def _turn_started(self, obj: dict[str, Any]) -> list[RunEvent]:
        del obj
        return []

    def _item_started(self, obj: dict[str, Any]) -> list[RunEvent]:
        item = obj["item"]
        itype = item["type"]
        if itype in _TOOL_ITEMS:
            return [self._start_call(item.get("id"), self._tool_name(item), self._tool_input(item))]
        if itype in ("agent_message", "reasoning", "error") or itype in _QUIET_ITEMS:
            return []
        return [self._unrecognized(json.dumps(obj), f"unknown item type {itype!r}")]

    def _item_updated(self, obj: dict[str, Any]) -> list[RunEvent]:
        itype = obj["item"]["type"]
        if itype in _TOOL_ITEMS or itype in _QUIET_ITEMS or itype in ("agent_message", "reasoning"):
            return []
        return [self._unrecognized(json.dumps(obj), f"unknown item type {itype!r}")]

    @staticmethod
    def _tool_name(item: dict[str, Any]) -> str:
        itype = str(item["type"])
        if itype == "mcp_tool_call":
            return f"mcp:{item.get('server')}/{item.get('tool')}"
        return itype

    @staticmethod
    def _tool_input(item: dict[str, Any]) -> Any:
        itype = item["type"]
        if itype == "command_execution":
            return {"command": item.get("command")}
        if itype == "file_change":
            return {"changes": item.get("changes")}
        if itype == "web_search":
            return {"query": item.get("query")}
        return item.get("arguments")

    def _item_completed(self, obj: dict[str, Any]) -> list[RunEvent]:
        item = obj["item"]
        itype = item["type"]
        if itype == "agent_message":
            return [MessageEmitted(self.seq(), item["text"], False, item.get("id"))]
        if itype == "reasoning":
            return [MessageEmitted(self.seq(), item["text"], True, item.get("id"))]
        if itype == "error":
            return [WarningRaised(self.seq(), str(item["message"]), "item_error")]
        if itype in _QUIET_ITEMS:
            return []
        if itype not in _TOOL_ITEMS:
            return [self._unrecognized(json.dumps(obj), f"unknown item type {itype!r}")]
        out: list[RunEvent] = []
        raw_id = item.get("id")
        call_id = raw_id if isinstance(raw_id, str) and raw_id in self._pending else None
        if call_id is None:
            started = self._start_call(raw_id, self._tool_name(item), self._tool_input(item))
            out.append(started)
            call_id = started.call_id
        del self._pending[call_id]
        status = item.get("status")
        exit_code = _int(item.get("exit_code"))
        ok = status == "completed" and exit_code in (None, 0)
        output = item.get("aggregated_output")
        if output is None and itype == "mcp_tool_call":
            output = json.dumps(item.get("result") or item.get("error"))
        out.append(
            ToolCallFinished(
                self.seq(), call_id, ok, output if isinstance(output, str) else None, exit_code
            )
        )
        if itype == "file_change" and status == "completed":
            for change in item["changes"]:
                kind = _CHANGE_KINDS.get(str(change.get("kind")), "unknown")
                out.append(FileChanged(self.seq(), self._relpath(str(change["path"])), kind))
        return out

    def _turn_completed(self, obj: dict[str, Any]) -> list[RunEvent]:
        out: list[RunEvent] = []
        usage = obj.get("usage")
        if type(usage) is dict:
            out.append(UsageReported(self.seq(), _usage(usage), "cumulative", self._thread))
        out.append(self._turn_ended(TurnEnded(self.seq(), True, None, 1)))
        return out

    def _turn_failed(self, obj: dict[str, Any]) -> list[RunEvent]:
        error = obj.get("error")
        message = error.get("message") if type(error) is dict else None
        text = message if isinstance(message, str) else "codex reported a failed turn"
        return [self._codex_error(text), self._turn_ended(TurnEnded(self.seq(), False, None, 1))]

    def _codex_error(self, message: str, *, fatal: bool = True) -> ErrorReported:
        m = _DISCONNECTED.match(message)
        if m is None or _TRANSPORT.match(m["detail"]):
            return self._error(message, fatal=fatal)
        # The server failed the response in-stream: classify its message like an HTTP error;
        # a failure it gives no recognisable reason for is the server's.
        ev = self._error(m["detail"], fatal=fatal)
        kind = FailureKind.SERVER_ERROR if ev.kind is FailureKind.UNKNOWN else ev.kind
        return ErrorReported(ev.seq, message, kind, None, fatal, ev.usage_limited)

    def _error_event(self, obj: dict[str, Any]) -> list[RunEvent]:
        message = str(obj["message"])
        return [self._codex_error(message, fatal=not _RECONNECTING.match(message))]

    HANDLERS: ClassVar[dict[str, Callable[[Any, dict[str, Any]], list[RunEvent]]]] = {
        "thread.started": _thread_started,
        "turn.started": _turn_started,
        "item.started": _item_started,
        "item.updated": _item_updated,
        "item.completed": _item_completed,
        "turn.completed": _turn_completed,
        "turn.failed": _turn_failed,
        "error": _error_event,
    }

    def stderr_events(self, stderr_tail: str) -> list[RunEvent]:
        """Codex says some things only on stderr: a sandbox that could not start (the run still
        exits 0) and an apply_patch it rejected (no JSON item at all)."""
        out: list[RunEvent] = []
        for line in stderr_tail.splitlines():
            if _SANDBOX_BROKEN.search(line):
                out.append(
                    ErrorReported(
                        self.seq(), line.strip(), FailureKind.SANDBOX_UNAVAILABLE, None, True
                    )
                )
                continue
            m = _STDERR_ERROR.match(line.strip())
            if m and _PATCH_REJECTED.search(line):
                out.append(PermissionDenied(self.seq(), "apply_patch", None, None, m["msg"]))
        return out

    def classify(self, exit_code: int | None, stderr_tail: str, summary: RunSummary) -> Outcome:
        sandbox = [e for e in summary.errors if e.kind is FailureKind.SANDBOX_UNAVAILABLE]
        if sandbox:
            return Outcome.failed(FailureKind.SANDBOX_UNAVAILABLE, sandbox[0].message)
        last = summary.last_turn
        if last is None or not last.ok:
            cut = pending_cut(summary)
            if cut is not None:
                return cut
            if last is None and exit_code == 0 and not summary.fatal_errors:
                return Outcome.failed(
                    FailureKind.PROTOCOL, "codex exited 0 without completing a turn"
                )
            return failure_outcome(summary, exit_code, stderr_tail, "codex ended without a turn")
        if exit_code not in (0, None):
            return failure_outcome(
                summary, exit_code, stderr_tail, "codex completed its turn but exited non-zero"
            )
        return completed_or_denied(summary)
