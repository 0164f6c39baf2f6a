"""The Chat Completions wire of the fake model server, and the opencode ACP recordings made
through it (replayed by AcpFold without the npm package)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from supervisor.acp import AcpFold
from supervisor.events import (
    AgentSessionStarted,
    FileChanged,
    MessageEmitted,
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    Unrecognized,
    WarningRaised,
)
from supervisor.lab import wire_chat
from supervisor.lab.script import Reply, Script, Text, Thinking, ToolCall
from supervisor.lab.server import WIRES, FakeModelServer

STREAM_USAGE = {"model": "lab-model", "stream": True, "stream_options": {"include_usage": True}}


def chunks(frames: list[bytes]) -> list[Any]:
    """The data payloads of ``frames`` (``"[DONE]"`` as the string)."""
    out: list[Any] = []
    for frame in frames:
        text = frame.decode()
        assert text.startswith("data: ")
        assert text.endswith("\n\n")
        data = text[len("data: ") : -2]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def deltas(payloads: list[Any]) -> list[dict[str, Any]]:
    return [p["choices"][0]["delta"] for p in payloads if isinstance(p, dict) and p.get("choices")]


def test_registered_for_the_chat_completions_path() -> None:
    assert WIRES[wire_chat.PATH] == "supervisor.lab.wire_chat"


def test_text_stream_envelope() -> None:
    payloads = chunks(wire_chat.stream_frames(Reply((Text("Hello from the lab."),)), {}, 3))
    assert payloads[-1] == "[DONE]"
    objs = payloads[:-1]
    assert {p["id"] for p in objs} == {"chatcmpl-3"}
    assert {p["object"] for p in objs} == {"chat.completion.chunk"}
    assert {p["model"] for p in objs} == {wire_chat.DEFAULT_MODEL}
    ds = deltas(objs)
    assert ds[0] == {"role": "assistant", "content": ""}
    assert "".join(d.get("content", "") for d in ds) == "Hello from the lab."
    assert ds[-1] == {}
    assert objs[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(p["choices"][0]["finish_reason"] is None for p in objs[:-1])
    assert not any("usage" in p for p in objs)  # not asked for


def test_usage_chunk_only_when_asked() -> None:
    reply = Reply((Thinking("think a bit"), Text("one two three")))
    payloads = chunks(wire_chat.stream_frames(reply, STREAM_USAGE, 2))
    assert payloads[-1] == "[DONE]"
    last = payloads[-2]
    assert last["choices"] == []
    assert last["model"] == "lab-model"
    assert last["usage"] == {
        "prompt_tokens": 2000,
        "completion_tokens": 7,
        "total_tokens": 2007,
        "prompt_tokens_details": {"cached_tokens": 1000},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    assert payloads[-3]["choices"][0]["finish_reason"] == "stop"


def test_thinking_streams_as_reasoning_content() -> None:
    reply = Reply((Thinking("The user wants a short greeting."), Text("Hi.")))
    ds = deltas(chunks(wire_chat.stream_frames(reply, {}, 1))[:-1])
    assert "".join(d.get("reasoning_content", "") for d in ds) == (
        "The user wants a short greeting."
    )
    first_text = next(i for i, d in enumerate(ds) if d.get("content"))
    assert all("reasoning_content" not in d for d in ds[first_text:])


def test_tool_calls_stream_name_then_argument_pieces() -> None:
    reply = Reply(
        (
            Text("Let me look."),
            ToolCall("read", {"filePath": "/repo/src/app.py"}),
            ToolCall("glob", {"pattern": "**/*.py"}, call_id="given"),
        )
    )
    payloads = chunks(wire_chat.stream_frames(reply, {}, 4))
    calls: dict[int, dict[str, Any]] = {}
    for d in deltas(payloads[:-1]):
        for tc in d.get("tool_calls", ()):
            entry = calls.setdefault(tc["index"], {"arguments": ""})
            if "id" in tc:
                assert tc["type"] == "function"
                assert tc["function"]["arguments"] == ""
                entry["id"] = tc["id"]
                entry["name"] = tc["function"]["name"]
            else:
                assert set(tc) == {"index", "function"}
                entry["arguments"] += tc["function"]["arguments"]
    assert calls == {
        0: {
            "id": "call_4_1",
            "name": "read",
            "arguments": json.dumps({"filePath": "/repo/src/app.py"}, separators=(",", ":")),
        },
        1: {"id": "given", "name": "glob", "arguments": '{"pattern":"**/*.py"}'},
    }
    finish = [p["choices"][0]["finish_reason"] for p in payloads[:-1]]
    assert finish[-1] == "tool_calls"


def test_custom_tool_call_is_a_function_with_raw_arguments() -> None:
    reply = Reply((ToolCall("apply_patch", "*** Begin Patch\n", kind="custom"),))
    body = json.loads(wire_chat.json_body(reply, {}, 1))
    call = body["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "apply_patch", "arguments": "*** Begin Patch\n"}


def test_stream_error_ends_with_an_error_chunk_and_no_done() -> None:
    reply = Reply((Text("partial"),), stream_error="overloaded_error", error_message="busy")
    payloads = chunks(wire_chat.stream_frames(reply, STREAM_USAGE, 1))
    assert "[DONE]" not in payloads
    assert payloads[-1] == {
        "error": {
            "message": "busy",
            "type": "server_is_overloaded",
            "param": None,
            "code": "server_is_overloaded",
        }
    }
    assert not any(isinstance(p, dict) and "usage" in p for p in payloads)


def test_ids_are_stable_between_runs() -> None:
    reply = Reply((ToolCall("read", {"filePath": "x"}),))
    assert wire_chat.stream_frames(reply, {}, 5) == wire_chat.stream_frames(reply, {}, 5)
    assert wire_chat.stream_frames(reply, {}, 5) != wire_chat.stream_frames(reply, {}, 6)


def test_json_body_is_a_whole_completion() -> None:
    reply = Reply((Thinking("hmm"), Text("a "), Text("b"), ToolCall("read", {"filePath": "x"})))
    body = json.loads(wire_chat.json_body(reply, {"model": "m"}, 2))
    assert body["object"] == "chat.completion"
    assert body["id"] == "chatcmpl-2"
    assert body["model"] == "m"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant"
    assert message["content"] == "a b"
    assert message["reasoning_content"] == "hmm"
    assert message["tool_calls"] == [
        {
            "id": "call_2_3",
            "type": "function",
            "function": {"name": "read", "arguments": '{"filePath":"x"}'},
        }
    ]
    assert body["usage"]["prompt_tokens"] == 2000
    only_call = json.loads(wire_chat.json_body(Reply((ToolCall("t", {}),)), {}, 1))
    assert only_call["choices"][0]["message"]["content"] is None


@pytest.mark.parametrize(
    ("status", "type_", "code"),
    [(401, "invalid_request_error", "invalid_api_key"), (500, "server_error", "server_error")],
)
def test_error_body(status: int, type_: str, code: str) -> None:
    error = json.loads(wire_chat.error_body(status, None))["error"]
    assert error["type"] == type_
    assert error["code"] == code
    assert error["message"].startswith(str(status))


def _post(server: FakeModelServer, body: dict[str, Any]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(
            "POST",
            wire_chat.PATH,
            json.dumps(body),
            {"content-type": "application/json", "authorization": "Bearer x"},
        )
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_served_over_http() -> None:
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    script = Script([Reply((Text("streamed"),)), Reply((Text("plain"),)), Reply(http_status=500)])
    with FakeModelServer(script) as server:
        status, raw = _post(server, {**STREAM_USAGE, "tools": tools})
        assert status == 200
        assert raw.endswith(b"data: [DONE]\n\n")
        status, raw = _post(server, {"model": "m", "tools": tools})
        assert status == 200
        assert json.loads(raw)["choices"][0]["message"]["content"] == "plain"
        status, raw = _post(server, {"model": "m", "stream": True, "tools": tools})
        assert status == 500
        assert json.loads(raw)["error"]["code"] == "server_error"
        status, raw = _post(server, {"model": "m", "stream": True, "messages": []})
        assert status == 200  # no tools: the side lane (opencode's title request)
        lanes = [(r.lane, r.status) for r in server.requests]
    assert lanes == [("main", 200), ("main", 200), ("main", 500), ("side", 200)]


# -- the opencode acp recordings made through this wire -------------------------------------

OPENCODE = (
    Path(__file__).resolve().parents[2] / "fixtures" / "external" / "opencode-acp" / "1.18.33"
)
OPENCODE_SCENARIOS = ("plain_text", "read_file", "write_file", "http_500")


def replay(name: str) -> tuple[AcpFold, list[RunEvent]]:
    acp = AcpFold(cwd="<repo>")
    events: list[RunEvent] = []
    for line in (OPENCODE / f"{name}.jsonl").read_text().splitlines():
        events += acp.feed_record(json.loads(line))
    return acp, events + acp.close()


@pytest.mark.parametrize("name", OPENCODE_SCENARIOS)
def test_opencode_fixture_replays_cleanly(name: str) -> None:
    meta = json.loads((OPENCODE / f"{name}.meta.json").read_text())
    assert meta["synthetic"] is False
    assert meta["netns_links"]
    assert all(": lo:" in link for link in meta["netns_links"])
    assert {r["path"] for r in meta["requests"]} == {wire_chat.PATH}
    acp, events = replay(name)
    assert acp.unrecognized == 0
    assert not [e for e in events if isinstance(e, Unrecognized)]
    assert [e.seq for e in events] == list(range(len(events)))
    started = [e for e in events if isinstance(e, AgentSessionStarted)]
    assert [(s.session_id, s.model) for s in started] == [(acp.session_id, "lab/lab-model")]


def test_opencode_plain_text() -> None:
    _, events = replay("plain_text")
    messages = [(e.text, e.thought) for e in events if isinstance(e, MessageEmitted)]
    assert messages == [
        ("The user wants a short greeting. No tools are needed.", True),
        ("Hello from the lab.", False),
    ]
    turn = [e for e in events if isinstance(e, TurnEnded)]
    assert [(t.ok, t.final_text) for t in turn] == [(True, "Hello from the lab.")]


def test_opencode_read_file_reads_the_disk_itself() -> None:
    _, events = replay("read_file")
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [s.name for s in started] == ["read"]
    assert [(f.call_id, f.ok) for f in finished] == [(started[0].call_id, True)]
    assert "hello" in (finished[0].output or "")
    lines = (OPENCODE / "read_file.jsonl").read_text()
    assert "fs/read_text_file" not in lines


def test_opencode_write_file_asks_then_writes_through_the_client() -> None:
    _, events = replay("write_file")
    warnings = [e for e in events if isinstance(e, WarningRaised)]
    assert [w.code for w in warnings] == ["permission_request", "usage_partial"]
    assert "once, always, reject" in warnings[0].message
    changes = [(e.path, e.kind) for e in events if isinstance(e, FileChanged)]
    assert changes == [("NOTES.md", "add")]
    assert '"method": "fs/write_text_file"' in (OPENCODE / "write_file.jsonl").read_text()


def test_opencode_http_500_retries_until_cancelled_and_says_end_turn() -> None:
    meta = json.loads((OPENCODE / "http_500.meta.json").read_text())
    main = [r for r in meta["requests"] if r["lane"] == "main"]
    assert main
    assert set(main[0]["statuses"]) == {500}
    assert meta["cancelled_after_s"] is not None
    _, events = replay("http_500")
    assert not [e for e in events if isinstance(e, MessageEmitted)]
    turn = [e for e in events if isinstance(e, TurnEnded)]
    assert [(t.stop_reason, t.final_text) for t in turn] == [("end_turn", None)]


def test_opencode_usage_is_one_requests_not_a_running_total() -> None:
    """opencode's prompt result carries the last model request's tokens: folded as one
    message's figures (not a cumulative total), with a warning that the run undercounts."""
    from supervisor.events import UsageReported
    from supervisor.summary import fold

    _, events = replay("write_file")
    usage = [e for e in events if isinstance(e, UsageReported)]
    assert [u.scope for u in usage] == ["message"]
    assert usage[0].usage.input_tokens is not None
    assert [e.code for e in events if isinstance(e, WarningRaised)][-1] == "usage_partial"
    assert fold(events).usage.input_tokens == usage[0].usage.input_tokens
