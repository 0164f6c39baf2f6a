"""The OpenAI Chat Completions wire (``POST /v1/chat/completions``) of the fake model server.

Renders a wire-neutral :class:`~supervisor.lab.script.Reply` as the Chat Completions API does
(what ``@ai-sdk/openai-compatible`` — opencode's provider for a custom ``baseURL`` — parses):

- :func:`stream_frames`: ``data: <chunk>`` frames of ``chat.completion.chunk`` objects, one
  choice (``index`` 0): a first chunk with ``delta.role = "assistant"``, then per block its
  deltas, then a chunk with an empty delta and ``finish_reason`` (``tool_calls`` when the reply
  calls a tool, else ``stop``); when the request asks ``stream_options.include_usage``, one more
  chunk with ``choices: []`` and ``usage``; finally ``data: [DONE]``. With ``stream_error`` the
  blocks are followed by ``data: {"error": {…}}`` (what OpenAI-compatible servers send in-stream)
  and no finish chunk, no usage, no ``[DONE]``.
- :func:`json_body`: the same reply as one non-streaming ``chat.completion`` object.
- :func:`error_body`: the API's error envelope for an HTTP error status (the same shape as the
  Responses API's, :func:`supervisor.lab.wire_openai.error_body`).

Block to delta: :class:`Text` → ``content`` deltas; :class:`Thinking` → ``reasoning_content``
deltas (the DeepSeek / vLLM convention the AI SDK reads as reasoning); :class:`ToolCall` →
``tool_calls`` entries: the first carries ``index``, ``id``, ``type: "function"`` and
``function.name`` with empty ``arguments``, the next ones ``function.arguments`` pieces. A
``custom`` tool call is sent as a function call whose arguments are the raw input (Chat
Completions has no freeform tools in the subset the AI SDK parses).

``n`` is the request's ordinal at the server: the completion id and call ids embed it, so ids
are unique across a run's requests and identical between two runs of the same script. Usage is
:func:`supervisor.lab.wire_openai.usage_for` in Chat Completions names. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from supervisor.lab import wire_openai
from supervisor.lab.script import Reply, Text, Thinking, ToolCall

__all__ = [
    "CREATED_AT",
    "DEFAULT_MODEL",
    "DONE",
    "PATH",
    "chat_usage",
    "error_body",
    "json_body",
    "stream_frames",
]

PATH = "/v1/chat/completions"
DEFAULT_MODEL = "gpt-4o"
CREATED_AT = wire_openai.CREATED_AT
DELTA_CHARS = wire_openai.DELTA_CHARS
DONE = b"data: [DONE]\n\n"

_STREAM_ERROR_TYPES = {
    "overloaded_error": "server_is_overloaded",
    "api_error": "server_error",
    "rate_limit_error": "rate_limit_exceeded",
}


def _chunks(text: str) -> list[str]:
    return [text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS)]


def _model(request: dict[str, Any]) -> str:
    model = request.get("model")
    return model if isinstance(model, str) and model else DEFAULT_MODEL


def _arguments(block: ToolCall) -> str:
    if isinstance(block.input, str):
        return block.input
    return json.dumps(block.input, separators=(",", ":"))


def _call_id(block: ToolCall, n: int, index: int) -> str:
    return block.call_id or f"call_{n}_{index}"


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if any(isinstance(b, ToolCall) for b in reply.blocks) else "stop"


def chat_usage(reply: Reply, n: int) -> dict[str, Any]:
    """:func:`wire_openai.usage_for` as Chat Completions names it (``prompt_tokens``, …)."""
    u = wire_openai.usage_for(reply, n)
    return {
        "prompt_tokens": u["input_tokens"],
        "completion_tokens": u["output_tokens"],
        "total_tokens": u["total_tokens"],
        "prompt_tokens_details": {"cached_tokens": u["input_tokens_details"]["cached_tokens"]},
        "completion_tokens_details": {
            "reasoning_tokens": u["output_tokens_details"]["reasoning_tokens"]
        },
    }


def _include_usage(request: dict[str, Any]) -> bool:
    options = request.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _frame(payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def stream_frames(reply: Reply, request: dict[str, Any], n: int) -> list[bytes]:
    """The SSE frames of a streaming completion for ``request`` (the ``n``-th request)."""
    base = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": CREATED_AT + n,
        "model": _model(request),
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _frame({**base, "choices": [choice]})

    frames = [chunk({"role": "assistant", "content": ""})]
    tool_index = 0
    for i, block in enumerate(reply.blocks):
        match block:
            case Text(text=text):
                frames += [chunk({"content": piece}) for piece in _chunks(text)]
            case Thinking(text=text):
                frames += [chunk({"reasoning_content": piece}) for piece in _chunks(text)]
            case ToolCall():
                opening = {
                    "index": tool_index,
                    "id": _call_id(block, n, i),
                    "type": "function",
                    "function": {"name": block.name, "arguments": ""},
                }
                frames.append(chunk({"tool_calls": [opening]}))
                for piece in _chunks(_arguments(block)):
                    more = {"index": tool_index, "function": {"arguments": piece}}
                    frames.append(chunk({"tool_calls": [more]}))
                tool_index += 1
    if reply.stream_error is not None:
        code = reply.stream_error
        error = {
            "message": reply.error_message or "The model failed to produce a response.",
            "type": _STREAM_ERROR_TYPES.get(code, code),
            "param": None,
            "code": _STREAM_ERROR_TYPES.get(code, code),
        }
        frames.append(_frame({"error": error}))
        return frames
    frames.append(chunk({}, _finish_reason(reply)))
    if _include_usage(request):
        frames.append(_frame({**base, "choices": [], "usage": chat_usage(reply, n)}))
    frames.append(DONE)
    return frames


def json_body(reply: Reply, request: dict[str, Any], n: int) -> bytes:
    """The non-streaming ``chat.completion`` object (``"stream"`` absent or false)."""
    texts = [b.text for b in reply.blocks if isinstance(b, Text)]
    reasoning = [b.text for b in reply.blocks if isinstance(b, Thinking)]
    calls = [
        {
            "id": _call_id(b, n, i),
            "type": "function",
            "function": {"name": b.name, "arguments": _arguments(b)},
        }
        for i, b in enumerate(reply.blocks)
        if isinstance(b, ToolCall)
    ]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": None,
    }
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    body = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": CREATED_AT + n,
        "model": _model(request),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(reply),
            }
        ],
        "usage": chat_usage(reply, n),
        "system_fingerprint": None,
    }
    return json.dumps(body, ensure_ascii=False).encode()


def error_body(status: int, message: str | None) -> bytes:
    """``{"error": {"message", "type", "param", "code"}}``, as the Responses wire."""
    return wire_openai.error_body(status, message)
