"""The scripted fake model server: stdlib only, 127.0.0.1 only.

``FakeModelServer(script)`` is a context manager serving on ``127.0.0.1`` (port 0 = a free one).
Each model request takes the next :class:`~supervisor.lab.script.Reply` of the script and is
answered in the wire format of its path. Wire formats are modules registered in :data:`WIRES`
(path → module name, imported on first use so a missing module only fails its own path); each
implements :class:`WireModule`:

- ``stream_frames(reply: Reply, request: dict[str, Any], n: int) -> list[bytes]``: the complete
  SSE frames of a streamed reply in order (including the in-stream error event when
  ``reply.stream_error`` is set); ``n`` is the request's ordinal (for unique ids).
- ``json_body(reply: Reply, request: dict[str, Any], n: int) -> bytes``: the non-streaming answer
  (when the request has no ``"stream": true``).
- ``error_body(status: int, message: str | None) -> bytes``: that API's JSON error shape for an
  HTTP error.

Faults are applied here, the same for every wire:

- ``http_status``: answer that status with ``error_body`` (``repeat``: the first N requests);
- ``cut_after_events``: send that many frames, pause briefly, then end the connection without
  the terminating chunk (FIN, then a reset); on a non-streaming request, no answer at all;
- ``stream_error``: rendered by the wire inside the stream; on a non-streaming request it
  becomes an HTTP 500 with ``error_body``;
- ``hold_after_events``: send that many frames, then hold the connection open and silent until
  the client closes it or the server closes (at most :data:`HOLD_MAX_S`); on a non-streaming
  request, hold before any answer.

**Side lane.** Some requests are not part of the conversation the scenario scripts, and must not
consume its replies. The rule, derived from what Claude Code 2.1.197 sends (docs/lab.md): a
``POST`` whose JSON body has no non-empty ``tools`` array is a side request and gets
``side_reply``. Claude's session-title request (sent unless non-essential traffic is off, racing
the first real request) carries ``"tools": []``; every request of an agent's conversation carries
its tool definitions (the lab always runs agents with tools). ``HEAD`` on any path answers 200
with no body (claude sends ``HEAD /`` first); ``GET`` and unknown ``POST`` paths answer 404 with
a small JSON error. Every request is logged in
:attr:`FakeModelServer.requests` (auth header values redacted) and, with ``log_path``, appended
to that file as JSON lines.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import re
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, cast

from supervisor.lab.scenarios import get_scenario
from supervisor.lab.script import Reply, Script, Text, ToolCall

__all__ = [
    "CUT_DRAIN_S",
    "CUT_PAUSE_S",
    "SIDE_REPLY",
    "WIRES",
    "FakeModelServer",
    "LoggedRequest",
    "WireModule",
    "is_side_request",
    "main",
]


class WireModule(Protocol):
    """One API's wire format (see the module docstring)."""

    def stream_frames(self, reply: Reply, request: dict[str, Any], n: int) -> list[bytes]: ...

    def json_body(self, reply: Reply, request: dict[str, Any], n: int) -> bytes: ...

    def error_body(self, status: int, message: str | None) -> bytes: ...


WIRES: dict[str, str] = {
    "/v1/messages": "supervisor.lab.wire_anthropic",
    "/v1/responses": "supervisor.lab.wire_openai",
    "/v1beta/models/{model}": "supervisor.lab.wire_gemini",
    "/v1/chat/completions": "supervisor.lab.wire_chat",
}

# JSON text, because the one side request observed (claude's session title) asks for
# {"title": …} through a JSON-schema output format.
SIDE_REPLY = Reply((Text('{"title": "Lab session"}'),))

# Before a cut, how long the frames already sent get to be read and handled: without a pause,
# frames and the end of the connection can arrive together and a client (Bun's fetch in claude)
# may drop the frames it had not handed on yet, so what the CLI shows would depend on timing.
CUT_PAUSE_S = 0.3
# After a cut, how long to wait for the client to close its end before resetting.
CUT_DRAIN_S = 2.0
# The longest a held connection (hold_after_events) stays open.
HOLD_MAX_S = 300.0

Lane = Literal["main", "side", "none"]

