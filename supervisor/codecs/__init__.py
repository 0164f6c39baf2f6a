"""Pure codecs, one per line-stream agent, and the offline decode of a whole transcript."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from supervisor.codecs.base import LineCodec, LineFramer, classify_error_text
from supervisor.codecs.claude_cli import ClaudeCliCodec
from supervisor.codecs.codex_cli import CodexCliCodec
from supervisor.events import Outcome, RunEvent, RunFinished, RunStarted, SeqCounter
from supervisor.registry import UnknownAgentError
from supervisor.summary import Folder, RunSummary

__all__ = [
    "CODECS",
    "ClaudeCliCodec",
    "CodexCliCodec",
    "DecodedRun",
    "LineCodec",
    "LineFramer",
    "classify_error_text",
    "codec_for",
    "decode_transcript",
]

CODECS: dict[str, type[LineCodec]] = {
    ClaudeCliCodec.agent_id: ClaudeCliCodec,
    CodexCliCodec.agent_id: CodexCliCodec,
}


def codec_for(agent_id: str, seq: SeqCounter | None = None, *, cwd: str | None = None) -> LineCodec:
    """A fresh codec for one run. ``cwd``: the run's working directory, so file paths inside it
    are reported relative to it (claude also says its cwd in its first event)."""
    try:
        cls = CODECS[agent_id]
    except KeyError:
        raise UnknownAgentError(agent_id) from None
    return cls(seq, cwd=cwd)


@dataclass(frozen=True, slots=True)
class DecodedRun:
    events: tuple[RunEvent, ...]
    summary: RunSummary
    outcome: Outcome

    def to_dict(self) -> dict[str, Any]:
        """The folded run as one JSON-ready object (what ``asup replay --json`` prints)."""
        s = self.summary.to_dict()
        kind = self.outcome.failure_kind
        return {
            "agent": s["agent"],
            "events": s["events"],
            "unknown_lines": s["unknown_lines"],
            "session_id": s["session_id"],
            "model": s["model"],
            "final_text": s["final_text"],
            "outcome": self.outcome.status.value,
            "failure_kind": kind.value if kind is not None else None,
            "reason": self.outcome.reason or None,
            "tool_calls": s["tool_calls"],
            "file_changes": s["file_changes"],
            "usage": s["usage"],
            "cost_usd": s["cost_usd"],
            "turns": s["turns"],
            "permission_denials": s["permission_denials"],
            "errors": s["errors"],
            "warnings": s["warnings"],
            "omitted": s["omitted"],
        }


def decode_transcript(
    agent_id: str,
    chunks: bytes | Iterable[bytes],
    *,
    exit_code: int | None = 0,
    stderr_tail: str = "",
    run_id: str | None = None,
    cwd: str | None = None,
    keep_events: bool = True,
) -> DecodedRun:
    """Decode a recorded stdout transcript offline: run.started, the stream's events, what the
    stderr tail adds, then run.finished with the classified outcome (always last).

    ``keep_events=False`` folds as it goes and keeps no events (constant memory for any length).
    """
    seq = SeqCounter()
    codec = codec_for(agent_id, seq, cwd=cwd)
    folder = Folder()
    kept: list[RunEvent] = []
    add = folder.add

    def take(events: list[RunEvent]) -> None:
        for ev in events:
            add(ev)
        if keep_events:
            kept.extend(events)

    take([RunStarted(seq(), agent_id, run_id)])
    feed = codec.feed
    for chunk in [chunks] if isinstance(chunks, bytes) else chunks:
        evs = feed(chunk)
        if evs:
            take(evs)
    take(codec.flush())
    take(codec.stderr_events(stderr_tail))
    summary = folder.summary()
    outcome = codec.classify(exit_code, stderr_tail, summary)
    take([RunFinished(seq(), outcome)])
    return DecodedRun(tuple(kept), folder.summary(), outcome)
