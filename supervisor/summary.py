"""The fold: a run's events → one :class:`RunSummary`. Pure, incremental, agent-neutral.

Usage figures combine by the scope the codec attached to them (see
:class:`~supervisor.events.UsageReported`): per-message figures are keyed by message id (a repeat
replaces), per-turn figures add up, cumulative figures keep the last value per key. When a stream
reports both per-turn totals and per-message figures, the turn totals are authoritative (they are
what the vendor bills); cumulative figures win over both.

Memory stays flat however long the stream: per-message usage is kept for a window of recent
messages (older ones are added into a running total), only the last turn result is kept, and
the lists a summary names items in keep at most :data:`DETAIL_CAP` entries each (the first tool
calls and denials, the last errors and warnings), with exact totals beside them. The raw
transcript keeps everything.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from supervisor.events import (
    AgentSessionStarted,
    ErrorReported,
    FileChanged,
    FileChangeKind,
    MessageEmitted,
    PermissionDenied,
    RunEvent,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    Unrecognized,
    Usage,
    UsageReported,
    WarningRaised,
)

__all__ = ["DETAIL_CAP", "Folder", "RunSummary", "ToolCallSummary", "fold"]

DETAIL_CAP = 1000
_USAGE_WINDOW = 64


@dataclass(slots=True)
class ToolCallSummary:
    call_id: str
    name: str
    ok: bool | None = None  # None: never finished
    synthetic_id: bool = False


@dataclass(frozen=True, slots=True)
class RunSummary:
    agent: str | None
    events: int
    session_id: str | None
    model: str | None
    final_text: str | None
    tool_calls: tuple[ToolCallSummary, ...]
    file_changes: tuple[tuple[str, FileChangeKind], ...]
    usage: Usage
    turns: int | None
    last_turn: TurnEnded | None
    turn_count: int
    permission_denials: tuple[PermissionDenied, ...]
    errors: tuple[ErrorReported, ...]
    warnings: tuple[WarningRaised, ...]
    unknown_lines: int
    unknown_samples: tuple[str, ...]
    omitted: dict[str, int] = field(default_factory=dict)

    @property
    def pending_calls(self) -> tuple[ToolCallSummary, ...]:
        return tuple(c for c in self.tool_calls if c.ok is None)

    @property
    def fatal_errors(self) -> tuple[ErrorReported, ...]:
        return tuple(e for e in self.errors if e.fatal)

    def to_dict(self) -> dict[str, Any]:
        u = self.usage
        return {
            "agent": self.agent,
            "events": self.events,
            "unknown_lines": self.unknown_lines,
            "session_id": self.session_id,
            "model": self.model,
            "final_text": self.final_text,
            "tool_calls": [
                {"name": c.name, "id": c.call_id, "ok": c.ok, "synthetic_id": c.synthetic_id}
                for c in self.tool_calls
            ],
            "file_changes": [{"path": p, "kind": k} for p, k in self.file_changes],
            "usage": {
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cache_read_tokens": u.cache_read_tokens,
                "cache_write_tokens": u.cache_write_tokens,
                "reasoning_tokens": u.reasoning_tokens,
            },
            "cost_usd": u.cost if u.currency in (None, "USD") else None,
            "turns": self.turns,
            "permission_denials": [
                {"tool": d.tool, "call_id": d.call_id, "path": d.path, "detail": d.detail}
                for d in self.permission_denials
            ],
            "errors": [
                {"message": e.message, "kind": e.kind.value, "fatal": e.fatal} for e in self.errors
            ],
            "warnings": [w.message for w in self.warnings],
            "omitted": dict(self.omitted),
        }


@dataclass(slots=True)
class Folder:
    """Incremental fold: ``add`` each event as it arrives, ``summary()`` at any time."""

    agent: str | None = None
    events: int = 0
    session_id: str | None = None
    model: str | None = None
    last_message: str | None = None
    turn_text: str | None = None
    calls: dict[str, ToolCallSummary] = field(default_factory=dict)
    files: dict[str, FileChangeKind] = field(default_factory=dict)
    calls_omitted: int = 0
    msg_usage: dict[str, Usage] = field(default_factory=dict)
    msg_usage_closed: Usage = field(default_factory=Usage)
    turn_usage: Usage | None = None
    cumulative_usage: dict[str, Usage] = field(default_factory=dict)
    turns: int | None = None
    last_turn: TurnEnded | None = None
    turn_count: int = 0
    denials: list[PermissionDenied] = field(default_factory=list)
    denials_omitted: int = 0
    errors: deque[ErrorReported] = field(default_factory=lambda: deque(maxlen=DETAIL_CAP))
    errors_seen: int = 0
    warnings: deque[WarningRaised] = field(default_factory=lambda: deque(maxlen=DETAIL_CAP))
    warnings_seen: int = 0
    unknown: int = 0
    unknown_samples: list[str] = field(default_factory=list)

    def add(self, ev: RunEvent) -> None:
        self.events += 1
        handler = _FOLD.get(type(ev))
        if handler is not None:
            handler(self, ev)

    def _message(self, ev: MessageEmitted) -> None:
        if not ev.thought:
            self.last_message = ev.text

    def _call_started(self, ev: ToolCallStarted) -> None:
        if ev.call_id in self.calls or len(self.calls) < DETAIL_CAP:
            self.calls[ev.call_id] = ToolCallSummary(ev.call_id, ev.name, None, ev.synthetic_id)
        else:
            self.calls_omitted += 1

    def _call_finished(self, ev: ToolCallFinished) -> None:
        call = self.calls.get(ev.call_id)
        if call is not None:
            call.ok = ev.ok
        elif len(self.calls) < DETAIL_CAP:
            self.calls[ev.call_id] = ToolCallSummary(ev.call_id, "unknown", ev.ok)

    def _file(self, ev: FileChanged) -> None:
        previous = self.files.get(ev.path)
        # A file created in this run and edited later is still an addition.
        self.files[ev.path] = "add" if previous == "add" and ev.kind == "update" else ev.kind

    def _session(self, ev: AgentSessionStarted) -> None:
        self.session_id = ev.session_id
        if ev.model is not None:
            self.model = ev.model

    def _turn(self, ev: TurnEnded) -> None:
        self.last_turn = ev
        self.turn_count += 1
        if ev.final_text is not None:
            self.turn_text = ev.final_text
        if ev.num_turns is not None:
            self.turns = (self.turns or 0) + ev.num_turns

    def _denied(self, ev: PermissionDenied) -> None:
        if len(self.denials) < DETAIL_CAP:
            self.denials.append(ev)
        else:
            self.denials_omitted += 1

    def _error(self, ev: ErrorReported) -> None:
        self.errors.append(ev)
        self.errors_seen += 1

    def _warning(self, ev: WarningRaised) -> None:
        self.warnings.append(ev)
        self.warnings_seen += 1

    def _unknown(self, ev: Unrecognized) -> None:
        self.unknown += 1
        if len(self.unknown_samples) < 5:
            self.unknown_samples.append(ev.raw[:300])

    def _started(self, ev: RunStarted) -> None:
        self.agent = ev.agent

    def _usage(self, ev: UsageReported) -> None:
        if ev.scope == "message":
            window = self.msg_usage
            key = ev.key or f"#{self.events}"
            if key not in window and len(window) >= _USAGE_WINDOW:
                oldest = next(iter(window))
                self.msg_usage_closed = self.msg_usage_closed + window.pop(oldest)
            window[key] = ev.usage
        elif ev.scope == "turn":
            self.turn_usage = ev.usage if self.turn_usage is None else self.turn_usage + ev.usage
        else:
            self.cumulative_usage[ev.key or ""] = ev.usage

    def total_usage(self) -> Usage:
        total = Usage()
        if self.cumulative_usage:
            for u in self.cumulative_usage.values():
                total = total + u
        elif self.turn_usage is not None:
            total = self.turn_usage
        else:
            total = self.msg_usage_closed
            for u in self.msg_usage.values():
                total = total + u
        return total

    def summary(self) -> RunSummary:
        final = self.turn_text if self.turn_text is not None else self.last_message
        return RunSummary(
            agent=self.agent,
            events=self.events,
            session_id=self.session_id,
            model=self.model,
            final_text=final,
            tool_calls=tuple(
                ToolCallSummary(c.call_id, c.name, c.ok, c.synthetic_id)
                for c in self.calls.values()
            ),
            file_changes=tuple(self.files.items()),
            usage=self.total_usage(),
            turns=self.turns,
            last_turn=self.last_turn,
            turn_count=self.turn_count,
            permission_denials=tuple(self.denials),
            errors=tuple(self.errors),
            warnings=tuple(self.warnings),
            unknown_lines=self.unknown,
            unknown_samples=tuple(self.unknown_samples),
            omitted={
                name: n
                for name, n in (
                    ("tool_calls", self.calls_omitted),
                    ("permission_denials", self.denials_omitted),
                    ("errors", self.errors_seen - len(self.errors)),
                    ("warnings", self.warnings_seen - len(self.warnings)),
                )
                if n
            },
        )


_FOLD: dict[type, Callable[[Folder, Any], None]] = {
    MessageEmitted: Folder._message,
    ToolCallStarted: Folder._call_started,
    ToolCallFinished: Folder._call_finished,
    UsageReported: Folder._usage,
    FileChanged: Folder._file,
    AgentSessionStarted: Folder._session,
    TurnEnded: Folder._turn,
    PermissionDenied: Folder._denied,
    ErrorReported: Folder._error,
    WarningRaised: Folder._warning,
    Unrecognized: Folder._unknown,
    RunStarted: Folder._started,
}


def fold(events: list[RunEvent] | tuple[RunEvent, ...]) -> RunSummary:
    folder = Folder()
    for ev in events:
        folder.add(ev)
    return folder.summary()
