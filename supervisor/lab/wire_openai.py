"""The OpenAI Responses API wire (``POST /v1/responses``) of the fake model server.

Renders a wire-neutral :class:`~supervisor.lab.script.Reply` as the Responses API does:

- :func:`stream_frames`: the server-sent events of a streaming response, as complete SSE frames
  (``event: <type>`` + ``data: <json>`` + blank line), in order: ``response.created``,
  ``response.in_progress``, one output item per block, then ``response.completed`` with usage —
  or ``response.failed`` with ``error{code, message}`` when the reply sets ``stream_error`` (the
  code as given, except that Anthropic's ``overloaded_error`` / ``api_error`` /
  ``rate_limit_error`` become ``server_is_overloaded`` / ``server_error`` /
  ``rate_limit_exceeded``);
- :func:`json_body`: the same response as one non-streaming JSON object;
- :func:`error_body`: the API's error envelope for an HTTP error status.

Block to item: :class:`Text` → ``message`` with ``output_text`` deltas; :class:`Thinking` →
``reasoning`` with one ``summary_text`` part; :class:`ToolCall` ``function`` → ``function_call``
with JSON ``arguments`` deltas; :class:`ToolCall` ``custom`` → ``custom_tool_call`` with raw
``input`` deltas (freeform tools such as apply_patch).

``n`` is the request's ordinal at the server: every id (response, item, call) embeds it, so ids
are unique across a run's requests and identical between two runs of the same script. Usage
figures are a pure function of the reply and ``n`` (see :func:`usage_for`). Pure: no I/O.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from supervisor.lab.script import Reply, Text, Thinking, ToolCall

__all__ = [
    "CREATED_AT",
    "DEFAULT_MODEL",
    "PATH",
    "error_body",
    "json_body",
    "output_items",
    "stream_frames",
    "usage_for",
]

PATH = "/v1/responses"
DEFAULT_MODEL = "gpt-5.5"
CREATED_AT = 1_700_000_000
DELTA_CHARS = 16

# Anthropic error types a wire-neutral script may name → the Responses API's codes for the
# same condition; any other code is sent as given.
_STREAM_ERROR_CODES = {
    "overloaded_error": "server_is_overloaded",
    "api_error": "server_error",
    "rate_limit_error": "rate_limit_exceeded",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_ERROR_CODES = {
    401: "invalid_api_key",
    403: "forbidden",
    404: "not_found",
    429: "rate_limit_exceeded",
}


def _chunks(text: str) -> list[str]:
    """``text`` in deltas of at most :data:`DELTA_CHARS` characters (none for empty text)."""
    return [text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS)]


def _words(text: str) -> int:
    return len(text.split())


def _model(request: dict[str, Any]) -> str:
    model = request.get("model")
    return model if isinstance(model, str) and model else DEFAULT_MODEL


def _call_id(block: ToolCall, n: int, index: int) -> str:
    return block.call_id or f"call_{n}_{index}"


def _arguments(block: ToolCall) -> str:
    if isinstance(block.input, str):
        return block.input
    return json.dumps(block.input, separators=(",", ":"))


def _item(block: Text | Thinking | ToolCall, n: int, index: int) -> dict[str, Any]:
    """The finished output item for ``block`` (the ``output_item.done`` payload)."""
    match block:
        case Text(text=text):
            return {
                "id": f"msg_{n}_{index}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        case Thinking(text=text):
            return {
                "id": f"rs_{n}_{index}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": text}],
            }
        case ToolCall(kind="custom"):
            return {
                "id": f"ctc_{n}_{index}",
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": _call_id(block, n, index),
                "name": block.name,
                "input": _arguments(block),
            }
        case ToolCall():
            return {
                "id": f"fc_{n}_{index}",
                "type": "function_call",
                "status": "completed",
                "call_id": _call_id(block, n, index),
                "name": block.name,
                "arguments": _arguments(block),
            }


def output_items(reply: Reply, n: int) -> list[dict[str, Any]]:
    """The finished output items of ``reply``, in block order."""
    return [_item(block, n, i) for i, block in enumerate(reply.blocks)]


def usage_for(reply: Reply, n: int) -> dict[str, Any]:
    """Deterministic usage: input grows with the request ordinal (``1000 * n``), the cached part
    is the previous request's input, output counts words of text and tool input plus one per
    block, and reasoning counts the words of reasoning summaries."""
    input_tokens = 1000 * n
    cached = 1000 * (n - 1) if n > 1 else 0
    reasoning = sum(_words(b.text) for b in reply.blocks if isinstance(b, Thinking))
    visible = 0
    for block in reply.blocks:
        match block:
            case Text(text=text):
                visible += _words(text) + 1
            case ToolCall():
                visible += _words(_arguments(block)) + 1
            case Thinking():
                pass
    output_tokens = visible + reasoning
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def _response(
    reply: Reply,
    request: dict[str, Any],
    n: int,
    *,
    status: str,
    output: list[dict[str, Any]],
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": CREATED_AT + n,
        "status": status,
        "model": _model(request),
        "output": output,
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }
    if status == "completed":
        body["usage"] = usage_for(reply, n)
    elif status == "failed":
        code = reply.stream_error or "server_error"
        body["error"] = {
            "code": _STREAM_ERROR_CODES.get(code, code),
            "message": reply.error_message or "The model failed to produce a response.",
        }
    return body


def _frame(payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"event: {payload['type']}\ndata: {data}\n\n".encode()


class _Frames:
    """Collects events, numbering them with ``sequence_number`` as the API does."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def emit(self, kind: str, **fields: Any) -> None:
        self.frames.append(_frame({"type": kind, "sequence_number": len(self.frames), **fields}))


