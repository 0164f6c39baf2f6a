"""What the fake model server says: a wire-neutral script of replies.

A :class:`Script` is a queue of :class:`Reply` values. Each model request the server receives
(Anthropic ``POST /v1/messages`` or OpenAI ``POST /v1/responses``) takes the next reply and the
server renders it in that request's wire format. A reply is a sequence of blocks (text, thinking /
reasoning, tool calls) plus optional fault injection:

- ``http_status``: answer with this HTTP status (and an error body in the API's shape) instead of
  a stream; ``repeat`` says for how many consecutive requests (the first N requests fail);
- ``cut_after_events``: close the connection after this many SSE events were sent;
- ``stream_error``: send an in-stream error event (e.g. ``overloaded_error``) after the blocks;
- ``hold_after_events``: send this many SSE events, then keep the connection open and silent
  (until the client goes away or the server closes): a model turn that is still running, for
  cancel and budget tests.

This module is data only: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = ["Block", "Reply", "Script", "Text", "Thinking", "ToolCall"]


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Thinking:
    """Anthropic ``thinking`` block / OpenAI ``reasoning`` item."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model makes.

    ``kind="function"``: Anthropic ``tool_use`` / OpenAI ``function_call`` with JSON arguments
    (``input`` is a dict). ``kind="custom"``: OpenAI freeform ``custom_tool_call`` (``input`` is
    the raw string, e.g. an apply_patch body). ``call_id`` defaults to one the server makes up.
    """

    name: str
    input: dict[str, Any] | str
    kind: Literal["function", "custom"] = "function"
    call_id: str | None = None


Block = Text | Thinking | ToolCall


@dataclass(frozen=True, slots=True)
class Reply:
    blocks: tuple[Block, ...] = ()
    http_status: int | None = None
    repeat: int = 1
    cut_after_events: int | None = None
    stream_error: str | None = None
    error_message: str | None = None
    hold_after_events: int | None = None


@dataclass(slots=True)
class Script:
    """A queue of replies. When it runs dry the server answers a plain ``done`` text reply."""

    replies: list[Reply] = field(default_factory=list)
    fallback: Reply = field(default_factory=lambda: Reply((Text("done"),)))

    def next_reply(self) -> Reply:
        if not self.replies:
            return self.fallback
        head = self.replies[0]
        if head.http_status is not None and head.repeat > 1:
            self.replies[0] = replace(head, repeat=head.repeat - 1)
            return head
        return self.replies.pop(0)
