"""The codec contract: one table of cases every line-stream codec passes.

The inputs are lines the real vendor binaries printed (``fixtures/external``), cut or mutated
where a case needs it — never shapes typed by hand.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.codecs import CODECS, codec_for, decode_transcript
from supervisor.events import (
    ErrorReported,
    FailureKind,
    OutcomeStatus,
    RunEvent,
    RunFinished,
    RunStarted,
    SeqCounter,
    ToolCallFinished,
    ToolCallStarted,
    Unrecognized,
)
from supervisor.summary import fold

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "external"


def _strip_claude_ids(obj: dict[str, Any]) -> dict[str, Any]:
    for block in obj["message"]["content"]:
        block.pop("id", None)
    return obj


def _strip_codex_ids(obj: dict[str, Any]) -> dict[str, Any]:
    obj["item"].pop("id", None)
    return obj


@dataclass(frozen=True)
class Adapter:
    agent: str
    strip_call_ids: Callable[[dict[str, Any]], dict[str, Any]]
    error_envelope_scenario: str


ADAPTERS = {
    "claude-cli": Adapter("claude-cli", _strip_claude_ids, "stream_error"),
    "codex-cli": Adapter("codex-cli", _strip_codex_ids, "stream_error"),
}


def transcripts(agent: str) -> list[Path]:
    return sorted(p for p in (FIXTURES / agent).glob("*/*.jsonl"))


def lines_of(agent: str) -> list[bytes]:
    out: list[bytes] = []
    for path in transcripts(agent):
        out.extend(line for line in path.read_bytes().split(b"\n") if line.strip())
    return out


def events_of(agent: str, line: bytes) -> list[RunEvent]:
    return codec_for(agent).decode(line)


def first_line(agent: str, want: type) -> tuple[Path, int]:
    """The first fixture line (path, index) whose decode yields an event of type ``want``."""
    for path in transcripts(agent):
        codec = codec_for(agent)
        for i, line in enumerate(path.read_bytes().split(b"\n")):
            if any(isinstance(e, want) for e in codec.decode(line)):
                return path, i
    raise AssertionError(f"no {agent} fixture has a line giving {want.__name__}")


AGENT_IDS = sorted(CODECS)


def test_every_codec_has_an_adapter_and_fixtures() -> None:
    assert set(ADAPTERS) == set(CODECS)
    for agent in AGENT_IDS:
        assert transcripts(agent), f"no recorded transcripts for {agent}"


@pytest.mark.parametrize("agent", AGENT_IDS)
def test_stream_ending_mid_tool_call_is_a_stream_cut_naming_the_call(agent: str) -> None:
    path, index = first_line(agent, ToolCallStarted)
    head = b"\n".join(path.read_bytes().split(b"\n")[: index + 1]) + b"\n"
    run = decode_transcript(agent, head, exit_code=1)
    started = [e for e in run.events if isinstance(e, ToolCallStarted)]
    pending = started[-1]
    assert not any(
        isinstance(e, ToolCallFinished) and e.call_id == pending.call_id for e in run.events
    ), "a result was synthesized for a call that never finished"
    cuts = [e for e in run.events if isinstance(e, ErrorReported)]
    assert cuts[-1].kind is FailureKind.STREAM_CUT
    assert pending.call_id in cuts[-1].message
    assert pending.name in cuts[-1].message
    assert run.outcome.status is OutcomeStatus.FAILED
    assert run.outcome.failure_kind is FailureKind.STREAM_CUT
    assert pending.call_id in run.outcome.reason


@pytest.mark.parametrize("agent", AGENT_IDS)
def test_in_stream_error_is_classified_like_an_http_error(agent: str) -> None:
    adapter = ADAPTERS[agent]
    version_dirs = sorted((FIXTURES / agent).iterdir())
    checked = 0
    for vdir in version_dirs:
        jsonl = vdir / f"{adapter.error_envelope_scenario}.jsonl"
        meta = json.loads(jsonl.with_suffix(".meta.json").read_text())
        run = decode_transcript(
            agent, jsonl.read_bytes(), exit_code=meta["exit_code"], stderr_tail=meta["stderr_tail"]
        )
        assert run.outcome.status is OutcomeStatus.FAILED
        # The same kinds an HTTP error maps to, never "unknown".
        assert run.outcome.failure_kind in {
            FailureKind.OVERLOADED,
            FailureKind.SERVER_ERROR,
            FailureKind.AUTH,
        }, run.outcome
        checked += 1
    assert checked


@pytest.mark.parametrize("agent", AGENT_IDS)
def test_tool_call_without_id_gets_a_synthetic_id_unique_in_the_run(agent: str) -> None:
    path, index = first_line(agent, ToolCallStarted)
    obj = ADAPTERS[agent].strip_call_ids(json.loads(path.read_bytes().split(b"\n")[index]))
    line = json.dumps(obj).encode()
    codec = codec_for(agent)
    started = [e for e in codec.decode(line) + codec.decode(line) if isinstance(e, ToolCallStarted)]
    assert len(started) == 2
    assert all(e.synthetic_id for e in started)
    assert started[0].call_id != started[1].call_id


@pytest.mark.parametrize("agent", AGENT_IDS)
def test_unknown_event_type_is_counted_and_decoding_continues(agent: str) -> None:
    path, index = first_line(agent, ToolCallStarted)
    lines = path.read_bytes().split(b"\n")
    obj = json.loads(lines[index])
    obj["type"] = "x-event-from-the-future"
    mutated = [*lines[:index], json.dumps(obj).encode(), *lines[index:]]
    plain = decode_transcript(agent, b"\n".join(lines))
    drifted = decode_transcript(agent, b"\n".join(mutated))
    assert drifted.summary.unknown_lines == plain.summary.unknown_lines + 1
    unknown = [e for e in drifted.events if isinstance(e, Unrecognized)]
    assert any("x-event-from-the-future" in e.reason for e in unknown)
    # Everything else decoded the same.
    strip = [type(e).__name__ for e in drifted.events if not isinstance(e, Unrecognized)]
    assert strip == [type(e).__name__ for e in plain.events if not isinstance(e, Unrecognized)]


@pytest.mark.parametrize("agent", AGENT_IDS)
def test_malformed_known_event_is_counted_not_raised(agent: str) -> None:
    path, index = first_line(agent, ToolCallStarted)
    obj = json.loads(path.read_bytes().split(b"\n")[index])
    for key in list(obj):
        if key != "type":
            obj[key] = 12345  # every field the wrong shape
    seq = SeqCounter()
    codec = codec_for(agent, seq)
    events = codec.decode(json.dumps(obj).encode())
    assert [type(e) for e in events] == [Unrecognized]
    assert seq.issued == 1, "a failed decode must give its sequence numbers back"


@pytest.mark.parametrize("agent", AGENT_IDS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2048))
def test_arbitrary_bytes_never_raise(agent: str, data: bytes) -> None:
    run = decode_transcript(agent, data, exit_code=1, stderr_tail=data.decode("latin-1"))
    assert isinstance(run.events[-1], RunFinished)


@pytest.mark.parametrize("agent", AGENT_IDS)
@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(
        st.one_of(
            st.binary(max_size=200),
            st.sampled_from([b"{", b"}", b'"type":', b"\n", b"\xe2\x82", b"[]", b"null"]),
            st.builds(
                lambda d: json.dumps(d).encode(),
                st.dictionaries(
                    st.text(max_size=8),
                    st.one_of(st.none(), st.integers(), st.text(max_size=8)),
                    max_size=4,
                ),
            ),
        ),
        max_size=30,
    )
)
def test_json_like_noise_never_raises(agent: str, data: list[bytes]) -> None:
    run = decode_transcript(agent, b"".join(data), exit_code=0)
    assert isinstance(run.events[-1], RunFinished)


def _feed_split(agent: str, blob: bytes, cuts: list[int]) -> list[RunEvent]:
    codec = codec_for(agent)
    out: list[RunEvent] = []
    prev = 0
    for c in [*sorted(cuts), len(blob)]:
        out.extend(codec.feed(blob[prev:c]))
        prev = c
    out.extend(codec.flush())
    return out


@pytest.mark.parametrize("agent", AGENT_IDS)
def test_whole_or_split_anywhere_gives_the_same_events(agent: str) -> None:
    rng = random.Random(20261202)
    for path in transcripts(agent):
        blob = path.read_bytes()
        whole = _feed_split(agent, blob, [])
        byte_by_byte = (
            _feed_split(agent, blob, list(range(1, len(blob)))) if len(blob) < 20000 else None
        )
        if byte_by_byte is not None:
            assert byte_by_byte == whole, path.name
        for _ in range(20):
            cuts = [rng.randrange(0, len(blob) + 1) for _ in range(rng.randrange(1, 12))]
            assert _feed_split(agent, blob, cuts) == whole, (path.name, cuts)


@pytest.mark.parametrize("agent", AGENT_IDS)
def test_every_run_is_bookended_with_one_sequence(agent: str) -> None:
    for path in transcripts(agent):
        run = decode_transcript(agent, path.read_bytes(), exit_code=0)
        assert isinstance(run.events[0], RunStarted)
        assert isinstance(run.events[-1], RunFinished)
        assert [e.seq for e in run.events] == list(range(len(run.events)))
        assert fold(list(run.events)).events == len(run.events)
