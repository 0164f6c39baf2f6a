"""AcpFold: the recorded claude-agent-acp transcripts replayed, the mapping, and robustness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.acp import AcpFold, outcome_for_stop_reason
from supervisor.events import (
    AgentSessionStarted,
    ErrorReported,
    FailureKind,
    FileChanged,
    MessageEmitted,
    OutcomeStatus,
    PermissionDenied,
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    Unrecognized,
    UsageReported,
    WarningRaised,
)
from supervisor.summary import RunSummary, fold

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "external" / "claude-acp" / "0.23.1"
SCENARIOS = ("plain_text", "read_file", "write_file", "http_500")


def replay(name: str) -> tuple[AcpFold, list[RunEvent]]:
    acp = AcpFold(cwd="<repo>")
    events: list[RunEvent] = []
    for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines():
        events += acp.feed_record(json.loads(line))
    events += acp.close()
    return acp, events


def summary(events: list[RunEvent]) -> RunSummary:
    return fold(events)


@pytest.mark.parametrize("name", SCENARIOS)
def test_fixture_replays_cleanly(name: str) -> None:
    meta = json.loads((FIXTURES / f"{name}.meta.json").read_text())
    assert meta["synthetic"] is False
    assert meta["netns_links"]
    assert all(": lo:" in link for link in meta["netns_links"])
    acp, events = replay(name)
    assert acp.unrecognized == 0
    assert not [e for e in events if isinstance(e, Unrecognized)]
    assert [e.seq for e in events] == list(range(len(events)))
    started = [e for e in events if isinstance(e, AgentSessionStarted)]
    assert len(started) == 1
    assert started[0].session_id == acp.session_id


def test_plain_text_final_text_and_thought() -> None:
    _, events = replay("plain_text")
    messages = [e for e in events if isinstance(e, MessageEmitted)]
    assert [(m.text, m.thought) for m in messages] == [
        ("The user wants a short greeting. No tools are needed.", True),
        ("Hello from the lab.", False),
    ]
    turns = [e for e in events if isinstance(e, TurnEnded)]
    assert len(turns) == 1
    assert turns[0].ok
    assert turns[0].stop_reason == "end_turn"
    assert turns[0].final_text == "Hello from the lab."
    s = summary(events)
    assert s.final_text == "Hello from the lab."
    assert s.usage.input_tokens == 23608
    assert s.usage.output_tokens == 18
    assert s.usage.cost == pytest.approx(0.071094)
    assert s.usage.currency == "USD"
    assert outcome_for_stop_reason(turns[0].stop_reason).status is OutcomeStatus.COMPLETED


def test_read_file_tool_call_started_and_finished() -> None:
    _, events = replay("read_file")
    starts = [e for e in events if isinstance(e, ToolCallStarted)]
    ends = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(s.name, s.call_id, s.synthetic_id) for s in starts] == [
        ("Read", "toolu_lab002_1", False)
    ]
    assert [(e.call_id, e.ok) for e in ends] == [("toolu_lab002_1", True)]
    assert ends[0].output is not None
    assert "return 'hello ' + name" in ends[0].output
    assert events.index(starts[0]) < events.index(ends[0])
    s = summary(events)
    assert [(c.name, c.ok) for c in s.tool_calls] == [("Read", True)]
    assert s.file_changes == ()
    assert s.final_text == "greet() returns 'hello ' followed by the name."


def test_write_file_permission_warning_and_file_added() -> None:
    _, events = replay("write_file")
    warnings = [e for e in events if isinstance(e, WarningRaised)]
    assert len(warnings) == 1
    assert "Write" in warnings[0].message
    assert "allow_always, allow, reject" in warnings[0].message
    assert [(e.path, e.kind) for e in events if isinstance(e, FileChanged)] == [("NOTES.md", "add")]
    assert not [e for e in events if isinstance(e, PermissionDenied)]  # we answered "allow"
    assert summary(events).final_text == "Created NOTES.md."


def test_http_500_is_a_server_error() -> None:
    _, events = replay("http_500")
    errors = [e for e in events if isinstance(e, ErrorReported)]
    assert len(errors) == 1
    assert errors[0].kind is FailureKind.SERVER_ERROR
    assert errors[0].http_status == 500
    assert errors[0].fatal
    assert "session/prompt" in errors[0].message
    assert not [e for e in events if isinstance(e, TurnEnded)]
    assert not [e for e in events if isinstance(e, MessageEmitted)]


# -- the mapping on hand-made messages ------------------------------------------------------


def _update(update: dict[str, Any], sid: str = "s1") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": sid, "update": update},
    }


def _chunk(text: str, kind: str = "agent_message_chunk", **extra: Any) -> dict[str, Any]:
    return _update({"sessionUpdate": kind, "content": {"type": "text", "text": text}, **extra})


def _feed(acp: AcpFold, *messages: dict[str, Any]) -> list[RunEvent]:
    out: list[RunEvent] = []
    for m in messages:
        out += acp.feed(m, "in")
    return out


def test_chunks_accumulate_until_the_message_ends() -> None:
    acp = AcpFold()
    assert _feed(acp, _chunk("Hel"), _chunk(""), _chunk("lo")) == []
    # a thought chunk ends the reply and starts a thought
    events = _feed(acp, _chunk("hmm", "agent_thought_chunk"))
    assert [(e.text, e.thought) for e in events if isinstance(e, MessageEmitted)] == [
        ("Hello", False)
    ]
    # any other update ends the thought
    events = _feed(acp, _update({"sessionUpdate": "plan", "entries": []}))
    assert [(e.text, e.thought) for e in events if isinstance(e, MessageEmitted)] == [("hmm", True)]
    # a new messageId ends the message too; close() flushes the last one
    _feed(acp, _chunk("a", messageId="m1"))
    events = _feed(acp, _chunk("b", messageId="m2"))
    assert [(e.text, e.message_id) for e in events if isinstance(e, MessageEmitted)] == [
        ("a", "m1")
    ]
    tail = acp.close()
    assert [(e.text, e.message_id) for e in tail if isinstance(e, MessageEmitted)] == [("b", "m2")]
    assert acp.close() == []


def test_prompt_result_ends_the_message_and_the_turn() -> None:
    acp = AcpFold()
    acp.feed({"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {}}, "out")
    _feed(acp, _chunk("done"))
    events = _feed(acp, {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "refusal"}})
    assert isinstance(events[0], MessageEmitted)
    assert isinstance(events[1], TurnEnded)
    assert events[1].ok is False
    assert events[1].final_text == "done"
    assert outcome_for_stop_reason("refusal").status is OutcomeStatus.REFUSED


def test_tool_call_without_id_failed_and_unknown_kinds() -> None:
    acp = AcpFold()
    events = _feed(
        acp,
        _update({"sessionUpdate": "tool_call", "title": "Run ls", "status": "failed"}),
        _update({"sessionUpdate": "brand_new_kind"}),
        _update({"sessionUpdate": "current_mode_update", "currentModeId": "plan"}),
        {"jsonrpc": "2.0", "method": "_vendor/notice", "params": {}},
    )
    start = next(e for e in events if isinstance(e, ToolCallStarted))
    assert start.synthetic_id
    assert start.name == "Run ls"
    assert [(e.call_id, e.ok) for e in events if isinstance(e, ToolCallFinished)] == [
        (start.call_id, False)
    ]
    assert acp.unrecognized == 2
    assert len([e for e in events if isinstance(e, Unrecognized)]) == 2


def test_failed_call_reports_no_file_change_and_pending_call_is_a_cut() -> None:
    acp = AcpFold(cwd="/w")
    diff = {"type": "diff", "path": "/w/a.txt", "oldText": "x", "newText": "y"}
    events = _feed(
        acp,
        _update({"sessionUpdate": "tool_call", "toolCallId": "c1", "content": [diff]}),
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed"}),
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "c2", "content": [diff]}),
    )
    assert not [e for e in events if isinstance(e, FileChanged)]
    tail = acp.close()
    assert [(e.kind, "c2" in e.message) for e in tail if isinstance(e, ErrorReported)] == [
        (FailureKind.STREAM_CUT, True)
    ]
    acp2 = AcpFold(cwd="/w")
    done = _feed(
        acp2,
        _update({"sessionUpdate": "tool_call", "toolCallId": "c1", "content": [diff]}),
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}),
    )
    assert [(e.path, e.kind) for e in done if isinstance(e, FileChanged)] == [("a.txt", "update")]


def test_rejected_permission_is_a_denial() -> None:
    acp = AcpFold()
    request = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/request_permission",
        "params": {
            "sessionId": "s1",
            "toolCall": {"toolCallId": "c9", "title": "Edit", "locations": [{"path": "b.py"}]},
            "options": [
                {"optionId": "allow", "kind": "allow_once", "name": "Allow"},
                {"optionId": "reject", "kind": "reject_once", "name": "Reject"},
            ],
        },
    }
    events = _feed(acp, request)
    assert isinstance(events[0], ToolCallStarted)  # first sighting inside the request
    assert isinstance(events[1], WarningRaised)
    answer = {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"outcome": {"outcome": "selected", "optionId": "reject"}},
    }
    denied = acp.feed(answer, "out")
    assert [(d.tool, d.call_id, d.path) for d in denied if isinstance(d, PermissionDenied)] == [
        ("Edit", "c9", "b.py")
    ]


@pytest.mark.parametrize(
    ("error", "kind", "status"),
    [
        ({"code": 429, "message": "Too many requests"}, None, 429),
        (
            {"code": -32603, "message": "Internal error", "data": "API Error: 401 bad key"},
            FailureKind.AUTH,
            401,
        ),
        ({"code": -32603, "message": "Overloaded"}, FailureKind.OVERLOADED, None),
        ({"code": -32000, "message": "Authentication required"}, FailureKind.AUTH, None),
    ],
)
def test_error_responses_are_classified(
    error: dict[str, Any], kind: FailureKind | None, status: int | None
) -> None:
    acp = AcpFold()
    (ev,) = _feed(acp, {"jsonrpc": "2.0", "id": 1, "error": error})
    assert isinstance(ev, ErrorReported)
    assert ev.http_status == status
    if kind is None:
        assert ev.usage_limited
    else:
        assert ev.kind is kind


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        ("end_turn", OutcomeStatus.COMPLETED),
        ("cancelled", OutcomeStatus.CANCELED),
        ("refusal", OutcomeStatus.REFUSED),
        ("max_tokens", OutcomeStatus.TIMED_OUT),
        ("max_turn_requests", OutcomeStatus.TIMED_OUT),
        ("something_new", OutcomeStatus.FAILED),
        (None, OutcomeStatus.FAILED),
    ],
)
def test_outcome_for_stop_reason(reason: object, status: OutcomeStatus) -> None:
    outcome = outcome_for_stop_reason(reason)
    assert outcome.status is status
    if status is OutcomeStatus.FAILED:
        assert outcome.failure_kind is FailureKind.PROTOCOL


def test_no_usage_is_none() -> None:
    acp = AcpFold()
    acp.feed({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {}}, "out")
    events = _feed(acp, {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
    assert not [e for e in events if isinstance(e, UsageReported)]
    assert summary(events).usage.is_empty


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "jsonrpc",
        "id",
        "method",
        "params",
        "result",
        "error",
        "update",
        "sessionUpdate",
        "toolCallId",
        "content",
        "status",
        "stopReason",
        "usage",
        "cost",
        "options",
        "toolCall",
        "_meta",
        "quota",
        "token_count",
        "input_tokens",
    ]
)
_shaped = st.recursive(
    st.none()
    | st.integers()
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "session/update",
            "session/prompt",
            "session/new",
            "session/request_permission",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "usage_update",
            "diff",
            "completed",
            "failed",
            "text",
            "end_turn",
        ]
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=6),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_shaped | _json, st.sampled_from(["in", "out", "sideways"])), max_size=12)
)
def test_arbitrary_messages_never_raise(messages: list[tuple[Any, str]]) -> None:
    acp = AcpFold(cwd="/w")
    events: list[RunEvent] = []
    for message, direction in messages:
        events += acp.feed(message, direction)  # type: ignore[arg-type]
        events += acp.feed_record({"direction": direction, "message": message})
    events += acp.close()
    assert [e.seq for e in events] == list(range(len(events)))
    assert acp.unrecognized == len([e for e in events if isinstance(e, Unrecognized)])
    fold(events)


# -- gemini --acp 0.61.0 (fixtures/external/gemini-acp/0.61.0) -------------------------------

GEMINI = FIXTURES.parents[1] / "gemini-acp" / "0.61.0"


def replay_gemini(name: str) -> tuple[AcpFold, list[RunEvent]]:
    acp = AcpFold(cwd="<repo>")
    events: list[RunEvent] = []
    for line in (GEMINI / f"{name}.jsonl").read_text().splitlines():
        events += acp.feed_record(json.loads(line))
    events += acp.close()
    return acp, events


@pytest.mark.parametrize("name", SCENARIOS)
def test_gemini_fixture_replays_cleanly(name: str) -> None:
    meta = json.loads((GEMINI / f"{name}.meta.json").read_text())
    assert meta["synthetic"] is False
    assert meta["vendor_version"] == "0.61.0"
    assert meta["netns_links"]
    assert all(": lo:" in link for link in meta["netns_links"])
    acp, events = replay_gemini(name)
    assert acp.unrecognized == 0
    assert [e.seq for e in events] == list(range(len(events)))
    started = [e for e in events if isinstance(e, AgentSessionStarted)]
    assert [(s.session_id, s.model) for s in started] == [(acp.session_id, "gemini-2.5-pro")]


def test_gemini_plain_text_thought_then_reply() -> None:
    _, events = replay_gemini("plain_text")
    messages = [(e.text, e.thought) for e in events if isinstance(e, MessageEmitted)]
    assert messages == [
        ("**Greeting the lab**\nThe user wants a short greeting. No tools are needed.", True),
        ("Hello from the lab.", False),
    ]
    turns = [e for e in events if isinstance(e, TurnEnded)]
    assert [(t.ok, t.stop_reason, t.final_text) for t in turns] == [
        (True, "end_turn", "Hello from the lab.")
    ]


def _fs_paths(name: str, method: str) -> list[str]:
    lines = [json.loads(x)["message"] for x in (GEMINI / f"{name}.jsonl").read_text().splitlines()]
    return [m["params"]["path"] for m in lines if m.get("method") == method]


def test_gemini_read_file_reads_the_disk_itself() -> None:
    _, events = replay_gemini("read_file")
    # unlike what VENDORS.md says, read_file did not go through fs/read_text_file
    assert _fs_paths("read_file", "fs/read_text_file") == []
    starts = [e for e in events if isinstance(e, ToolCallStarted)]
    ends = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(starts) == 1
    assert starts[0].call_id.startswith("read_file")
    assert starts[0].name == "src/app.py"  # gemini's title; no tool name in the message
    assert [(e.call_id, e.ok, e.output) for e in ends] == [(starts[0].call_id, True, None)]
    assert summary(events).final_text == "greet() returns 'hello ' followed by the name."


def test_gemini_write_file_asks_without_a_tool_call_then_writes_through_fs() -> None:
    _, events = replay_gemini("write_file")
    lines = [
        json.loads(x)["message"] for x in (GEMINI / "write_file.jsonl").read_text().splitlines()
    ]
    methods = [m.get("method") for m in lines if "method" in m and "id" in m and "params" in m]
    assert "fs/write_text_file" in methods
    # an existence check before the permission request and another before the write
    assert _fs_paths("write_file", "fs/read_text_file") == ["<repo>/NOTES.md"] * 2
    assert _fs_paths("write_file", "fs/write_text_file") == ["<repo>/NOTES.md"]
    assert not any(_dict_update(m).get("sessionUpdate") == "tool_call" for m in lines)
    warnings = [e for e in events if isinstance(e, WarningRaised)]
    assert len(warnings) == 1
    assert "proceed_always, proceed_once, cancel" in warnings[0].message
    starts = [e for e in events if isinstance(e, ToolCallStarted)]
    assert len(starts) == 1
    assert events.index(starts[0]) < events.index(warnings[0])
    assert [e.path for e in events if isinstance(e, FileChanged)] == ["NOTES.md"]
    assert not [e for e in events if isinstance(e, PermissionDenied)]
    assert summary(events).final_text == "Created NOTES.md."


def _dict_update(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    return update if isinstance(update, dict) else {}


def test_gemini_http_500_uses_the_status_as_the_code() -> None:
    _, events = replay_gemini("http_500")
    errors = [e for e in events if isinstance(e, ErrorReported)]
    assert [(e.kind, e.http_status, e.fatal) for e in errors] == [
        (FailureKind.SERVER_ERROR, 500, True)
    ]
    assert "INTERNAL" in errors[0].message
    assert not [e for e in events if isinstance(e, TurnEnded | MessageEmitted)]
    meta = json.loads((GEMINI / "http_500.meta.json").read_text())
    assert [r["statuses"] for r in meta["requests"]] == [[500]]  # maxAttempts=1, model pinned


def test_gemini_quota_is_this_prompts_usage() -> None:
    # token_count sums the prompt's model requests: read_file made two (the fake server's
    # usageMetadata, recorded in the meta file's request summary, gives each one's figures)
    for name, requests in (("plain_text", 1), ("read_file", 2), ("write_file", 2)):
        acp, events = replay_gemini(name)
        usage = [e for e in events if isinstance(e, UsageReported)]
        assert len(usage) == 1, name
        assert (usage[0].scope, usage[0].key) == ("turn", acp.session_id)
        lines = [
            json.loads(x)["message"] for x in (GEMINI / f"{name}.jsonl").read_text().splitlines()
        ]
        (result,) = [m["result"] for m in lines if "stopReason" in m.get("result", {})]
        quota = result["_meta"]["quota"]["token_count"]
        figures = usage[0].usage
        assert (figures.input_tokens, figures.output_tokens) == (
            quota["input_tokens"],
            quota["output_tokens"],
        )
        # what gemini does not report stays missing
        assert figures.reasoning_tokens is None
        assert figures.cache_read_tokens is None
        assert figures.cost is None
        meta = json.loads((GEMINI / f"{name}.meta.json").read_text())
        assert sum(len(r["statuses"]) for r in meta["requests"]) == requests
        assert summary(events).usage.input_tokens == quota["input_tokens"]
    _, failed = replay_gemini("http_500")
    assert not [e for e in failed if isinstance(e, UsageReported)]
    assert summary(failed).usage.is_empty


def _prompt_result(rid: int, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    counts = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {
            "stopReason": "end_turn",
            "_meta": {
                "quota": {
                    "token_count": counts,
                    "model_usage": [{"model": "gemini-2.5-pro", "token_count": counts}],
                }
            },
        },
    }


def test_gemini_quota_over_two_prompts_adds_up() -> None:
    # the shapes and figures of a live two-prompt check against gemini 0.61.0 (docs/acp.md):
    # the second prompt reported its own request (12438 / 7), not the session's sum
    acp = AcpFold()
    events: list[RunEvent] = []
    for rid, (i, o) in ((1, (12413, 3)), (2, (12438, 7))):
        prompt = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": "s"},
        }
        events += acp.feed(prompt, "out")
        events += _feed(acp, _prompt_result(rid, i, o))
    usage = summary(events).usage
    assert (usage.input_tokens, usage.output_tokens) == (12413 + 12438, 3 + 7)


def test_quota_without_figures_and_standard_usage_first() -> None:
    acp = AcpFold()
    acp.feed({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {}}, "out")
    odd = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "stopReason": "end_turn",
            "_meta": {"quota": {"token_count": {"input_tokens": "many"}}},
        },
    }
    events = _feed(acp, odd)
    assert not [e for e in events if isinstance(e, UsageReported)]
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["end_turn"]
    # an ACP usage wins over gemini's quota when an agent sends both
    acp.feed({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {}}, "out")
    both = _prompt_result(2, 5, 6)
    both["result"]["usage"] = {"inputTokens": 1, "outputTokens": 2}
    events = _feed(acp, both)
    assert [(e.scope, e.usage.input_tokens) for e in events if isinstance(e, UsageReported)] == [
        ("cumulative", 1)
    ]


def test_a_denied_call_the_agent_never_ends_is_a_failed_call_not_a_cut() -> None:
    # gemini sends no tool_call_update after a refused permission (live read-only run)
    acp = AcpFold(cwd="/w")
    request = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "session/request_permission",
        "params": {
            "sessionId": "s1",
            "toolCall": {
                "toolCallId": "w1",
                "title": "Writing to NEW.md",
                "locations": [{"path": "/w/NEW.md"}],
            },
            "options": [
                {"optionId": "proceed_once", "kind": "allow_once", "name": "Allow"},
                {"optionId": "cancel", "kind": "reject_once", "name": "Cancel"},
            ],
        },
    }
    events = _feed(acp, request)
    events += acp.feed(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {"outcome": {"outcome": "selected", "optionId": "cancel"}},
        },
        "out",
    )
    events += acp.close()
    assert [(e.call_id, e.path) for e in events if isinstance(e, PermissionDenied)] == [
        ("w1", "NEW.md")
    ]
    assert [(e.call_id, e.ok) for e in events if isinstance(e, ToolCallFinished)] == [("w1", False)]
    assert not [e for e in events if isinstance(e, ErrorReported)]
    assert [e.seq for e in events] == list(range(len(events)))
    # an agent that does end the denied call (opencode: status failed) is taken at its word
    acp2 = AcpFold(cwd="/w")
    events = _feed(acp2, request)
    events += acp2.feed(
        {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}}, "out"
    )
    events += _feed(
        acp2,
        _update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "w1",
                "status": "failed",
                "content": [{"type": "content", "content": {"type": "text", "text": "rejected"}}],
            }
        ),
    )
    events += acp2.close()
    assert [(e.ok, e.output) for e in events if isinstance(e, ToolCallFinished)] == [
        (False, "rejected")
    ]


def test_memory_stays_flat_over_many_finished_tool_calls() -> None:
    from supervisor.acp.fold import CALLS_KEPT

    fold = AcpFold()
    for n in range(CALLS_KEPT * 5):
        for status in ("pending", "completed"):
            kind = "tool_call" if status == "pending" else "tool_call_update"
            update = {"sessionUpdate": kind, "toolCallId": f"c{n}", "title": "t", "status": status}
            fold.feed(
                {"jsonrpc": "2.0", "method": "session/update", "params": {"update": update}}, "in"
            )
    assert len(fold._calls) <= CALLS_KEPT
    assert fold.unrecognized == 0
    # an unfinished call is never forgotten: the end of the stream still names it
    fold.feed(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "update": {"sessionUpdate": "tool_call", "toolCallId": "open", "title": "t"}
            },
        },
        "in",
    )
    for n in range(CALLS_KEPT * 2):
        update = {"sessionUpdate": "tool_call", "toolCallId": f"d{n}", "status": "completed"}
        fold.feed(
            {"jsonrpc": "2.0", "method": "session/update", "params": {"update": update}}, "in"
        )
    cut = [e for e in fold.close() if e.type == "error"]
    assert [e.message for e in cut] == ["the stream ended while tool call open (t) was pending"]
