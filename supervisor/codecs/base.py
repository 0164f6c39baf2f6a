"""What every line-stream codec shares: the line framer and the decode loop.

A codec is pure: bytes in, :data:`~supervisor.events.RunEvent` values out, no I/O, no clock, no
environment. ``feed(data)`` takes any chunk of the child's stdout (split anywhere, even inside a
UTF-8 sequence) and returns the events of the lines it completed; ``flush()`` decodes a trailing
line that has no newline and closes the stream (a tool call still pending then is a stream cut,
never a synthesized result). ``decode(line)`` decodes one whole line.

An unknown or malformed line never raises: it becomes one ``Unrecognized`` event, counted by the
fold as the drift signal.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import orjson

from supervisor.events import (
    ErrorReported,
    FailureKind,
    Outcome,
    OutcomeStatus,
    RunEvent,
    SeqCounter,
    ToolCallStarted,
    TurnEnded,
    Unrecognized,
    WarningRaised,
)
from supervisor.summary import RunSummary

__all__ = [
    "LineCodec",
    "LineFramer",
    "classify_error_text",
    "completed_or_denied",
    "failure_outcome",
    "parse_line",
    "pending_cut",
]


def parse_line(line: bytes | str) -> object:
    """One JSON value from one line, or raise ValueError (orjson: strict RFC 8259, about three
    times as fast as ``json.loads`` on the short lines vendor CLIs print — the parse is most of
    a codec's work; see docs/benchmarks.md)."""
    return orjson.loads(line)


_loads = orjson.loads


class LineFramer:
    """Splits a byte stream into lines on ``\\n``. Bytes are kept until their line completes."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[bytes]:
        if not data:
            return []
        buf = self._buf + data if self._buf else data
        if b"\n" not in data:
            self._buf = buf
            return []
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        return lines

    def flush(self) -> bytes:
        rest, self._buf = self._buf, b""
        return rest


class LineCodec(ABC):
    """Base of the line-stream codecs. Subclasses map a decoded JSON object to events.

    Handlers are looked up by the object's ``type`` key in ``HANDLERS``; a handler that meets a
    shape it does not expect (KeyError, TypeError, ValueError, AttributeError) turns the whole
    line into one ``Unrecognized`` event, and the sequence numbers it took are given back.
    """

    agent_id: ClassVar[str]
    HANDLERS: ClassVar[dict[str, Callable[[Any, dict[str, Any]], list[RunEvent]]]]

    def __init__(self, seq: SeqCounter | None = None, *, cwd: str | None = None) -> None:
        self.seq = seq if seq is not None else SeqCounter()
        self.cwd = cwd.rstrip("/") if cwd else None
        self._framer = LineFramer()
        self._pending: dict[str, ToolCallStarted] = {}
        self._synthetic = 0
        self._closed = False
        self._last_turn_seq = -1

    # -- the stream -------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[RunEvent]:
        lines = self._framer.feed(data)
        if not lines:
            return []
        out: list[RunEvent] = []
        extend, decode = out.extend, self.decode
        for line in lines:
            extend(decode(line))
        return out

    def flush(self) -> list[RunEvent]:
        """End of stream: decode a trailing partial line, then report calls left pending."""
        out = self.decode(self._framer.flush())
        if self._closed:
            return out
        self._closed = True
        for call in self._pending.values():
            where = f"tool call {call.name} [{call.call_id}]"
            if call.seq < self._last_turn_seq:
                out.append(
                    WarningRaised(self.seq(), f"{where} never reported a result", "call_unfinished")
                )
            else:
                out.append(
                    ErrorReported(
                        self.seq(),
                        f"the stream ended while {where} was pending",
                        FailureKind.STREAM_CUT,
                    )
                )
        return out

    def decode(self, line: bytes | str) -> list[RunEvent]:
        try:
            obj = _loads(line)
        except (ValueError, RecursionError):
            if not line.strip():
                return []  # blank lines are framing, not drift
            return [self._unrecognized(line, "not JSON")]
        if type(obj) is not dict:
            return [self._unrecognized(line, "not a JSON object")]
        kind = obj.get("type")
        handler = self.HANDLERS.get(kind) if type(kind) is str else None
        if handler is None:
            return [self._unrecognized(line, f"unknown event type {kind!r}")]
        mark = self.seq._next
        try:
            return handler(self, obj)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            self.seq.rewind(mark)
            return [self._unrecognized(line, f"malformed {kind!r} event ({type(exc).__name__})")]

    # -- helpers for subclasses ------------------------------------------------------------

    def _unrecognized(self, line: bytes | str, reason: str) -> Unrecognized:
        raw = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        return Unrecognized(self.seq(), raw, reason)

    def _relpath(self, path: str) -> str:
        """A path inside the run's working directory, relative to it; others unchanged."""
        cwd = self.cwd
        if cwd and path.startswith(cwd + "/"):
            return path[len(cwd) + 1 :]
        return path

    def _call_id(self, given: object) -> tuple[str, bool]:
        """The vendor's call id, or a synthetic one unique within this run."""
        if isinstance(given, str) and given:
            return given, False
        self._synthetic += 1
        return f"asup-call-{self._synthetic}", True

    def _start_call(self, given_id: object, name: str, input: Any) -> ToolCallStarted:
        call_id, synthetic = self._call_id(given_id)
        ev = ToolCallStarted(self.seq(), call_id, name, input, synthetic)
        self._pending[call_id] = ev
        return ev

    def _error(
        self, message: str, http_status: int | None = None, *, fatal: bool = True
    ) -> ErrorReported:
        kind = classify_error_text(message, http_status)
        return ErrorReported(
            self.seq(),
            message,
            kind if kind is not None else FailureKind.UNKNOWN,
            http_status,
            fatal,
            usage_limited=kind is None,
        )

    def _turn_ended(self, ev: TurnEnded) -> TurnEnded:
        self._last_turn_seq = ev.seq
        return ev

    # -- after the stream ------------------------------------------------------------------

    def stderr_events(self, stderr_tail: str) -> list[RunEvent]:
        """Events only the child's stderr carries (a codec overrides where its CLI has them)."""
        del stderr_tail
        return []

    @abstractmethod
    def classify(self, exit_code: int | None, stderr_tail: str, summary: RunSummary) -> Outcome:
        """The run's outcome from its exit code, stderr tail and folded summary."""


_ERROR_RULES: tuple[tuple[re.Pattern[str], FailureKind | None], ...] = (
    (
        re.compile(
            r"\b(401|403)\b|unauthori[sz]ed|authenticat|invalid[ _-]?api[ _-]?key|"
            r"forbidden|permission_error",
            re.I,
        ),
        FailureKind.AUTH,
    ),
    (re.compile(r"\b429\b|rate[ _-]?limit|usage[ _-]?limit|quota|too many requests", re.I), None),
    (re.compile(r"\b529\b|overloaded|at capacity", re.I), FailureKind.OVERLOADED),
    (
        re.compile(
            r"stream disconnected|closed mid-response|connection closed|stream (was )?cut|"
            r"premature close|terminated|ended while",
            re.I,
        ),
        FailureKind.STREAM_CUT,
    ),
    (
        re.compile(r"\b5\d\d\b|server[ _-]?error|internal error|high demand|api_error", re.I),
        FailureKind.SERVER_ERROR,
    ),
    (
        re.compile(
            r"ECONNREFUSED|ENOTFOUND|ETIMEDOUT|connection refused|connection error|"
            r"error sending request|dns|network|unable to connect",
            re.I,
        ),
        FailureKind.NETWORK,
    ),
)


@functools.lru_cache(maxsize=512)
def classify_error_text(text: str, http_status: int | None = None) -> FailureKind | None:
    """Map an error (HTTP status and/or message) to a failure kind, the same way for every
    agent and whether it came as an HTTP status or inside the stream. ``None`` means "usage
    limited": a rate or quota limit is not a failure kind but the outcome ``usage_limited``."""
    if http_status is not None:
        if http_status in (401, 403):
            return FailureKind.AUTH
        if http_status == 429:
            return None
        if http_status == 529:
            return FailureKind.OVERLOADED
        if 500 <= http_status <= 599:
            return FailureKind.SERVER_ERROR
    for pattern, kind in _ERROR_RULES:
        if pattern.search(text):
            return kind
    return FailureKind.UNKNOWN


def _pick_error(errors: tuple[ErrorReported, ...]) -> ErrorReported | None:
    """The most telling fatal error: the last one with a known kind, else the first one."""
    fatal = [e for e in errors if e.fatal]
    for e in reversed(fatal):
        if e.usage_limited or e.kind is not FailureKind.UNKNOWN:
            return e
    return fatal[0] if fatal else None


def failure_outcome(
    summary: RunSummary, exit_code: int | None, stderr_tail: str, default_reason: str
) -> Outcome:
    """The outcome of a run known to have failed: from its stream errors first, then from the
    last stderr lines, else ``unknown``. A rate or quota limit is ``usage_limited``."""
    err = _pick_error(summary.errors)
    if err is None:
        # Retried errors still say what went wrong when nothing fatal was reported.
        retried = [
            e for e in summary.errors if e.usage_limited or e.kind is not FailureKind.UNKNOWN
        ]
        err = retried[-1] if retried else None
    if err is not None:
        if err.usage_limited:
            return Outcome(OutcomeStatus.USAGE_LIMITED, None, err.message)
        return Outcome.failed(err.kind, err.message)
    tail = stderr_tail.strip().splitlines()[-3:]
    if tail:
        text = " ".join(tail)
        kind = classify_error_text(text)
        if kind is None:
            return Outcome(OutcomeStatus.USAGE_LIMITED, None, text)
        return Outcome.failed(kind, text)
    code = "no exit code" if exit_code is None else f"exit code {exit_code}"
    return Outcome.failed(FailureKind.UNKNOWN, f"{default_reason} ({code})")


def pending_cut(summary: RunSummary) -> Outcome | None:
    """A stream that ended while a tool call was pending is a stream cut naming that call."""
    cuts = [e for e in summary.errors if e.kind is FailureKind.STREAM_CUT and e.fatal]
    if cuts:
        return Outcome.failed(FailureKind.STREAM_CUT, cuts[-1].message)
    return None


def completed_or_denied(summary: RunSummary) -> Outcome:
    """A run the agent finished: ``completed``, or ``denied`` when it was refused actions it
    asked for (a headless run cannot ask, so a denied action means the task was not done as
    asked). The reason names each denied action."""
    if not summary.permission_denials:
        return Outcome(OutcomeStatus.COMPLETED)
    named = "; ".join(
        f"{d.tool} {d.path or d.detail or d.call_id or ''}".strip()
        for d in summary.permission_denials
    )
    return Outcome(OutcomeStatus.DENIED, None, f"denied: {named}")
