"""The fold: how usage scopes combine, tool calls, files, turns, unknown lines."""

from __future__ import annotations

from supervisor.events import (
    FileChanged,
    MessageEmitted,
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    Unrecognized,
    Usage,
    UsageReported,
)
from supervisor.summary import fold


def test_message_usage_is_deduplicated_by_message_id() -> None:
    # One model message shown as two content blocks repeats its usage; the last one counts.
    events: list[RunEvent] = [
        UsageReported(0, Usage(input_tokens=10, output_tokens=1), "message", "m1"),
        UsageReported(1, Usage(input_tokens=10, output_tokens=5), "message", "m1"),
        UsageReported(2, Usage(input_tokens=4, output_tokens=2), "message", "m2"),
    ]
    assert fold(events).usage == Usage(input_tokens=14, output_tokens=7)


def test_turn_totals_win_over_message_figures_and_add_up() -> None:
    events: list[RunEvent] = [
        UsageReported(0, Usage(input_tokens=10), "message", "m1"),
        UsageReported(1, Usage(input_tokens=12, cost=0.5, currency="USD"), "turn", "s"),
        UsageReported(2, Usage(input_tokens=3, cost=0.25, currency="USD"), "turn", "s"),
    ]
    assert fold(events).usage == Usage(input_tokens=15, cost=0.75, currency="USD")


def test_cumulative_usage_keeps_the_last_value_per_key() -> None:
    events: list[RunEvent] = [
        UsageReported(0, Usage(input_tokens=100, output_tokens=10), "cumulative", "t1"),
        UsageReported(1, Usage(input_tokens=250, output_tokens=30), "cumulative", "t1"),
        UsageReported(2, Usage(input_tokens=5, output_tokens=1), "cumulative", "t2"),
    ]
    assert fold(events).usage == Usage(input_tokens=255, output_tokens=31)


def test_no_usage_reported_is_all_missing() -> None:
    assert fold([MessageEmitted(0, "hi")]).usage.is_empty


def test_tool_calls_keep_order_and_pending_ones_show() -> None:
    s = fold(
        [
            ToolCallStarted(0, "a", "Read"),
            ToolCallStarted(1, "b", "Grep"),
            ToolCallFinished(2, "a", True),
        ]
    )
    assert [(c.call_id, c.ok) for c in s.tool_calls] == [("a", True), ("b", None)]
    assert [c.call_id for c in s.pending_calls] == ["b"]


def test_a_file_added_then_edited_is_still_an_addition() -> None:
    s = fold([FileChanged(0, "a.txt", "add"), FileChanged(1, "a.txt", "update")])
    assert s.file_changes == (("a.txt", "add"),)


def test_final_text_prefers_the_turn_result_then_the_last_reply() -> None:
    assert fold([MessageEmitted(0, "one"), MessageEmitted(1, "two")]).final_text == "two"
    assert fold([MessageEmitted(0, "x", thought=True)]).final_text is None
    s = fold([MessageEmitted(0, "one"), TurnEnded(1, True, "result text", 2)])
    assert s.final_text == "result text"
    assert s.turns == 2


def test_turns_are_missing_when_never_reported() -> None:
    assert fold([TurnEnded(0, True)]).turns is None


def test_unknown_lines_are_counted_with_samples() -> None:
    s = fold([Unrecognized(i, f"line {i}") for i in range(7)])
    assert s.unknown_lines == 7
    assert len(s.unknown_samples) == 5
