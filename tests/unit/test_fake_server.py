"""The fake model server and its Anthropic wire, driven by a plain HTTP client on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.lab import wire_anthropic
from supervisor.lab.recorder import files_changed, step_file_names
from supervisor.lab.scenarios import bind_replies, get_scenario
from supervisor.lab.script import Reply, Script, Text, Thinking, ToolCall
from supervisor.lab.server import FakeModelServer, is_side_request

TOOLS = [{"name": "Read", "input_schema": {"type": "object"}}]
REQUEST: dict[str, Any] = {"model": "claude-lab-model", "stream": True, "tools": TOOLS}
LONG = "A text long enough to be split into several deltas by the wire."


def sse_events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """``event:`` / ``data:`` pairs of an SSE body; every frame ends with a blank line."""
    assert data.endswith(b"\n\n") or not data
    out = []
    for frame in data.decode().split("\n\n")[:-1]:
        event_line, data_line = frame.split("\n")
        name = event_line.removeprefix("event: ")
        payload = json.loads(data_line.removeprefix("data: "))
        assert payload["type"] == name
        out.append((name, payload))
    return out


def names(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [name for name, _ in events]


# ---------------------------------------------------------------- the Anthropic wire, pure


def test_text_stream_envelope() -> None:
    frames = wire_anthropic.stream_frames(Reply((Text(LONG),)), REQUEST, 7)
    events = sse_events(b"".join(frames))
    assert len(frames) == len(events)
    assert names(events) == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    message = events[0][1]["message"]
    assert message["id"] == "msg_lab0007"
    assert message["model"] == "claude-lab-model"
    assert message["content"] == []
    deltas = [p["delta"] for n, p in events if n == "content_block_delta"]
    assert {d["type"] for d in deltas} == {"text_delta"}
    assert "".join(d["text"] for d in deltas) == LONG
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert events[-2][1]["usage"]["output_tokens"] == len(LONG) // 4


def test_thinking_block_has_deltas_then_one_signature() -> None:
    events = sse_events(b"".join(wire_anthropic.stream_frames(Reply((Thinking(LONG),)), {}, 1)))
    start = events[2][1]
    assert start["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    deltas = [p["delta"] for n, p in events if n == "content_block_delta"]
    assert [d["type"] for d in deltas][-1] == "signature_delta"
    assert {d["type"] for d in deltas[:-1]} == {"thinking_delta"}
    assert "".join(d["thinking"] for d in deltas[:-1]) == LONG
    assert deltas[-1]["signature"]


def test_tool_use_streams_its_input_as_json_pieces() -> None:
    call = ToolCall("Read", {"file_path": "/some/rather/long/path/to/a/file.py"})
    reply = Reply((Text("Reading."), call))
    events = sse_events(b"".join(wire_anthropic.stream_frames(reply, REQUEST, 3)))
    starts = [p for n, p in events if n == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1]
    block = starts[1]["content_block"]
    assert block == {"type": "tool_use", "id": "toolu_lab003_1", "name": "Read", "input": {}}
    pieces = [
        p["delta"]["partial_json"]
        for n, p in events
        if n == "content_block_delta" and p["index"] == 1
    ]
    assert len(pieces) > 1
    assert json.loads("".join(pieces)) == call.input
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_given_call_id_is_kept() -> None:
    reply = Reply((ToolCall("Read", {}, call_id="toolu_given"),))
    body = json.loads(wire_anthropic.json_body(reply, REQUEST, 1))
    assert body["content"][0]["id"] == "toolu_given"


def test_stream_error_replaces_the_closing_events() -> None:
    reply = Reply((Text("Hello"),), stream_error="overloaded_error")
    events = sse_events(b"".join(wire_anthropic.stream_frames(reply, REQUEST, 1)))
    assert names(events)[-2:] == ["content_block_stop", "error"]
    assert events[-1][1]["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert "message_stop" not in names(events)


def test_json_body_is_a_complete_message() -> None:
    reply = Reply((Thinking("hm"), Text("hi"), ToolCall("Read", {"file_path": "x"})))
    body = json.loads(wire_anthropic.json_body(reply, REQUEST, 2))
    assert body["type"] == "message"
    assert body["stop_reason"] == "tool_use"
    assert [c["type"] for c in body["content"]] == ["thinking", "text", "tool_use"]
    assert body["content"][2]["input"] == {"file_path": "x"}
    assert body["usage"]["input_tokens"] >= 1


def test_usage_is_deterministic() -> None:
    reply = Reply((Text(LONG),))
    assert wire_anthropic.stream_frames(reply, REQUEST, 1) == wire_anthropic.stream_frames(
        reply, REQUEST, 1
    )


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (401, "authentication_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (529, "overloaded_error"),
        (502, "api_error"),
    ],
)
def test_error_bodies(status: int, error_type: str) -> None:
    body = json.loads(wire_anthropic.error_body(status, None))
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert body["error"]["message"]
    assert json.loads(wire_anthropic.error_body(status, "custom"))["error"]["message"] == "custom"


# ---------------------------------------------------------------- the server over HTTP


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeModelServer]:
    script = Script(
        [
            Reply((Text("first"),)),
            Reply(http_status=500, repeat=2),
            Reply((Text("after errors"),)),
        ]
    )
    with FakeModelServer(script, log_path=tmp_path / "log.jsonl") as s:
        yield s


def request(
    server: FakeModelServer,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def messages(server: FakeModelServer, **extra: Any) -> tuple[int, bytes]:
    return request(server, "POST", "/v1/messages", {**REQUEST, **extra})


def test_binds_loopback_on_a_free_port(server: FakeModelServer) -> None:
    assert server.port > 0
    assert server.base_url == f"http://127.0.0.1:{server.port}"


def test_head_and_get_are_harmless_and_consume_nothing(server: FakeModelServer) -> None:
    assert request(server, "HEAD", "/") == (200, b"")
    status, body = request(server, "GET", "/v1/models")
    assert status == 404
    assert json.loads(body) == {"error": "not found"}
    status, _ = request(server, "POST", "/v1/unknown", {"tools": TOOLS})
    assert status == 404
    assert server.replies_left == 3
    assert [(r.method, r.lane, r.status) for r in server.requests] == [
        ("HEAD", "none", 200),
        ("GET", "none", 404),
        ("POST", "none", 404),
    ]


def test_streamed_reply_arrives_as_sse(server: FakeModelServer) -> None:
    status, body = messages(server)
    assert status == 200
    events = sse_events(body)
    assert names(events)[0] == "message_start"
    assert names(events)[-1] == "message_stop"
    texts = [p["delta"]["text"] for n, p in events if n == "content_block_delta"]
    assert "".join(texts) == "first"


def test_http_status_repeats_then_the_script_goes_on(server: FakeModelServer) -> None:
    messages(server)
    for _ in range(2):
        status, body = messages(server)
        assert status == 500
        assert json.loads(body)["error"]["type"] == "api_error"
    status, body = messages(server, stream=False)
    assert status == 200
    assert json.loads(body)["content"] == [{"type": "text", "text": "after errors"}]
    status, body = messages(server, stream=False)
    assert json.loads(body)["content"] == [{"type": "text", "text": "done"}]
    assert [r.reply_index for r in server.requests] == [0, 1, 2, 3, 4]
    assert [r.fault for r in server.requests] == [None, "http_status=500", "http_status=500"] + [
        None
    ] * 2
    assert [r.stream for r in server.requests] == [True, True, True, False, False]


def test_request_log_redacts_auth_and_keeps_the_body(
    server: FakeModelServer, tmp_path: Path
) -> None:
    messages(server)
    request(
        server,
        "POST",
        "/v1/messages",
        {**REQUEST, "messages": [{"role": "user", "content": "hi"}]},
        headers={
            "x-api-key": "sk-secret",
            "authorization": "Bearer sk-secret",
            "anthropic-version": "2023-06-01",
        },
    )
    logged = server.requests[-1]
    assert logged.headers["x-api-key"] == "REDACTED"
    assert logged.headers["authorization"] == "REDACTED"
    assert logged.headers["anthropic-version"] == "2023-06-01"
    assert logged.body["messages"] == [{"role": "user", "content": "hi"}]
    on_disk = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [e["n"] for e in on_disk] == [1, 2]
    assert "sk-secret" not in (tmp_path / "log.jsonl").read_text()


def test_side_lane_does_not_consume_the_script(server: FakeModelServer) -> None:
    status, body = request(server, "POST", "/v1/messages", {"model": "m", "tools": []})
    assert status == 200
    assert json.loads(body)["content"] == [{"type": "text", "text": '{"title": "Lab session"}'}]
    status, body = request(server, "POST", "/v1/messages", {"model": "m", "stream": True})
    assert "Lab session" in body.decode()
    status, body = messages(server)
    assert "first" in body.decode()
    assert [(r.lane, r.reply_index) for r in server.requests] == [
        ("side", None),
        ("side", None),
        ("main", 0),
    ]
    assert server.replies_left == 2


@pytest.mark.parametrize(
    ("body", "side"),
    [
        ({"tools": TOOLS}, False),
        ({"tools": []}, True),
        ({"messages": []}, True),
        (None, True),
        ("not json", True),
    ],
)
def test_side_rule(body: Any, side: bool) -> None:
    assert is_side_request("/v1/messages", body) is side


def raw_post(port: int, body: dict[str, Any]) -> bytes:
    """Send one request on a bare socket and read until the server closes or resets."""
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"connection: close\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode()
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + payload)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received


def unchunk(body: bytes) -> tuple[bytes, bool]:
    """Decode a chunked body; the flag says whether the terminating chunk arrived."""
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out, True
        out += rest[:size]
        body = rest[size + 2 :]
    return out, False


def test_cut_sends_k_frames_then_ends_without_the_last_chunk() -> None:
    reply = Reply(
        (Text("Reading."), ToolCall("Read", {"file_path": "/x" * 30})), cut_after_events=7
    )
    with FakeModelServer(Script([reply])) as server:
        raw = raw_post(server.port, REQUEST)
        logged = server.requests[0]
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in head.lower()
    data, complete = unchunk(body)
    assert not complete
    events = sse_events(data)
    assert len(events) == 7
    assert names(events)[-2:] == ["content_block_start", "content_block_delta"]
    assert events[-2][1]["content_block"]["type"] == "tool_use"
    assert logged.fault == "cut_after_events=7"


def test_cut_on_a_non_streaming_request_answers_nothing() -> None:
    with FakeModelServer(Script([Reply((Text("x"),), cut_after_events=0)])) as server:
        raw = raw_post(server.port, {**REQUEST, "stream": False})
    assert raw == b""


def test_complete_stream_ends_with_the_terminating_chunk() -> None:
    with FakeModelServer(Script([Reply((Text("x"),))])) as server:
        raw = raw_post(server.port, REQUEST)
    _, complete = unchunk(raw.partition(b"\r\n\r\n")[2])
    assert complete


def test_stream_error_in_stream_and_as_http_500_without_stream() -> None:
    script = Script([Reply((Text("Hi"),), stream_error="overloaded_error")] * 2)
    with FakeModelServer(script) as server:
        status, body = messages(server)
        assert status == 200
        assert names(sse_events(body))[-1] == "error"
        status, body = messages(server, stream=False)
        assert status == 500
        assert json.loads(body)["error"]["message"] == "overloaded_error"
        assert [r.fault for r in server.requests] == ["stream_error=overloaded_error"] * 2


def test_missing_wire_module_is_a_404_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    from supervisor.lab import server as server_module

    monkeypatch.setitem(server_module.WIRES, "/v1/nowhere", "supervisor.lab.no_such_wire")
    with FakeModelServer(Script([Reply((Text("x"),))])) as server:
        status, _ = request(server, "POST", "/v1/nowhere", {"tools": TOOLS})
        assert status == 404
        assert server.replies_left == 1


# ---------------------------------------------------------------- scenario and recorder helpers


def test_bind_replies_replaces_placeholders_in_texts_and_nested_inputs() -> None:
    replies = (
        Reply(
            (
                Text("see <repo>/a"),
                Thinking("<home>"),
                ToolCall("Write", {"file_path": "<outside>/x", "list": ["<repo>", 3]}),
            ),
            http_status=None,
        ),
    )
    mapping = {"<repo>": "/w/repo", "<outside>": "/w/outside", "<home>": "/w/home"}
    (bound,) = bind_replies(replies, mapping)
    assert bound.blocks == (
        Text("see /w/repo/a"),
        Thinking("/w/home"),
        ToolCall("Write", {"file_path": "/w/outside/x", "list": ["/w/repo", 3]}),
    )


def test_step_file_names() -> None:
    assert step_file_names(get_scenario("claude-cli", "resume")) == [
        "resume.step1.jsonl",
        "resume.jsonl",
    ]
    assert step_file_names(get_scenario("claude-cli", "plain_text")) == ["plain_text.jsonl"]


def test_files_changed_reports_kinds(tmp_path: Path) -> None:
    import subprocess

    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "keep.txt").write_text("a\n")
    (repo / "edit.txt").write_text("a\n")
    (repo / "gone.txt").write_text("a\n")
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH": "/usr/bin:/bin",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "seed"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    (repo / "edit.txt").write_text("b\n")
    (repo / "gone.txt").unlink()
    (repo / "sub").mkdir()
    (repo / "sub" / "new file.txt").write_text("n\n")
    assert files_changed(repo) == [
        {"path": "edit.txt", "kind": "update"},
        {"path": "gone.txt", "kind": "delete"},
        {"path": "sub/new file.txt", "kind": "add"},
    ]


def test_cwd_placeholder_is_bound_from_the_request() -> None:
    from supervisor.lab.script import ToolCall
    from supervisor.lab.server import bind_cwd

    reply = Reply((ToolCall("Write", {"file_path": "<cwd>/NEW.md", "content": "x"}),))
    request = json.dumps({"system": [{"text": "Primary working directory: /tmp/wt/checkout\n"}]})
    bound = bind_cwd(reply, request)
    block = bound.blocks[0]
    assert isinstance(block, ToolCall)
    assert block.input == {"file_path": "/tmp/wt/checkout/NEW.md", "content": "x"}
    assert bind_cwd(reply, "{}") == reply  # no working directory named: left as it is


def _hold_read(port: int, payload: dict[str, Any], wait_s: float) -> tuple[bytes, bool]:
    """Post, read for ``wait_s``: (what arrived, whether the server ended the response)."""
    body = json.dumps(payload).encode()
    head = (
        f"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(head + body)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            return received, False
    return received, True


def test_hold_sends_k_frames_then_stays_open_and_silent() -> None:
    reply = Reply((Text("Thinking about it for a long while."),), hold_after_events=3)
    with FakeModelServer(Script([reply])) as server:
        raw, ended = _hold_read(server.port, REQUEST, wait_s=1.5)
        logged = server.requests[0]
    assert not ended  # still open after 1.5 s
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    data, complete = unchunk(body)
    assert not complete
    assert len(sse_events(data)) == 3
    assert logged.fault == "hold_after_events=3"


def test_a_held_connection_lets_go_when_the_client_leaves_or_the_server_closes() -> None:
    reply = Reply((Text("x"),), hold_after_events=1)
    with FakeModelServer(Script([reply, reply])) as server:
        _hold_read(server.port, REQUEST, wait_s=0.3)  # the client leaves
        started = time.monotonic()
        _hold_read(server.port, REQUEST, wait_s=0.3)
    # closing the server did not wait for the held handlers (HOLD_MAX_S is minutes)
    assert time.monotonic() - started < 5
