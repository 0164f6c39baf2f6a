"""Gemini API wire format for the fake model server (``POST /v1beta/models/{model}:…``).

``:streamGenerateContent?alt=sse`` is answered with server-sent events, one
``GenerateContentResponse`` per ``data:`` frame (no ``event:`` line), as the real API does:
``{"candidates": [{"content": {"role": "model", "parts": […]}, "index": 0}], "modelVersion",
"responseId"}``. Block to part: :class:`Text` → ``{"text"}`` (split into frames of at most
:data:`DELTA_CHARS` characters); :class:`Thinking` → ``{"text", "thought": true}`` in one
frame (the API sends whole thought summaries; the CLI reads a ``**subject**`` header from each
thought part, so split pieces would each look like a new thought); :class:`ToolCall` →
``{"functionCall": {"name", "args"}}`` in one frame (the API never splits a call; a
``custom`` call's raw input becomes ``args = {"input": …}``; ``id`` only when the script names
one). The last frame carries ``finishReason: "STOP"`` (also after function
calls, as the API does) and ``usageMetadata`` (``promptTokenCount``, ``candidatesTokenCount``,
``thoughtsTokenCount``, ``totalTokenCount``). With ``reply.stream_error`` the blocks are followed
by one ``data: {"error": {"code", "message", "status"}}`` frame instead of the finish.

``:generateContent`` (non-streaming; gemini 0.61.0 with model "auto" sends its router's
classifier call there) gets
the same response as one JSON object with all parts. :func:`error_body` is Google's error
envelope ``{"error": {"code", "message", "status"}}``.

Usage figures are deterministic: prompt tokens are the request's compact JSON length / 4,
candidates / thoughts the reply's text (or call JSON) length / 4 (at least 1 for prompt and
candidates). Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from supervisor.lab.script import Reply, Text, Thinking, ToolCall

__all__ = [
    "DEFAULT_MODEL",
    "DELTA_CHARS",
    "PATH_PREFIX",
    "error_body",
    "is_stream_path",
    "json_body",
    "stream_frames",
    "usage_for",
]

PATH_PREFIX = "/v1beta/models/"
DEFAULT_MODEL = "gemini-lab"
DELTA_CHARS = 24

# HTTP status → the google.rpc status name the API puts in its error envelope.
_STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_STATUS_MESSAGES: dict[int, str] = {
    400: "Request contains an invalid argument.",
    401: "API key not valid. Please pass a valid API key.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    429: "Resource has been exhausted (e.g. check quota).",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}
# Wire-neutral (Anthropic-named) stream error types → the HTTP code the API would use.
_STREAM_ERROR_CODES: dict[str, int] = {
    "overloaded_error": 503,
    "api_error": 500,
    "rate_limit_error": 429,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
}


def is_stream_path(path: str) -> bool:
    """``True`` for ``…:streamGenerateContent`` (the query, e.g. ``?alt=sse``, ignored)."""
    return path.split("?", 1)[0].endswith(":streamGenerateContent")


def _frame(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\r\n\r\n".encode()


def _pieces(text: str) -> list[str]:
    return [text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS)] or [""]


def _args(call: ToolCall) -> dict[str, Any]:
    return call.input if isinstance(call.input, dict) else {"input": call.input}


def _call_part(call: ToolCall) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": call.name, "args": _args(call)}
    if call.call_id:
        fc["id"] = call.call_id
    return {"functionCall": fc}


def usage_for(reply: Reply, request: dict[str, Any]) -> dict[str, int]:
    """The ``usageMetadata`` of a reply to ``request`` (see the module docstring)."""
    size = len(json.dumps(request, separators=(",", ":"), sort_keys=True))
    out = thoughts = 0
    for block in reply.blocks:
        match block:
            case Text(text=text):
                out += len(text)
            case Thinking(text=text):
                thoughts += len(text)
            case ToolCall():
                out += len(json.dumps(_args(block)))
    prompt, candidates, thought_tokens = max(1, size // 4), max(1, out // 4), thoughts // 4
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thought_tokens,
    }
    if thought_tokens:
        usage["thoughtsTokenCount"] = thought_tokens
    return usage


def _model(request: dict[str, Any]) -> str:
    model = request.get("model")
    if isinstance(model, str) and model:
        return model.removeprefix("models/")
    return DEFAULT_MODEL


def _response(parts: list[dict[str, Any]], request: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
        "modelVersion": _model(request),
        "responseId": f"lab-resp-{n:04d}",
    }


def _parts(reply: Reply, *, split: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in reply.blocks:
        match block:
            case Text(text=text):
                parts += [{"text": p} for p in (_pieces(text) if split else [text])]
            case Thinking(text=text):
                parts.append({"text": text, "thought": True})
            case ToolCall():
                parts.append(_call_part(block))
    return parts


def stream_frames(reply: Reply, request: dict[str, Any], n: int) -> list[bytes]:
    """The SSE frames of a ``streamGenerateContent`` reply, one response chunk each."""
    chunks = [_response([part], request, n) for part in _parts(reply, split=True)]
    if reply.stream_error is not None:
        frames = [_frame(c) for c in chunks]
        frames.append(_frame(_error(_stream_error_code(reply.stream_error), reply.error_message)))
        return frames
    if not chunks:
        chunks = [_response([{"text": ""}], request, n)]
    last = chunks[-1]
    last["candidates"][0]["finishReason"] = "STOP"
    last["usageMetadata"] = usage_for(reply, request)
    return [_frame(c) for c in chunks]


def json_body(reply: Reply, request: dict[str, Any], n: int) -> bytes:
    """A complete ``generateContent`` response."""
    parts = _parts(reply, split=False) or [{"text": ""}]
    body = _response(parts, request, n)
    body["candidates"][0]["finishReason"] = "STOP"
    body["usageMetadata"] = usage_for(reply, request)
    return json.dumps(body, ensure_ascii=False).encode()


def _stream_error_code(name: str) -> int:
    if name.isdigit():
        return int(name)
    return _STREAM_ERROR_CODES.get(name, 500)


def _error(code: int, message: str | None) -> dict[str, Any]:
    status = _STATUS_NAMES.get(code, "INTERNAL" if code >= 500 else "UNKNOWN")
    text = message or _STATUS_MESSAGES.get(code, status.replace("_", " ").capitalize())
    return {"error": {"code": code, "message": text, "status": status}}


def error_body(status: int, message: str | None) -> bytes:
    """The API's error JSON for an HTTP status."""
    return json.dumps(_error(status, message)).encode()
