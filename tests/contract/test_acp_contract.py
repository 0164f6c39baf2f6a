"""The ACP fold contract: the line-stream codecs' contract (test_contract.py) for
:class:`supervisor.acp.fold.AcpFold`, over every recorded ACP transcript.

The inputs are JSON-RPC messages the real agents exchanged in the lab
(``fixtures/external/*-acp/*/*.jsonl``), cut or mutated where a case needs it — never shapes
typed by hand.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.acp.fold import AcpFold
from supervisor.events import (
    ErrorReported,
    FailureKind,
    RunEvent,
    SeqCounter,
    ToolCallFinished,
    ToolCallStarted,
    Unrecognized,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "external"
TRANSCRIPTS = sorted(FIXTURES.glob("*-acp/*/*.jsonl"))
AGENTS = sorted({p.parents[1].name for p in TRANSCRIPTS})
Record = dict[str, Any]


def records(path: Path) -> list[Record]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def replay(recs: list[Record], seq: SeqCounter | None = None) -> tuple[AcpFold, list[RunEvent]]:
    fold = AcpFold(seq, cwd="<repo>")
    events: list[RunEvent] = []
    for rec in recs:
        events += fold.feed_record(rec)
    events += fold.close()
    return fold, events


def _id(path: Path) -> str:
    return f"{path.parents[1].name}/{path.stem}"


def _update(rec: Record) -> dict[str, Any] | None:
    msg = rec["message"]
    if rec["direction"] == "in" and msg.get("method") == "session/update":
        update = msg["params"]["update"]
        return update if isinstance(update, dict) else None
    return None


def first_tool_call(agent: str) -> tuple[list[Record], int]:
    """The first recorded ``tool_call`` update of ``agent``: (its transcript, index)."""
    for path in TRANSCRIPTS:
        if path.parents[1].name != agent:
            continue
        recs = records(path)
        for i, rec in enumerate(recs):
            update = _update(rec)
            if update is not None and update.get("sessionUpdate") == "tool_call":
                return recs, i
    raise AssertionError(f"no {agent} recording has a tool_call")


def starts_pending(path: Path) -> list[int]:
    """Indexes of the records that start a tool call which is not finished by the same
    record (cut right after one, the call is pending)."""
    recs = records(path)
    fold = AcpFold(cwd="<repo>")
    out = []
    for i, rec in enumerate(recs):
        events = fold.feed_record(rec)
        started = {e.call_id for e in events if isinstance(e, ToolCallStarted)}
        finished = {e.call_id for e in events if isinstance(e, ToolCallFinished)}
        if started - finished:
            out.append(i)
    return out


WITH_CALLS = [p for p in TRANSCRIPTS if starts_pending(p)]


def test_every_acp_agent_is_recorded() -> None:
    assert {"claude-acp", "codex-acp", "gemini-acp", "opencode-acp"} <= set(AGENTS)
    assert len(TRANSCRIPTS) >= 4 * len(AGENTS)
    assert len(WITH_CALLS) >= len(AGENTS)  # every agent has a recording with a tool call


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=_id)
def test_every_recording_folds_with_nothing_unrecognized(path: Path) -> None:
    fold, events = replay(records(path))
    unknown = [e for e in events if isinstance(e, Unrecognized)]
    assert fold.unrecognized == 0, unknown
    assert not unknown


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=_id)
def test_seq_numbers_are_gapless_from_zero(path: Path) -> None:
    seq = SeqCounter()
    _, events = replay(records(path), seq)
    assert events, "a recorded session makes events"
    assert [e.seq for e in events] == list(range(len(events)))
    assert seq.issued == len(events)


@pytest.mark.parametrize("path", WITH_CALLS, ids=_id)
def test_a_stream_cut_after_a_tool_call_names_the_pending_call(path: Path) -> None:
    recs = records(path)
    for index in starts_pending(path):
        head = recs[: index + 1]
        _, events = replay(head)
        pending = [e for e in events if isinstance(e, ToolCallStarted)][-1]
        assert not any(
            isinstance(e, ToolCallFinished) and e.call_id == pending.call_id for e in events
        ), "a result was made up for a call that never finished"
        cuts = [e for e in events if isinstance(e, ErrorReported)]
        assert cuts, f"no error when cut after record {index}"
        assert cuts[-1].kind is FailureKind.STREAM_CUT
        assert pending.call_id in cuts[-1].message
        assert pending.name in cuts[-1].message
        assert [e.seq for e in events] == list(range(len(events)))


@pytest.mark.parametrize("agent", AGENTS)
def test_a_tool_call_without_an_id_gets_a_unique_synthetic_id(agent: str) -> None:
    recs, index = first_tool_call(agent)
    rec = copy.deepcopy(recs[index])
    del rec["message"]["params"]["update"]["toolCallId"]
    fold = AcpFold(cwd="<repo>")
    for earlier in recs[:index]:
        fold.feed_record(earlier)
    events = fold.feed_record(rec) + fold.feed_record(copy.deepcopy(rec))
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert len(started) == 2
    assert all(e.synthetic_id for e in started)
    assert started[0].call_id != started[1].call_id
    assert fold.unrecognized == 0


@pytest.mark.parametrize("agent", AGENTS)
def test_an_unknown_update_kind_is_counted_and_the_next_message_still_folds(agent: str) -> None:
    recs, index = first_tool_call(agent)
    drifted = copy.deepcopy(recs[index])
    drifted["message"]["params"]["update"]["sessionUpdate"] = "x-update-from-the-future"
    mutated = [*recs[:index], drifted, *recs[index:]]
    plain_fold, plain = replay(recs)
    fold, events = replay(mutated)
    assert fold.unrecognized == plain_fold.unrecognized + 1
    unknown = [e for e in events if isinstance(e, Unrecognized)]
    assert any("x-update-from-the-future" in e.reason for e in unknown)
    # everything else folded the same, the real tool_call right after it included
    assert [type(e) for e in events if not isinstance(e, Unrecognized)] == [type(e) for e in plain]
    assert [e.seq for e in events] == list(range(len(events)))


@pytest.mark.parametrize("agent", AGENTS)
def test_a_malformed_known_update_is_counted_and_its_seq_given_back(agent: str) -> None:
    recs, index = first_tool_call(agent)
    rec = copy.deepcopy(recs[index])
    update = rec["message"]["params"]["update"]
    for key in list(update):
        if key != "sessionUpdate":
            update[key] = 12345  # every field the wrong shape
    seq = SeqCounter()
    fold = AcpFold(seq, cwd="<repo>")
    before = seq.issued
    events = fold.feed_record(rec)
    assert [type(e) for e in events] == [Unrecognized]
    assert fold.unrecognized == 1
    assert seq.issued == before + 1, "a failed fold must give its sequence numbers back"


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=_id)
def test_a_malformed_update_payload_is_counted_and_its_seq_given_back(path: Path) -> None:
    """Every recorded session/update whose ``update`` is not an object: one Unrecognized,
    one seq number, and the rest of the transcript folds as before."""
    recs = records(path)
    index = next(i for i, r in enumerate(recs) if _update(r) is not None)
    broken = copy.deepcopy(recs[index])
    broken["message"]["params"]["update"] = 12345
    plain_fold, _ = replay(recs)
    fold, events = replay([*recs[:index], broken, *recs[index + 1 :]])
    assert fold.unrecognized == plain_fold.unrecognized + 1
    assert [e.seq for e in events] == list(range(len(events)))


ALL_RECORDS = [rec for path in TRANSCRIPTS for rec in records(path)]

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@st.composite
def mutated_record(draw: st.DrawFn) -> Any:
    """A real recorded record with one part replaced, removed or retyped."""
    rec = copy.deepcopy(draw(st.sampled_from(ALL_RECORDS)))
    for _ in range(draw(st.integers(1, 3))):
        node: Any = rec
        parent: Any = None
        key: Any = None
        for _depth in range(draw(st.integers(0, 6))):
            if isinstance(node, dict) and node:
                k = draw(st.sampled_from(sorted(node, key=str)))
            elif isinstance(node, list) and node:
                k = draw(st.integers(0, len(node) - 1))
            else:
                break
            parent, key, node = node, k, node[k]
        action = draw(st.sampled_from(["replace", "delete", "retype"]))
        if parent is None:
            return draw(_json) if action != "delete" else None
        if action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif action == "retype":
            parent[key] = json.loads(json.dumps(str(node)))
        else:
            parent[key] = draw(_json)
    return rec


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(TRANSCRIPTS),
    mutations=st.lists(st.tuples(st.integers(0, 10_000), mutated_record()), max_size=6),
)
def test_mutated_real_messages_never_raise(path: Path, mutations: list[tuple[int, Any]]) -> None:
    recs: list[Any] = list(records(path))
    for where, rec in mutations:
        i = where % (len(recs) + 1)
        recs.insert(i, rec)
    seq = SeqCounter()
    fold = AcpFold(seq, cwd="<repo>")
    events: list[RunEvent] = []
    for rec in recs:
        events += fold.feed_record(rec)
    events += fold.close()
    assert [e.seq for e in events] == list(range(len(events)))
    assert fold.unrecognized == sum(isinstance(e, Unrecognized) for e in events)
