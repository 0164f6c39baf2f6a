"""The Gemini API wire of the fake model server renders replies as the API does, and the server
routes ``/v1beta/models/{model}:(stream)generateContent`` to it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from supervisor.lab import wire_gemini
from supervisor.lab.script import Reply, Script, Text, Thinking, ToolCall
from supervisor.lab.server import FakeModelServer

TOOLS = [{"functionDeclarations": [{"name": "read_file", "parameters": {"type": "object"}}]}]
REQUEST: dict[str, Any] = {
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "tools": TOOLS,
    "model": "gemini-2.5-pro",
}
LONG = "A reply long enough to be split into several frames."


def parse(frames: list[bytes]) -> list[dict[str, Any]]:
    """Each frame is one ``data:`` line of JSON and a blank line (no ``event:`` line)."""
    out = []
    for frame in frames:
        text = frame.decode()
        assert text.startswith("data: ")
        assert text.endswith("\r\n\r\n")
        assert text.count("\n") == 2
        out.append(json.loads(text.removeprefix("data: ")))
    return out


def parts(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]


def test_text_is_split_and_the_last_frame_finishes() -> None:
    chunks = parse(wire_gemini.stream_frames(Reply((Text(LONG),)), REQUEST, 3))
    assert len(chunks) == -(-len(LONG) // wire_gemini.DELTA_CHARS)
    assert "".join(p["text"] for p in parts(chunks)) == LONG
    for c in chunks:
        assert c["candidates"][0]["content"]["role"] == "model"
        assert c["modelVersion"] == "gemini-2.5-pro"
        assert c["responseId"] == "lab-resp-0003"
    assert [c["candidates"][0].get("finishReason") for c in chunks][-1] == "STOP"
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    usage = chunks[-1]["usageMetadata"]
    assert usage["candidatesTokenCount"] == len(LONG) // 4
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    assert all("usageMetadata" not in c for c in chunks[:-1])


def test_thought_is_one_part_and_counted_apart() -> None:
    reply = Reply((Thinking("**Plan**\n\nThink about it for a while, at length."), Text("ok")))
    chunks = parse(wire_gemini.stream_frames(reply, REQUEST, 1))
    ps = parts(chunks)
    assert ps[0] == {"text": "**Plan**\n\nThink about it for a while, at length.", "thought": True}
    assert ps[1:] == [{"text": "ok"}]
    usage = chunks[-1]["usageMetadata"]
    assert (
        usage["thoughtsTokenCount"]
        == len("**Plan**\n\nThink about it for a while, at length.") // 4
    )
    assert usage["totalTokenCount"] == (
        usage["promptTokenCount"] + usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
    )


def test_function_calls_are_whole_parts() -> None:
    reply = Reply(
        (
            Text("Let me look."),
            ToolCall("read_file", {"file_path": "/r/src/app.py"}),
            ToolCall("apply", "raw body", kind="custom", call_id="c-1"),
        )
    )
    chunks = parse(wire_gemini.stream_frames(reply, REQUEST, 2))
    calls = [p["functionCall"] for p in parts(chunks) if "functionCall" in p]
    assert calls == [
        {"name": "read_file", "args": {"file_path": "/r/src/app.py"}},
        {"name": "apply", "args": {"input": "raw body"}, "id": "c-1"},
    ]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert "functionCall" in chunks[-1]["candidates"][0]["content"]["parts"][0]


def test_empty_reply_is_one_finishing_frame() -> None:
    chunks = parse(wire_gemini.stream_frames(Reply(), REQUEST, 1))
    assert len(chunks) == 1
    assert parts(chunks) == [{"text": ""}]
    assert chunks[0]["candidates"][0]["finishReason"] == "STOP"


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("overloaded_error", 503, "UNAVAILABLE"),
        ("api_error", 500, "INTERNAL"),
        ("429", 429, "RESOURCE_EXHAUSTED"),
    ],
)
def test_stream_error_replaces_the_finish(name: str, code: int, status: str) -> None:
    chunks = parse(wire_gemini.stream_frames(Reply((Text("part"),), stream_error=name), REQUEST, 1))
    assert parts(chunks[:-1]) == [{"text": "part"}]
    assert "finishReason" not in chunks[0]["candidates"][0]
    error = chunks[-1]["error"]
    assert (error["code"], error["status"]) == (code, status)
    assert error["message"]


def test_json_body_has_all_parts_unsplit() -> None:
    reply = Reply((Thinking("t"), Text(LONG), ToolCall("ls", {"dir_path": "."})))
    body = json.loads(wire_gemini.json_body(reply, {"contents": []}, 5))
    cand = body["candidates"][0]
    assert cand["content"]["parts"] == [
        {"text": "t", "thought": True},
        {"text": LONG},
        {"functionCall": {"name": "ls", "args": {"dir_path": "."}}},
    ]
    assert cand["finishReason"] == "STOP"
    assert body["modelVersion"] == wire_gemini.DEFAULT_MODEL
    assert body["usageMetadata"]["promptTokenCount"] >= 1


@pytest.mark.parametrize(
    ("status", "name"),
    [(400, "INVALID_ARGUMENT"), (429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (599, "INTERNAL")],
)
def test_error_body_is_googles_envelope(status: int, name: str) -> None:
    body = json.loads(wire_gemini.error_body(status, None))
    assert set(body) == {"error"}
    assert body["error"]["code"] == status
    assert body["error"]["status"] == name
    assert body["error"]["message"]
    assert json.loads(wire_gemini.error_body(500, "boom"))["error"]["message"] == "boom"


def test_is_stream_path() -> None:
    assert wire_gemini.is_stream_path("/v1beta/models/m:streamGenerateContent?alt=sse")
    assert not wire_gemini.is_stream_path("/v1beta/models/m:generateContent")


def _post(url: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get("content-type", ""), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("content-type", ""), err.read()


def test_server_routes_gemini_paths() -> None:
    script = Script([Reply((Text("streamed"),)), Reply(http_status=503)])
    with FakeModelServer(script) as server:
        base = f"{server.base_url}/v1beta/models/gemini-2.5-pro"
        status, ctype, raw = _post(f"{base}:streamGenerateContent?alt=sse", REQUEST)
        assert (status, ctype.split(";")[0]) == (200, "text/event-stream")
        frames = [f"data: {line}\r\n\r\n".encode() for line in _data_lines(raw)]
        assert "".join(p["text"] for p in parts(parse(frames))) == "streamed"
        status, _, raw = _post(f"{base}:generateContent", {"contents": []})  # side: no tools
        assert status == 200
        assert json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"]
        status, _, raw = _post(f"{base}:streamGenerateContent?alt=sse", REQUEST)
        assert status == 503
        assert json.loads(raw)["error"]["status"] == "UNAVAILABLE"
        status, _, _ = _post(f"{base}:countTokens", REQUEST)
        assert status == 404
        logged = server.requests
    assert [(r.path, r.lane, r.stream, r.status) for r in logged] == [
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", "main", True, 200),
        ("/v1beta/models/gemini-2.5-pro:generateContent", "side", False, 200),
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", "main", True, 503),
        ("/v1beta/models/gemini-2.5-pro:countTokens", "none", False, 404),
    ]


def _data_lines(raw: bytes) -> list[str]:
    return [
        line.removeprefix("data: ")
        for line in raw.decode().split("\r\n")
        if line.startswith("data: ")
    ]
