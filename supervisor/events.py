"""The one event vocabulary every agent is folded into.

A run is an ordered stream of :data:`RunEvent` values with a monotonic ``seq`` drawn from one
per-run :class:`SeqCounter`. ``RunStarted`` opens it and ``RunFinished`` closes it, always last,
also when the run failed. Events are slotted dataclasses compared whole; they are values, never
changed once made. They are not ``frozen``: a frozen dataclass costs four times as much to build
(each field goes through ``object.__setattr__``), and building events is the codecs' hot path
(see docs/benchmarks.md). :func:`event_to_dict` / :func:`event_to_json` serialise them.

A figure the stream did not report is ``None``, never ``0``: :class:`Usage` adds two ``None``
figures to ``None`` and a ``None`` to a number as that number.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, assert_never

__all__ = [
    "AgentSessionStarted",
    "ErrorReported",
    "FailureKind",
    "FileChanged",
    "MessageEmitted",
    "Outcome",
    "OutcomeStatus",
    "PermissionDenied",
    "ReviewStaged",
    "RunEvent",
    "RunFinished",
    "RunStarted",
    "SeqCounter",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnEnded",
    "Unrecognized",
    "Usage",
    "UsageReported",
    "WarningRaised",
    "event_to_dict",
    "event_to_json",
]


class OutcomeStatus(StrEnum):
    """How a run ended, for every agent and transport alike."""

    COMPLETED = "completed"
    FAILED = "failed"
    DENIED = "denied"
    CANCELED = "canceled"
    TIMED_OUT = "timed_out"
    USAGE_LIMITED = "usage_limited"
    REFUSED = "refused"


class FailureKind(StrEnum):
    """Why a FAILED run failed."""

    AUTH = "auth"
    SERVER_ERROR = "server_error"
    OVERLOADED = "overloaded"
    NETWORK = "network"
    STREAM_CUT = "stream_cut"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    PROTOCOL = "protocol"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The classified end of a run. ``failure_kind`` is set exactly when status is FAILED."""

    status: OutcomeStatus
    failure_kind: FailureKind | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if (self.status is OutcomeStatus.FAILED) != (self.failure_kind is not None):
            raise ValueError("failure_kind is set exactly when the status is 'failed'")

    @classmethod
    def failed(cls, kind: FailureKind, reason: str) -> Outcome:
        return cls(OutcomeStatus.FAILED, kind, reason)


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _addf(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


@dataclass(slots=True)
class Usage:
    """Token and cost figures. ``None`` means the stream did not report that figure."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost: float | None = None
    currency: str | None = None

    def __add__(self, other: Usage) -> Usage:
        currency = self.currency or other.currency
        if self.currency and other.currency and self.currency != other.currency:
            raise ValueError(f"cannot add {self.currency} to {other.currency}")
        return Usage(
            _add(self.input_tokens, other.input_tokens),
            _add(self.output_tokens, other.output_tokens),
            _add(self.cache_read_tokens, other.cache_read_tokens),
            _add(self.cache_write_tokens, other.cache_write_tokens),
            _add(self.reasoning_tokens, other.reasoning_tokens),
            _addf(self.cost, other.cost),
            currency,
        )

    @property
    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in dataclasses.fields(self))


class SeqCounter:
    """One per run: hands out 0, 1, 2, … to every event of that run, whoever makes it."""

    __slots__ = ("_next",)

    def __init__(self, start: int = 0) -> None:
        self._next = start

    def __call__(self) -> int:
        n = self._next
        self._next = n + 1
        return n

    @property
    def issued(self) -> int:
        return self._next

    def rewind(self, mark: int) -> None:
        """Give back numbers taken since ``mark`` (a decode that failed half-way)."""
        if not 0 <= mark <= self._next:
            raise ValueError("can only rewind to a number already issued")
        self._next = mark


@dataclass(slots=True)
class RunStarted:
    seq: int
    agent: str
    run_id: str | None = None
    type: Literal["run.started"] = "run.started"


@dataclass(slots=True)
class AgentSessionStarted:
    """The vendor's own session / thread handle (what resume takes)."""

    seq: int
    session_id: str
    model: str | None = None
    type: Literal["agent.session"] = "agent.session"


@dataclass(slots=True)
class MessageEmitted:
    """Text the agent showed: a reply (``thought=False``) or its reasoning (``thought=True``)."""

    seq: int
    text: str
    thought: bool = False
    message_id: str | None = None
    type: Literal["message"] = "message"


@dataclass(slots=True)
class ToolCallStarted:
    """``synthetic_id`` is true when the stream gave no id and the codec made one up."""

    seq: int
    call_id: str
    name: str
    input: Any = None
    synthetic_id: bool = False
    type: Literal["tool_call.started"] = "tool_call.started"


@dataclass(slots=True)
class ToolCallFinished:
    seq: int
    call_id: str
    ok: bool
    output: str | None = None
    exit_code: int | None = None
    type: Literal["tool_call.finished"] = "tool_call.finished"


FileChangeKind = Literal["add", "update", "delete", "rename", "unknown"]


@dataclass(slots=True)
class FileChanged:
    seq: int
    path: str
    kind: FileChangeKind = "unknown"
    type: Literal["file.changed"] = "file.changed"


UsageScope = Literal["message", "turn", "cumulative"]


@dataclass(slots=True)
class UsageReported:
    """Usage as the vendor reported it; the fold decides how figures combine.

    ``scope`` says what the figures cover: ``message`` (one model response, keyed by its id; a
    repeat of the same key replaces the earlier figures), ``turn`` (one prompt's total, summed
    over turns) or ``cumulative`` (a running total per ``key``, e.g. a thread; the last wins).
    """

    seq: int
    usage: Usage
    scope: UsageScope
    key: str | None = None
    type: Literal["usage"] = "usage"


@dataclass(slots=True)
class PermissionDenied:
    seq: int
    tool: str
    call_id: str | None = None
    path: str | None = None
    detail: str | None = None
    type: Literal["permission.denied"] = "permission.denied"


@dataclass(slots=True)
class TurnEnded:
    """One prompt's end as the agent reported it (claude's ``result``, codex's ``turn.*``)."""

    seq: int
    ok: bool
    final_text: str | None = None
    num_turns: int | None = None
    duration_ms: int | None = None
    subtype: str | None = None
    stop_reason: str | None = None
    type: Literal["turn.ended"] = "turn.ended"


@dataclass(slots=True)
class WarningRaised:
    seq: int
    message: str
    code: str | None = None
    type: Literal["warning"] = "warning"


@dataclass(slots=True)
class ErrorReported:
    """An error the agent reported in its stream. ``kind`` is our classification of it, and
    ``usage_limited`` marks a rate or quota limit (an outcome of its own, not a failure kind);
    ``fatal`` is false for errors the agent says it retries (e.g. "Reconnecting… 1/5")."""

    seq: int
    message: str
    kind: FailureKind = FailureKind.UNKNOWN
    http_status: int | None = None
    fatal: bool = True
    usage_limited: bool = False
    type: Literal["error"] = "error"


@dataclass(slots=True)
class Unrecognized:
    """A line the codec does not know. Counted, never fatal: the drift signal."""

    seq: int
    raw: str
    reason: str = "unknown event type"
    type: Literal["unrecognized"] = "unrecognized"


@dataclass(slots=True)
class ReviewStaged:
    """What the child wrote, captured, redacted and kept as a pending review. ``sha256`` is of
    the stored (redacted) patch: ``asup apply`` asks for its first 12 hex digits."""

    seq: int
    run_id: str
    sha256: str
    files: int
    flagged: bool = False
    flags: tuple[str, ...] = ()
    type: Literal["review.staged"] = "review.staged"


@dataclass(slots=True)
class RunFinished:
    seq: int
    outcome: Outcome
    type: Literal["run.finished"] = "run.finished"


RunEvent = (
    RunStarted
    | AgentSessionStarted
    | MessageEmitted
    | ToolCallStarted
    | ToolCallFinished
    | FileChanged
    | UsageReported
    | PermissionDenied
    | TurnEnded
    | WarningRaised
    | ErrorReported
    | Unrecognized
    | ReviewStaged
    | RunFinished
)


def _plain(value: Any) -> Any:
    if isinstance(value, StrEnum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def event_to_dict(event: RunEvent) -> dict[str, Any]:
    """A JSON-ready dict with ``type`` first."""
    body: dict[str, Any] = _plain(event)
    return {"type": body.pop("type"), **body}


def event_to_json(event: RunEvent) -> str:
    return json.dumps(event_to_dict(event), ensure_ascii=False, sort_keys=False)


def describe(event: RunEvent) -> str:
    """A one-line human rendering (used by the CLI's plain views)."""
    match event:
        case RunStarted(agent=agent):
            return f"run started: {agent}"
        case AgentSessionStarted(session_id=sid, model=model):
            return f"session {sid}" + (f" ({model})" if model else "")
        case MessageEmitted(text=text, thought=thought):
            return ("thinking: " if thought else "") + text
        case ToolCallStarted(name=name, call_id=cid):
            return f"tool {name} [{cid}] started"
        case ToolCallFinished(call_id=cid, ok=ok):
            return f"tool [{cid}] {'ok' if ok else 'failed'}"
        case FileChanged(path=path, kind=kind):
            return f"file {kind}: {path}"
        case UsageReported(usage=usage, scope=scope):
            return f"usage ({scope}): in={usage.input_tokens} out={usage.output_tokens}"
        case PermissionDenied(tool=tool, path=path):
            return f"permission denied: {tool}" + (f" {path}" if path else "")
        case TurnEnded(ok=ok, subtype=subtype):
            return f"turn ended ({'ok' if ok else 'error'}{', ' + subtype if subtype else ''})"
        case WarningRaised(message=message):
            return f"warning: {message}"
        case ErrorReported(message=message, kind=kind):
            return f"error ({kind.value}): {message}"
        case Unrecognized(reason=reason):
            return f"unrecognized line: {reason}"
        case ReviewStaged(run_id=run_id, sha256=digest, files=files, flagged=flagged):
            flag = " (FLAGGED)" if flagged else ""
            return (
                f"review staged{flag}: {files} file(s), hash {digest[:12]} — "
                f"asup review {run_id} · asup apply {run_id}"
            )
        case RunFinished(outcome=outcome):
            why = f"/{outcome.failure_kind.value}" if outcome.failure_kind else ""
            return f"run finished: {outcome.status.value}{why}"
        case _:
            assert_never(event)
