"""Anthropic Messages API wire format for the fake model server (``POST /v1/messages``).

A streamed reply is the event sequence the real API sends: ``message_start``, one ``ping``, then
per block ``content_block_start`` / ``content_block_delta``… / ``content_block_stop`` (text:
``text_delta``; thinking: ``thinking_delta`` then one ``signature_delta``; tool_use:
``input_json_delta`` pieces of the JSON input), then ``message_delta`` (stop_reason, usage) and
``message_stop``. With ``reply.stream_error`` the blocks are followed by an ``error`` event
instead of the closing pair. Texts and tool inputs are split into deltas of at most
:data:`DELTA_CHARS` characters.

Usage figures are deterministic: input tokens are the request's compact JSON length / 4, output
tokens the reply's text length / 4 (at least 1 each), no cache figures but zeros.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from supervisor.lab.script import Reply, Text, Thinking, ToolCall

__all__ = ["DELTA_CHARS", "error_body", "json_body", "stream_frames"]

DELTA_CHARS = 24

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

_ERROR_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "Not found",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Rate limited",
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _pieces(text: str) -> list[str]:
    return [text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS)] or [""]


def _signature(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _tool_input(call: ToolCall) -> dict[str, Any]:
    return call.input if isinstance(call.input, dict) else {"input": call.input}


def _tool_id(call: ToolCall, n: int, index: int) -> str:
    return call.call_id or f"toolu_lab{n:03d}_{index}"


def _usage(reply: Reply, request: dict[str, Any]) -> tuple[int, int]:
    size = len(json.dumps(request, separators=(",", ":"), sort_keys=True))
    out = 0
    for block in reply.blocks:
        match block:
            case Text(text=text) | Thinking(text=text):
                out += len(text)
            case ToolCall():
                out += len(json.dumps(_tool_input(block)))
    return max(1, size // 4), max(1, out // 4)


def _usage_dict(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if any(isinstance(b, ToolCall) for b in reply.blocks) else "end_turn"


def _message_id(n: int) -> str:
    return f"msg_lab{n:04d}"


def _model(request: dict[str, Any]) -> str:
    model = request.get("model")
    return model if isinstance(model, str) else "claude-lab"


def _block_frames(index: int, block: Text | Thinking | ToolCall, n: int) -> list[bytes]:
    start: dict[str, Any]
    deltas: list[dict[str, Any]]
    match block:
        case Text(text=text):
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(text)]
        case Thinking(text=text):
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(text)]
            deltas.append({"type": "signature_delta", "signature": _signature(text)})
        case ToolCall(name=name):
            start = {"type": "tool_use", "id": _tool_id(block, n, index), "name": name, "input": {}}
            raw = json.dumps(_tool_input(block), separators=(",", ":"))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw)]
    frames = [
        _frame(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    frames += [
        _frame("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    frames.append(_frame("content_block_stop", {"type": "content_block_stop", "index": index}))
    return frames


def stream_frames(reply: Reply, request: dict[str, Any], n: int) -> list[bytes]:
    """The SSE frames of a streamed reply, one event each."""
    input_tokens, output_tokens = _usage(reply, request)
    message: dict[str, Any] = {
        "id": _message_id(n),
        "type": "message",
        "role": "assistant",
        "model": _model(request),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage_dict(input_tokens, 1),
    }
    frames = [
        _frame("message_start", {"type": "message_start", "message": message}),
        _frame("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(reply.blocks):
        frames += _block_frames(index, block, n)
    if reply.stream_error is not None:
        frames.append(_frame("error", _error(reply.stream_error, reply.error_message)))
        return frames
    frames.append(
        _frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    frames.append(_frame("message_stop", {"type": "message_stop"}))
    return frames


def _content(block: Text | Thinking | ToolCall, n: int, index: int) -> dict[str, Any]:
    match block:
        case Text(text=text):
            return {"type": "text", "text": text}
        case Thinking(text=text):
            return {"type": "thinking", "thinking": text, "signature": _signature(text)}
        case ToolCall(name=name):
            return {
                "type": "tool_use",
                "id": _tool_id(block, n, index),
                "name": name,
                "input": _tool_input(block),
            }


def json_body(reply: Reply, request: dict[str, Any], n: int) -> bytes:
    """A complete non-streaming Messages response."""
    input_tokens, output_tokens = _usage(reply, request)
    message = {
        "id": _message_id(n),
        "type": "message",
        "role": "assistant",
        "model": _model(request),
        "content": [_content(b, n, i) for i, b in enumerate(reply.blocks)],
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage_dict(input_tokens, output_tokens),
    }
    return json.dumps(message).encode()


def _error(error_type: str, message: str | None) -> dict[str, Any]:
    text = message or _ERROR_MESSAGES.get(error_type, error_type)
    return {"type": "error", "error": {"type": error_type, "message": text}}


def error_body(status: int, message: str | None) -> bytes:
    """The API's error JSON for an HTTP status."""
    error_type = _ERROR_TYPES.get(status, "api_error")
    return json.dumps(_error(error_type, message)).encode()
