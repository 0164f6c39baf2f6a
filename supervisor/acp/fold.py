"""ACP JSON-RPC messages → :data:`~supervisor.events.RunEvent` values. Pure: no I/O, no clock.

:class:`AcpFold` takes every JSON-RPC message of one ACP connection, both directions, in the
order they were sent or received (``feed(message, "out")`` for client → agent, ``"in"`` for
agent → client), and returns the events each one completes, numbered from one per-run
:class:`~supervisor.events.SeqCounter`. ``close()`` ends the stream. Nothing raises: a message
of a shape the fold does not know becomes one ``Unrecognized`` event (the drift signal), and the
sequence numbers a half-handled message took are given back.

Text chunks: ``agent_message_chunk`` / ``agent_thought_chunk`` texts are accumulated and one
``MessageEmitted`` is made when the message ends. A message ends at the first of: a chunk of the
other kind (reply ↔ thought), a chunk with a different ``messageId``, any other
``session/update``, any other message from the agent (a request, a response), or ``close()``.
A message whose text is empty (claude-agent-acp opens each block with an empty chunk) emits
nothing.

See docs/acp.md for the whole mapping.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from supervisor.codecs.base import classify_error_text
from supervisor.events import (
    AgentSessionStarted,
    ErrorReported,
    FailureKind,
    FileChanged,
    FileChangeKind,
    MessageEmitted,
    Outcome,
    OutcomeStatus,
    PermissionDenied,
    RunEvent,
    SeqCounter,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    Unrecognized,
    Usage,
    UsageReported,
    WarningRaised,
)

__all__ = ["QUIET_UPDATES", "AcpFold", "Direction", "outcome_for_stop_reason"]

Direction = Literal["in", "out"]

# session/update kinds that are recognized and make no event.
QUIET_UPDATES = frozenset(
    {
        "plan",
        "current_mode_update",
        "available_commands_update",
        "config_option_update",
        "session_info_update",
        "user_message_chunk",
    }
)
# Requests from the agent that are recognized and make no event (the client serves them).
_QUIET_AGENT_REQUESTS = frozenset(
    {
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/release",
        "terminal/wait_for_exit",
        "terminal/kill",
    }
)
_STATUS_IN_TEXT = re.compile(r"\b(?:API Error|status(?: code)?|HTTP)[: ]+([1-5]\d\d)\b", re.I)
_RAW_CAP = 2000


def outcome_for_stop_reason(stop_reason: object) -> Outcome:
    """The outcome of a run whose last ``session/prompt`` answered ``stop_reason``.

    ``end_turn`` → completed; ``cancelled`` → canceled; ``refusal`` → refused; ``max_tokens``
    and ``max_turn_requests`` → timed_out (the agent stopped at a budget before it was done, as
    claude's ``error_max_turns`` does); anything else → failed/protocol.
    """
    match stop_reason:
        case "end_turn":
            return Outcome(OutcomeStatus.COMPLETED)
        case "cancelled":
            return Outcome(OutcomeStatus.CANCELED, None, "the prompt was cancelled")
        case "refusal":
            return Outcome(OutcomeStatus.REFUSED, None, "the agent refused to continue")
        case "max_tokens":
            return Outcome(OutcomeStatus.TIMED_OUT, None, "the model hit its token limit")
        case "max_turn_requests":
            return Outcome(OutcomeStatus.TIMED_OUT, None, "the agent hit its turn budget")
        case _:
            return Outcome.failed(FailureKind.PROTOCOL, f"unknown stop reason {stop_reason!r}")


def _raw(message: object) -> str:
    try:
        text = json.dumps(message, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(message)
    return text[:_RAW_CAP]


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text_of(content: object) -> str | None:
    """The text of a ``ToolCallContent`` list (``content`` blocks of type text)."""
    if not isinstance(content, list):
        return None
    parts: list[str] = []
    for item in content:
        block = _dict(_dict(item).get("content"))
        if _dict(item).get("type") == "content" and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts) if parts else None


class _Call:
    __slots__ = ("denied", "diffs", "finished", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.diffs: dict[str, FileChangeKind] = {}
        self.finished = False
        self.denied = False  # our answer to its permission request was a refusal


CALLS_KEPT = 4096
"""Tool calls the fold remembers (every unfinished one, and the newest finished ones)."""


class AcpFold:
    """One ACP connection's messages → run events (see the module docstring)."""

    def __init__(self, seq: SeqCounter | None = None, *, cwd: str | None = None) -> None:
        self.seq = seq if seq is not None else SeqCounter()
        self.cwd = cwd.rstrip("/") if cwd else None
        self.unrecognized = 0
        self.session_id: str | None = None
        self._requests: dict[object, tuple[str, dict[str, Any]]] = {}  # ours, by id
        self._agent_requests: dict[object, tuple[str, dict[str, Any]]] = {}  # theirs, by id
        self._chunk_kind: str | None = None
        self._chunk_id: str | None = None
        self._chunks: list[str] = []
        self._calls: dict[str, _Call] = {}
        self._synthetic = 0
        self._turn_text: str | None = None
        self._cost: dict[str, Usage] = {}
        self._closed = False
        self._agent_name: str | None = None  # initialize's agentInfo.name
        self._prompts = 0
        self._partial_said = False

    # -- the stream -------------------------------------------------------------------------

    def feed(self, message: object, direction: Direction = "in") -> list[RunEvent]:
        """The events ``message`` completes. ``direction``: ``"in"`` agent → client,
        ``"out"`` client → agent."""
        mark = self.seq.issued
        try:
            if not isinstance(message, dict):
                return [self._unknown(message, "not a JSON object")]
            if direction == "out":
                return self._outgoing(message)
            if direction == "in":
                return self._incoming(message)
            return [self._unknown(message, f"unknown direction {direction!r}")]
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            self.seq.rewind(mark)
            return [self._unknown(message, f"malformed message ({type(exc).__name__})")]

    def feed_record(self, record: object) -> list[RunEvent]:
        """One fixture line: ``{"direction": "in"|"out", "message": {…}}``."""
        rec = _dict(record)
        direction = rec.get("direction")
        if direction not in ("in", "out") or "message" not in rec:
            return [self._unknown(record, "not a transcript record")]
        return self.feed(rec["message"], "in" if direction == "in" else "out")

    def close(self) -> list[RunEvent]:
        """The end of the stream: the text still accumulating, and a stream-cut error naming
        each tool call that never finished (a call whose permission we refused and the agent
        never ended is a failed call instead: it did not run)."""
        if self._closed:
            return []
        self._closed = True
        events: list[RunEvent] = list(self._flush())
        pending = [cid for cid, call in self._calls.items() if not call.finished]
        for cid in pending:
            call = self._calls[cid]
            call.finished = True
            if call.denied:
                # gemini sends no update for a call whose permission we refused: it never ran
                events.append(ToolCallFinished(self.seq(), cid, False, "denied by the client"))
                continue
            msg = f"the stream ended while tool call {cid} ({call.name}) was pending"
            events.append(ErrorReported(self.seq(), msg, FailureKind.STREAM_CUT))
        return events

    # -- client → agent ---------------------------------------------------------------------

    def _outgoing(self, msg: dict[str, Any]) -> list[RunEvent]:
        method = msg.get("method")
        if isinstance(method, str):
            if "id" in msg:
                self._requests[_key(msg["id"])] = (method, _dict(msg.get("params")))
                if method == "session/prompt":
                    self._turn_text = None
            return []
        if "id" in msg and ("result" in msg or "error" in msg):
            return self._our_answer(msg)
        return [self._unknown(msg, "not a JSON-RPC message")]

    def _our_answer(self, msg: dict[str, Any]) -> list[RunEvent]:
        """Our answer to an agent's request: a refused permission is a denial."""
        method, params = self._agent_requests.pop(_key(msg["id"]), ("", {}))
        if method != "session/request_permission":
            return []
        outcome = _dict(_dict(msg.get("result")).get("outcome"))
        option = outcome.get("optionId")
        kinds = {
            _dict(o).get("optionId"): _dict(o).get("kind") for o in params.get("options") or ()
        }
        rejected = outcome.get("outcome") == "cancelled" or str(kinds.get(option, "")).startswith(
            "reject"
        )
        if "error" not in msg and not rejected:
            return []
        call = _dict(params.get("toolCall"))
        cid = _str(call.get("toolCallId"))
        tracked = self._calls.get(cid) if cid else None
        tool = tracked.name if tracked else _tool_name(call)
        if tracked is not None:
            tracked.denied = True
        detail = "cancelled" if outcome.get("outcome") == "cancelled" else f"option {option}"
        return [PermissionDenied(self.seq(), tool, cid, _first_path(call, self), detail)]

    # -- agent → client ---------------------------------------------------------------------

    def _incoming(self, msg: dict[str, Any]) -> list[RunEvent]:
        method = msg.get("method")
        if isinstance(method, str):
            params = _dict(msg.get("params"))
            if "id" in msg:
                events = self._flush()
                self._agent_requests[_key(msg["id"])] = (method, params)
                return events + self._agent_request(msg, method, params)
            if method == "session/update":
                return self._update(msg, params)
            return [*self._flush(), self._unknown(msg, f"unknown notification {method!r}")]
        if "id" in msg and ("result" in msg or "error" in msg):
            events = self._flush()
            return events + self._response(msg)
        return [*self._flush(), self._unknown(msg, "not a JSON-RPC message")]

    def _agent_request(
        self, msg: dict[str, Any], method: str, params: dict[str, Any]
    ) -> list[RunEvent]:
        if method == "session/request_permission":
            call = _dict(params.get("toolCall"))
            events: list[RunEvent] = []
            cid = _str(call.get("toolCallId"))
            if cid is None or cid not in self._calls:
                # codex asks before its tool_call, gemini never sends one: a first sighting
                events.append(self._start(call))
            else:  # opencode shows its diff only here
                self._note_diffs(cid, call)
            name = self._calls[cid].name if cid in self._calls else _tool_name(call)
            options = [
                str(_dict(o).get("optionId") or _dict(o).get("name"))
                for o in params.get("options") or ()
            ]
            text = f"permission requested for {name}: options {', '.join(options) or 'none'}"
            events.append(WarningRaised(self.seq(), text, "permission_request"))
            return events
        if method in _QUIET_AGENT_REQUESTS:
            return []
        return [self._unknown(msg, f"unknown agent request {method!r}")]

    def _response(self, msg: dict[str, Any]) -> list[RunEvent]:
        method, params = self._requests.pop(_key(msg["id"]), ("", {}))
        if "error" in msg:
            return [self._error(_dict(msg["error"]), method)]
        result = _dict(msg.get("result"))
        if method == "initialize":
            info = _dict(result.get("agentInfo"))
            self._agent_name = _str(info.get("name"))
            return []
        if method in ("session/new", "session/load", "session/resume", "session/fork"):
            sid = _str(result.get("sessionId")) or _str(params.get("sessionId"))
            if sid is None:
                return [self._unknown(msg, f"{method} result without a session id")]
            self.session_id = sid
            model = _str(_dict(result.get("models")).get("currentModelId")) or _config_model(result)
            return [AgentSessionStarted(self.seq(), sid, model)]
        if method == "session/prompt" or (not method and "stopReason" in result):
            return self._prompt_result(msg, result, params)
        return []

    def _prompt_result(
        self, msg: dict[str, Any], result: dict[str, Any], params: dict[str, Any]
    ) -> list[RunEvent]:
        stop = result.get("stopReason")
        if not isinstance(stop, str):
            return [self._unknown(msg, "prompt result without a stop reason")]
        events: list[RunEvent] = []
        meta = _dict(result.get("_meta"))
        usage = _dict(result.get("usage")) or _dict(meta.get("usage"))
        sid = _str(params.get("sessionId")) or self.session_id or ""
        quota = _dict(_dict(meta.get("quota")).get("token_count"))
        if not usage and quota:
            # gemini: this prompt's model requests summed (a second prompt in the session
            # reports its own requests only), output without thought tokens, no cost
            figures = Usage(
                input_tokens=_int(quota.get("input_tokens")),
                output_tokens=_int(quota.get("output_tokens")),
            )
            if not figures.is_empty:
                events.append(UsageReported(self.seq(), figures, "turn", sid))
        if usage:
            figures = Usage(
                input_tokens=_int(usage.get("inputTokens")),
                output_tokens=_int(usage.get("outputTokens")),
                cache_read_tokens=_int(usage.get("cachedReadTokens")),
                cache_write_tokens=_int(usage.get("cachedWriteTokens")),
                reasoning_tokens=_int(usage.get("thoughtTokens")),
            )
            cost = self._cost.get(sid)
            if cost is not None:
                figures = figures + cost
            if self._agent_name == "OpenCode":
                # opencode reports its last model request's figures, not the turn's nor the
                # session's: one message's usage; the turn's other requests are not counted
                self._prompts += 1
                key = f"{sid}#prompt-{self._prompts}"
                events.append(UsageReported(self.seq(), figures, "message", key))
                if not self._partial_said:
                    self._partial_said = True
                    events.append(
                        WarningRaised(
                            self.seq(),
                            "opencode reports only the last model request's tokens of a "
                            "prompt; the run's usage counts fewer tokens than were used",
                            "usage_partial",
                        )
                    )
            else:
                events.append(UsageReported(self.seq(), figures, "cumulative", sid))
        ok = stop == "end_turn"
        events.append(TurnEnded(self.seq(), ok, self._turn_text, stop_reason=stop))
        return events

    def _error(self, error: dict[str, Any], method: str) -> ErrorReported:
        message = str(error.get("message") or "JSON-RPC error")
        data = error.get("data")
        if data is not None:
            detail = data if isinstance(data, str) else _raw(data)
            if detail not in message:
                message = f"{message}: {detail}"
        code = _int(error.get("code"))
        status = code if code is not None and 100 <= code <= 599 else None
        if status is None:
            found = _STATUS_IN_TEXT.search(message)
            status = int(found.group(1)) if found else None
        kind = classify_error_text(message, status)
        if method:
            message = f"{method}: {message}"
        return ErrorReported(
            self.seq(),
            message,
            kind if kind is not None else FailureKind.UNKNOWN,
            status,
            usage_limited=kind is None,
        )

    # -- session/update ---------------------------------------------------------------------

    def _update(self, msg: dict[str, Any], params: dict[str, Any]) -> list[RunEvent]:
        update = params.get("update")
        if not isinstance(update, dict):
            return [*self._flush(), self._unknown(msg, "session/update without an update")]
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            return self._chunk(kind, update)
        events = self._flush()
        if kind in ("tool_call", "tool_call_update"):
            wrong = _malformed_tool_fields(update)
            if wrong:
                reason = f"{kind} with fields of the wrong type: {', '.join(wrong)}"
                return [*events, self._unknown(msg, reason)]
            if kind == "tool_call":
                return events + self._tool_call(update)
            return events + self._tool_call_update(update)
        if kind == "usage_update":
            return events + self._usage_update(update, params)
        if kind in QUIET_UPDATES:
            return events
        return [*events, self._unknown(msg, f"unknown session/update kind {kind!r}")]

    def _chunk(self, kind: str, update: dict[str, Any]) -> list[RunEvent]:
        message_id = _str(update.get("messageId"))
        events: list[RunEvent] = []
        if self._chunk_kind is not None and (
            kind != self._chunk_kind or (message_id and message_id != self._chunk_id)
        ):
            events = self._flush()
        self._chunk_kind = kind
        self._chunk_id = message_id or self._chunk_id
        content = _dict(update.get("content"))
        text = content.get("text")
        if content.get("type") == "text" and isinstance(text, str):
            self._chunks.append(text)
        return events

    def _flush(self) -> list[RunEvent]:
        kind, text, message_id = self._chunk_kind, "".join(self._chunks), self._chunk_id
        self._chunk_kind, self._chunk_id, self._chunks = None, None, []
        if kind is None or not text:
            return []
        thought = kind == "agent_thought_chunk"
        if not thought:
            self._turn_text = text
        return [MessageEmitted(self.seq(), text, thought, message_id)]

    def _start(self, update: dict[str, Any]) -> ToolCallStarted:
        given = _str(update.get("toolCallId"))
        synthetic = given is None
        if given is None:
            self._synthetic += 1
            given = f"asup-call-{self._synthetic}"
        name = _tool_name(update)
        self._calls[given] = _Call(name)
        self._note_diffs(given, update)
        return ToolCallStarted(self.seq(), given, name, update.get("rawInput"), synthetic)

    def _tool_call(self, update: dict[str, Any]) -> list[RunEvent]:
        cid = _str(update.get("toolCallId"))
        if cid is not None and cid in self._calls:
            return self._tool_call_update(update)  # a repeat is an update
        start = self._start(update)
        return [start, *self._maybe_finish(start.call_id, update)]

    def _tool_call_update(self, update: dict[str, Any]) -> list[RunEvent]:
        cid = _str(update.get("toolCallId"))
        events: list[RunEvent] = []
        if cid is None or cid not in self._calls:
            start = self._start(update)  # first sighting
            cid = start.call_id
            events.append(start)
        else:
            self._note_diffs(cid, update)
        return events + self._maybe_finish(cid, update)

    def _forget_finished(self) -> None:
        """Keep memory flat on a long session: drop the oldest finished calls until at most
        half of :data:`CALLS_KEPT` remain (an update for a call that old would start it
        anew; no recorded agent sends one)."""
        excess = len(self._calls) - CALLS_KEPT // 2
        for cid in [c for c, call in self._calls.items() if call.finished][:excess]:
            del self._calls[cid]

    def _note_diffs(self, cid: str, update: dict[str, Any]) -> None:
        content = update.get("content")
        if not isinstance(content, list):
            return
        call = self._calls[cid]
        for item in content:
            block = _dict(item)
            path = _str(block.get("path"))
            if block.get("type") == "diff" and path is not None:
                # opencode sends "" as the old text of a new file
                call.diffs[self._relpath(path)] = "update" if block.get("oldText") else "add"

    def _maybe_finish(self, cid: str, update: dict[str, Any]) -> list[RunEvent]:
        status = update.get("status")
        call = self._calls[cid]
        if status not in ("completed", "failed") or call.finished:
            return []
        call.finished = True
        if len(self._calls) > CALLS_KEPT:
            self._forget_finished()
        ok = status == "completed"
        output = _text_of(update.get("content"))
        if output is None and isinstance(update.get("rawOutput"), str):
            output = update["rawOutput"]
        events: list[RunEvent] = [ToolCallFinished(self.seq(), cid, ok, output)]
        if ok:
            events += [FileChanged(self.seq(), p, k) for p, k in call.diffs.items()]
        return events

    def _usage_update(self, update: dict[str, Any], params: dict[str, Any]) -> list[RunEvent]:
        """``usage_update`` carries the context window (``used``/``size``, not billed tokens)
        and the session's running cost; only the cost is usage."""
        cost = _dict(update.get("cost"))
        amount = cost.get("amount")
        if not isinstance(amount, int | float) or isinstance(amount, bool):
            return []
        sid = _str(params.get("sessionId")) or self.session_id or ""
        figures = Usage(cost=float(amount), currency=_str(cost.get("currency")))
        self._cost[sid] = figures
        return [UsageReported(self.seq(), figures, "cumulative", sid)]

    # -- helpers ----------------------------------------------------------------------------

    def _unknown(self, message: object, reason: str) -> Unrecognized:
        self.unrecognized += 1
        return Unrecognized(self.seq(), _raw(message), reason)

    def _relpath(self, path: str) -> str:
        cwd = self.cwd
        if cwd and path.startswith(cwd + "/"):
            return path[len(cwd) + 1 :]
        return path


def _key(request_id: object) -> object:
    """A JSON-RPC id as a dict key (ids are strings or numbers; anything else by its text)."""
    if isinstance(request_id, str | int | float) and not isinstance(request_id, bool):
        return request_id
    return _raw(request_id)


def _tool_name(call: dict[str, Any]) -> str:
    """The vendor's tool name (claude-agent-acp: ``_meta.claudeCode.toolName``), else the
    title, else the ACP tool kind."""
    meta = _dict(_dict(call.get("_meta")).get("claudeCode"))
    return (
        _str(meta.get("toolName")) or _str(call.get("title")) or _str(call.get("kind")) or "unknown"
    )


def _config_model(result: dict[str, Any]) -> str | None:
    """The model named by a ``configOptions`` entry of category ``model`` (opencode)."""
    options = result.get("configOptions")
    for option in options if isinstance(options, list) else ():
        if _dict(option).get("category") == "model":
            return _str(_dict(option).get("currentValue"))
    return None


def _first_path(call: dict[str, Any], fold: AcpFold) -> str | None:
    locations = call.get("locations")
    if isinstance(locations, list):
        for loc in locations:
            path = _str(_dict(loc).get("path"))
            if path is not None:
                return fold._relpath(path)
    return None


# The ACP ToolCall / ToolCallUpdate fields the fold reads, and the JSON types they must have
# when present (the schema's; None, an absent value, is always fine).
_TOOL_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "toolCallId": str,
    "title": str,
    "kind": str,
    "status": str,
    "content": list,
    "locations": list,
    "_meta": dict,
}


def _malformed_tool_fields(update: dict[str, Any]) -> list[str]:
    """The names of the fields of a tool call update whose value has the wrong JSON type."""
    return [
        name
        for name, wanted in _TOOL_FIELD_TYPES.items()
        if update.get(name) is not None and not isinstance(update[name], wanted)
    ]