# Header names worth keeping in the log; the values of the auth ones are redacted.
_LOGGED_HEADERS = (
    "user-agent",
    "content-type",
    "accept",
    "anthropic-version",
    "anthropic-beta",
    "x-app",
    "x-stainless-retry-count",
    "x-stainless-timeout",
    "openai-beta",
    "originator",
    "session_id",
    "x-api-key",
    "authorization",
)
_REDACTED_HEADERS = frozenset({"x-api-key", "authorization"})


@dataclass(slots=True)
class LoggedRequest:
    """One request as the server saw it. ``reply_index`` counts main-lane replies (0-based)."""

    n: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    lane: Lane
    reply_index: int | None = None
    status: int = 200
    fault: str | None = None
    stream: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_CWD = re.compile(r"working directory: (/[^\s\\\"'<>]+)", re.I)


def bind_cwd(reply: Reply, request_text: str) -> Reply:
    """Replace ``<cwd>`` in the reply's tool inputs with the working directory the request's
    system prompt names (claude says "Primary working directory: /…"): the lab's way to make a
    tool call with an absolute path into a worktree whose path it cannot know in advance."""
    if not any(isinstance(b, ToolCall) and "<cwd>" in json.dumps(b.input) for b in reply.blocks):
        return reply
    found = _CWD.search(request_text)
    if found is None:
        return reply
    from supervisor.lab.scenarios import bind_replies

    return bind_replies((reply,), {"<cwd>": found.group(1)})[0]


def is_side_request(path: str, body: Any) -> bool:
    """The side-lane rule (see the module docstring): no non-empty ``tools`` array."""
    if not isinstance(body, dict):
        return True
    tools = body.get("tools")
    return not (isinstance(tools, list) and tools)


# Gemini names the model and the method in the path: /v1beta/models/<model>:<method>.
_GEMINI_PATH = re.compile(r"^/v1beta/models/[^/:]+:(?:stream)?[gG]enerateContent$")


def _wire_key(path: str) -> str:
    return "/v1beta/models/{model}" if _GEMINI_PATH.match(path) else path


def _load_wire(path: str) -> WireModule | None:
    module_name = WIRES.get(_wire_key(path))
    if module_name is None:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return cast(WireModule, module)


