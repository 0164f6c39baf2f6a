"""The event vocabulary: usage arithmetic, outcomes, sequence numbers, serialisation."""

from __future__ import annotations

import json

import pytest

from supervisor.events import (
    ErrorReported,
    FailureKind,
    MessageEmitted,
    Outcome,
    OutcomeStatus,
    RunFinished,
    SeqCounter,
    Usage,
    UsageReported,
    describe,
    event_to_dict,
    event_to_json,
)


def test_missing_figures_stay_missing_when_added() -> None:
    total = Usage() + Usage()
    assert total.input_tokens is None
    assert total.cost is None
    assert total.is_empty


def test_missing_plus_number_is_the_number() -> None:
    total = Usage(input_tokens=5) + Usage(output_tokens=3) + Usage(input_tokens=2)
    assert total == Usage(input_tokens=7, output_tokens=3)


def test_zero_is_a_reported_figure_not_missing() -> None:
    assert Usage(input_tokens=0) + Usage() == Usage(input_tokens=0)
    assert not Usage(input_tokens=0).is_empty


def test_costs_in_different_currencies_do_not_add() -> None:
    with pytest.raises(ValueError, match="cannot add"):
        _ = Usage(cost=1.0, currency="USD") + Usage(cost=1.0, currency="EUR")


def test_failure_kind_only_with_failed() -> None:
    assert Outcome.failed(FailureKind.AUTH, "x").failure_kind is FailureKind.AUTH
    with pytest.raises(ValueError, match="failure_kind"):
        Outcome(OutcomeStatus.FAILED)
    with pytest.raises(ValueError, match="failure_kind"):
        Outcome(OutcomeStatus.COMPLETED, FailureKind.AUTH)


def test_seq_counter_is_monotonic_and_rewinds_only_backwards() -> None:
    seq = SeqCounter()
    assert [seq(), seq(), seq()] == [0, 1, 2]
    seq.rewind(1)
    assert seq() == 1
    with pytest.raises(ValueError, match="rewind"):
        seq.rewind(10)


def test_event_json_has_type_first_and_plain_values() -> None:
    ev = RunFinished(7, Outcome.failed(FailureKind.STREAM_CUT, "cut"))
    d = event_to_dict(ev)
    assert next(iter(d)) == "type"
    assert d == {
        "type": "run.finished",
        "seq": 7,
        "outcome": {"status": "failed", "failure_kind": "stream_cut", "reason": "cut"},
    }
    assert json.loads(event_to_json(ev)) == d


def test_usage_event_serialises_missing_as_null() -> None:
    d = event_to_dict(UsageReported(1, Usage(input_tokens=3), "turn", None))
    assert d["usage"]["output_tokens"] is None
    assert d["usage"]["input_tokens"] == 3


@pytest.mark.parametrize(
    ("event", "text"),
    [
        (MessageEmitted(0, "hello"), "hello"),
        (MessageEmitted(0, "hmm", thought=True), "thinking: hmm"),
        (ErrorReported(0, "boom", FailureKind.AUTH), "error (auth): boom"),
        (RunFinished(0, Outcome(OutcomeStatus.COMPLETED)), "run finished: completed"),
    ],
)
def test_describe(event: MessageEmitted | ErrorReported | RunFinished, text: str) -> None:
    assert describe(event) == text