def _stream_item(out: _Frames, item: dict[str, Any], index: int) -> None:
    """``output_item.added`` … deltas … ``output_item.done`` for one finished item."""
    item_id = item["id"]
    where = {"item_id": item_id, "output_index": index}
    match item["type"]:
        case "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            out.emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            out.emit("response.content_part.added", **where, content_index=0, part=part)
            for delta in _chunks(text):
                out.emit("response.output_text.delta", **where, content_index=0, delta=delta)
            out.emit("response.output_text.done", **where, content_index=0, text=text)
            out.emit(
                "response.content_part.done",
                **where,
                content_index=0,
                part={**part, "text": text},
            )
        case "reasoning":
            text = item["summary"][0]["text"]
            part = {"type": "summary_text", "text": ""}
            out.emit("response.output_item.added", output_index=index, item={**item, "summary": []})
            out.emit("response.reasoning_summary_part.added", **where, summary_index=0, part=part)
            for delta in _chunks(text):
                out.emit(
                    "response.reasoning_summary_text.delta", **where, summary_index=0, delta=delta
                )
            out.emit("response.reasoning_summary_text.done", **where, summary_index=0, text=text)
            out.emit(
                "response.reasoning_summary_part.done",
                **where,
                summary_index=0,
                part={**part, "text": text},
            )
        case "function_call":
            arguments = item["arguments"]
            out.emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for delta in _chunks(arguments):
                out.emit("response.function_call_arguments.delta", **where, delta=delta)
            out.emit("response.function_call_arguments.done", **where, arguments=arguments)
        case "custom_tool_call":
            raw = item["input"]
            out.emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "input": ""},
            )
            for delta in _chunks(raw):
                out.emit("response.custom_tool_call_input.delta", **where, delta=delta)
            out.emit("response.custom_tool_call_input.done", **where, input=raw)
    out.emit("response.output_item.done", output_index=index, item=item)


def stream_frames(reply: Reply, request: dict[str, Any], n: int) -> list[bytes]:
    """The SSE frames of a streaming response to ``request`` (the ``n``-th request)."""
    out = _Frames()
    started = _response(reply, request, n, status="in_progress", output=[])
    out.emit("response.created", response=started)
    out.emit("response.in_progress", response=started)
    items = output_items(reply, n)
    for index, item in enumerate(items):
        _stream_item(out, item, index)
    if reply.stream_error is not None:
        out.emit(
            "response.failed", response=_response(reply, request, n, status="failed", output=items)
        )
    else:
        out.emit(
            "response.completed",
            response=_response(reply, request, n, status="completed", output=items),
        )
    return out.frames


def json_body(reply: Reply, request: dict[str, Any], n: int) -> bytes:
    """The non-streaming response object (``"stream": false``)."""
    status = "failed" if reply.stream_error is not None else "completed"
    body = _response(reply, request, n, status=status, output=output_items(reply, n))
    return json.dumps(body, ensure_ascii=False).encode()


def error_body(status: int, message: str | None) -> bytes:
    """The API's error envelope: ``{"error": {"message", "type", "param", "code"}}``."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    error = {
        "message": message or f"{status} {phrase}",
        "type": _ERROR_TYPES.get(status, "server_error"),
        "param": None,
        "code": _ERROR_CODES.get(status, "server_error" if status >= 500 else None),
    }
    return json.dumps({"error": error}, ensure_ascii=False).encode()