@dataclass(slots=True)
class _State:
    script: Script
    side_reply: Reply
    side_rule: Callable[[str, Any], bool]
    log_path: Path | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[LoggedRequest] = field(default_factory=list)
    main_count: int = 0
    closing: threading.Event = field(default_factory=threading.Event)

    def record(self, entry: LoggedRequest) -> None:
        with self.lock:
            self.requests.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry.to_dict(), ensure_ascii=False) + "\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeModelServer/1"
    state: _State  # set on a subclass per server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _headers_for_log(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in _LOGGED_HEADERS:
            value = self.headers.get(name)
            if value is not None:
                out[name] = "REDACTED" if name in _REDACTED_HEADERS else value
        return out

    def _entry(self, body: Any, lane: Lane) -> LoggedRequest:
        with self.state.lock:
            n = len(self.state.requests) + 1
        path = self.path.split("?", 1)[0]
        return LoggedRequest(n, self.command, path, self._headers_for_log(), body, lane)

    def _send_simple(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        entry = self._entry(None, "none")
        self.state.record(entry)
        self._send_simple(200, b"", "text/plain")

    def do_GET(self) -> None:
        entry = self._entry(None, "none")
        entry.status = 404
        self.state.record(entry)
        self._send_simple(404, b'{"error":"not found"}', "application/json")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        wire = _load_wire(path)
        if wire is None:
            entry = self._entry(body, "none")
            entry.status = 404
            self.state.record(entry)
            self._send_simple(404, b'{"error":"no wire for this path"}', "application/json")
            return
        request = body if isinstance(body, dict) else {}
        side = self.state.side_rule(path, body)
        entry = self._entry(body, "side" if side else "main")
        entry.stream = request.get("stream") is True or path.endswith(":streamGenerateContent")
        if side:
            reply = self.state.side_reply
        else:
            with self.state.lock:
                reply = self.state.script.next_reply()
                entry.reply_index = self.state.main_count
                self.state.main_count += 1
            reply = bind_cwd(reply, raw.decode("utf-8", "replace"))
        self._answer(wire, reply, request, entry)

    def _answer(
        self, wire: WireModule, reply: Reply, request: dict[str, Any], entry: LoggedRequest
    ) -> None:
        if reply.http_status is not None:
            entry.status = reply.http_status
            entry.fault = f"http_status={reply.http_status}"
            self.state.record(entry)
            body = wire.error_body(reply.http_status, reply.error_message)
            self._send_simple(reply.http_status, body, "application/json")
            return
        if not entry.stream:
            self._answer_json(wire, reply, request, entry)
            return
        frames = wire.stream_frames(reply, request, entry.n)
        cut = reply.cut_after_events
        hold = reply.hold_after_events
        if cut is not None:
            entry.fault = f"cut_after_events={cut}"
        elif hold is not None:
            entry.fault = f"hold_after_events={hold}"
        elif reply.stream_error is not None:
            entry.fault = f"stream_error={reply.stream_error}"
        self.state.record(entry)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for i, frame in enumerate(frames):
            if cut is not None and i >= cut:
                self._reset_connection()
                return
            if hold is not None and i >= hold:
                self._hold()
                return
            self._write_chunk(frame)
        if cut is not None:
            self._reset_connection()
            return
        self._write_chunk(b"")

    def _answer_json(
        self, wire: WireModule, reply: Reply, request: dict[str, Any], entry: LoggedRequest
    ) -> None:
        if reply.cut_after_events is not None:
            entry.fault = f"cut_after_events={reply.cut_after_events}"
            self.state.record(entry)
            self._reset_connection()
            return
        if reply.hold_after_events is not None:
            entry.fault = f"hold_after_events={reply.hold_after_events}"
            self.state.record(entry)
            self._hold()
            return
        if reply.stream_error is not None:
            entry.status = 500
            entry.fault = f"stream_error={reply.stream_error}"
            self.state.record(entry)
            body = wire.error_body(500, reply.error_message or reply.stream_error)
            self._send_simple(500, body, "application/json")
            return
        self.state.record(entry)
        self._send_simple(200, wire.json_body(reply, request, entry.n), "application/json")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _hold(self) -> None:
        """Keep the connection open and silent until the client closes it (a read sees EOF or
        an error), the server closes, or :data:`HOLD_MAX_S` passes; then drop it."""
        self.wfile.flush()
        sock = self.connection
        self.close_connection = True
        deadline = time.monotonic() + HOLD_MAX_S
        while time.monotonic() < deadline and not self.state.closing.is_set():
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                try:
                    if not sock.recv(65536):
                        break
                except OSError:
                    break
        with contextlib.suppress(OSError):
            sock.close()

    def _reset_connection(self) -> None:
        """End the response abruptly: no terminating chunk. After a pause (:data:`CUT_PAUSE_S`)
        the write side is shut (FIN), then the socket is reset (linger 0 → RST); resetting at
        once would make the client's kernel drop frames it had not read yet."""
        self.wfile.flush()
        time.sleep(CUT_PAUSE_S)
        sock = self.connection
        self.close_connection = True
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(CUT_DRAIN_S)
            while sock.recv(65536):
                pass
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


class FakeModelServer:
    """Serve ``script`` on 127.0.0.1 while the context is open."""

    def __init__(
        self,
        script: Script,
        *,
        log_path: Path | None = None,
        side_reply: Reply = SIDE_REPLY,
        side_rule: Callable[[str, Any], bool] = is_side_request,
        port: int = 0,
    ) -> None:
        self._state = _State(script, side_reply, side_rule, log_path)
        handler = type("Handler", (_Handler,), {"state": self._state})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[LoggedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def replies_left(self) -> int:
        with self._state.lock:
            return len(self._state.script.replies)

    def start(self) -> FakeModelServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="fake-model-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        self._state.closing.set()  # held connections let go
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m supervisor.lab.server --agent claude-cli --scenario read_file``: serve the
    script of one scenario step on 127.0.0.1 until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m supervisor.lab.server")
    parser.add_argument("--agent", default="claude-cli")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--step", type=int, default=1, help="1-based step of the scenario")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--repo", default=".", help="what <repo> in tool inputs stands for")
    parser.add_argument("--log", type=Path, default=None, help="append requests here (JSONL)")
    args = parser.parse_args(argv)
    scenario = get_scenario(args.agent, args.scenario)
    step = scenario.steps[args.step - 1]
    repo = str(Path(args.repo).resolve())
    script = step.script({"<repo>": repo, "<outside>": str(Path(repo).parent / "outside")})
    with FakeModelServer(script, log_path=args.log, port=args.port) as server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
