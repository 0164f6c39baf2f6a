"""The OpenAI Responses wire of the fake model server renders replies as the API does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from supervisor.lab import wire_openai
from supervisor.lab.scenarios.codex import CUT_MID_TOOL_CALL_REPLY
from supervisor.lab.script import Reply, Text, Thinking, ToolCall

REQUEST: dict[str, Any] = {"model": "gpt-5.5", "stream": True, "input": []}
PATCH = (
    "*** Begin Patch\n*** Add File: a.txt\n+one line that is long enough to split\n*** End Patch\n"
)
ARGS = {"cmd": "cat README.md && echo a-longer-tail-for-several-deltas"}


def parse(frames: list[bytes]) -> list[dict[str, Any]]:
    """Each frame is one SSE event: ``event:`` and ``data:`` lines, then a blank line; the data is
    JSON whose ``type`` repeats the event name."""
    events = []
    for frame in frames:
        text = frame.decode()
        assert text.endswith("\n\n")
        lines = text[:-2].split("\n")
        assert len(lines) == 2
        assert lines[0].startswith("event: ")
        assert lines[1].startswith("data: ")
        payload = json.loads(lines[1].removeprefix("data: "))
        assert payload["type"] == lines[0].removeprefix("event: ")
        events.append(payload)
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def test_envelope_order_and_sequence_numbers() -> None:
    events = parse(wire_openai.stream_frames(Reply((Text("hi"),)), REQUEST, 1))
    assert types(events)[:2] == ["response.created", "response.in_progress"]
    assert types(events)[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    created = events[0]["response"]
    assert created["status"] == "in_progress"
    assert created["model"] == "gpt-5.5"
    assert created["output"] == []


def test_text_becomes_a_message_with_output_text_deltas() -> None:
    text = "A reply that is longer than one delta."
    events = parse(wire_openai.stream_frames(Reply((Text(text),)), REQUEST, 3))
    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = of_type(events, "response.output_text.delta")
    assert "".join(d["delta"] for d in deltas) == text
    assert of_type(events, "response.output_text.done")[0]["text"] == text
    done = of_type(events, "response.output_item.done")[0]["item"]
    assert done["type"] == "message"
    assert done["role"] == "assistant"
    assert done["content"] == [{"type": "output_text", "text": text, "annotations": []}]
    assert {d["item_id"] for d in deltas} == {done["id"]}


def test_thinking_becomes_a_reasoning_item_with_a_summary() -> None:
    text = "Reasoning about the request at some length."
    events = parse(wire_openai.stream_frames(Reply((Thinking(text), Text("ok"))), REQUEST, 1))
    deltas = of_type(events, "response.reasoning_summary_text.delta")
    assert "".join(d["delta"] for d in deltas) == text
    assert of_type(events, "response.reasoning_summary_text.done")[0]["text"] == text
    added = of_type(events, "response.output_item.added")[0]["item"]
    assert added["type"] == "reasoning"
    assert added["summary"] == []
    item = of_type(events, "response.output_item.done")[0]["item"]
    assert item["summary"] == [{"type": "summary_text", "text": text}]
    assert [o["type"] for o in events[-1]["response"]["output"]] == ["reasoning", "message"]


def test_function_call_streams_its_json_arguments() -> None:
    reply = Reply((ToolCall("exec_command", ARGS),))
    events = parse(wire_openai.stream_frames(reply, REQUEST, 2))
    added = of_type(events, "response.output_item.added")[0]["item"]
    assert added["type"] == "function_call"
    assert added["arguments"] == ""
    deltas = of_type(events, "response.function_call_arguments.delta")
    assert len(deltas) > 1
    joined = "".join(d["delta"] for d in deltas)
    assert json.loads(joined) == ARGS
    assert of_type(events, "response.function_call_arguments.done")[0]["arguments"] == joined
    item = of_type(events, "response.output_item.done")[0]["item"]
    assert item["name"] == "exec_command"
    assert item["call_id"] == "call_2_0"
    assert item["status"] == "completed"
    assert json.loads(item["arguments"]) == ARGS


def test_given_call_id_is_kept() -> None:
    reply = Reply((ToolCall("exec_command", {"cmd": "ls"}, call_id="call_fixed"),))
    events = parse(wire_openai.stream_frames(reply, REQUEST, 1))
    assert of_type(events, "response.output_item.done")[0]["item"]["call_id"] == "call_fixed"


def test_custom_tool_call_streams_raw_input() -> None:
    reply = Reply((ToolCall("apply_patch", PATCH, kind="custom"),))
    events = parse(wire_openai.stream_frames(reply, REQUEST, 1))
    deltas = of_type(events, "response.custom_tool_call_input.delta")
    assert len(deltas) > 1
    assert "".join(d["delta"] for d in deltas) == PATCH
    assert of_type(events, "response.custom_tool_call_input.done")[0]["input"] == PATCH
    item = of_type(events, "response.output_item.done")[0]["item"]
    assert item["type"] == "custom_tool_call"
    assert item["name"] == "apply_patch"
    assert item["input"] == PATCH
    assert "arguments" not in item


def test_ids_are_unique_across_requests_and_stable_between_runs() -> None:
    reply = Reply((Thinking("t"), Text("x"), ToolCall("exec_command", {"cmd": "ls"})))
    first = wire_openai.output_items(reply, 1)
    second = wire_openai.output_items(reply, 2)
    ids = [i["id"] for i in first + second] + [
        i["call_id"] for i in first + second if "call_id" in i
    ]
    assert len(ids) == len(set(ids))
    assert wire_openai.stream_frames(reply, REQUEST, 1) == wire_openai.stream_frames(
        reply, REQUEST, 1
    )


def test_completed_carries_deterministic_usage() -> None:
    reply = Reply((Thinking("three word thought"), Text("two words")))
    events = parse(wire_openai.stream_frames(reply, REQUEST, 2))
    completed = events[-1]["response"]
    assert completed["status"] == "completed"
    assert completed["usage"] == {
        "input_tokens": 2000,
        "input_tokens_details": {"cached_tokens": 1000},
        "output_tokens": 6,
        "output_tokens_details": {"reasoning_tokens": 3},
        "total_tokens": 2006,
    }
    first = wire_openai.usage_for(reply, 1)
    assert first["input_tokens_details"]["cached_tokens"] == 0


def test_stream_error_ends_with_response_failed() -> None:
    reply = Reply((Text("partial"),), stream_error="server_error", error_message="it broke")
    events = parse(wire_openai.stream_frames(reply, REQUEST, 1))
    assert "response.completed" not in types(events)
    assert types(events)[-1] == "response.failed"
    failed = events[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "it broke"}
    assert failed["usage"] is None


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("overloaded_error", "server_is_overloaded"),
        ("api_error", "server_error"),
        ("rate_limit_error", "rate_limit_exceeded"),
        ("insufficient_quota", "insufficient_quota"),
    ],
)
def test_stream_error_codes(given: str, sent: str) -> None:
    events = parse(wire_openai.stream_frames(Reply(stream_error=given), REQUEST, 1))
    error = events[-1]["response"]["error"]
    assert error["code"] == sent
    assert error["message"]


def test_json_body_is_the_whole_response() -> None:
    reply = Reply((Text("hello"), ToolCall("apply_patch", PATCH, kind="custom")))
    body = json.loads(wire_openai.json_body(reply, {"model": "gpt-test"}, 4))
    assert body["object"] == "response"
    assert body["id"] == "resp_4"
    assert body["status"] == "completed"
    assert body["model"] == "gpt-test"
    assert [o["type"] for o in body["output"]] == ["message", "custom_tool_call"]
    assert body["usage"]["input_tokens"] == 4000
    failed = json.loads(wire_openai.json_body(Reply(stream_error="server_error"), {}, 1))
    assert failed["status"] == "failed"
    assert failed["model"] == wire_openai.DEFAULT_MODEL


@pytest.mark.parametrize(
    ("status", "type_", "code"),
    [
        (401, "invalid_request_error", "invalid_api_key"),
        (429, "rate_limit_exceeded", "rate_limit_exceeded"),
        (500, "server_error", "server_error"),
        (503, "server_error", "server_error"),
        (400, "invalid_request_error", None),
    ],
)
def test_error_body_shape(status: int, type_: str, code: str | None) -> None:
    body = json.loads(wire_openai.error_body(status, "custom message"))
    assert body == {
        "error": {"message": "custom message", "type": type_, "param": None, "code": code}
    }


def test_error_body_default_message() -> None:
    assert json.loads(wire_openai.error_body(503, None))["error"]["message"] == (
        "503 Service Unavailable"
    )
    assert json.loads(wire_openai.error_body(599, None))["error"]["message"] == "599 Error"


def test_codex_cut_scenario_cuts_inside_the_function_call() -> None:
    """The cut_mid_tool_call scenario's cut lands after the message item finished and while the
    function call's arguments stream."""
    cut = CUT_MID_TOOL_CALL_REPLY.cut_after_events
    assert cut is not None
    sent = types(parse(wire_openai.stream_frames(CUT_MID_TOOL_CALL_REPLY, REQUEST, 1)[:cut]))
    assert sent[-1] == "response.function_call_arguments.delta"
    assert sent.count("response.output_item.done") == 1
    assert "response.function_call_arguments.done" not in sent
