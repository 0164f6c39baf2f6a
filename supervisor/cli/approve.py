"""The terminal approver: a question the policy asks is put to the person at the terminal.

It talks to the controlling terminal itself (``/dev/tty``), not to stdin/stdout, so ``--json``
output on stdout stays clean and a redirected stdout does not swallow the question. The
terminal is read without a thread: the file descriptor is non-blocking and the event loop waits
for it to be readable, so a run that is canceled or times out while a question is open just
stops waiting (no thread is left blocked on the terminal).

What the person sees::

    ── claude-acp asks: Bash ──────────────────────────────
    shell 'rm -rf build' by agent 'claude-acp' (tool 'Bash')
    why asked: … no rule matches, so the person is asked
      1  Always Allow (asup allows this one action only)
      2  Allow
      3  Reject
    answer 1-3 (y = allow once, n = deny, Enter = deny):

The agent's own options are shown in its order, with an "allow always" marked as the one
action asup allows (:func:`supervisor.policy.option_label`). A request without options (an
``fs/*`` read or write) is a yes / no question. An empty line, end of input or ``n`` is a deny;
anything else unreadable is asked again (three times, then a deny).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

from supervisor.approval import Answer, ApprovalRequest
from supervisor.policy import PermissionOptionKind, option_label

__all__ = ["TerminalApprover", "parse_answer", "render_question"]

ATTEMPTS = 3
_ALLOW_ONCE = PermissionOptionKind.ALLOW_ONCE


def render_question(request: ApprovalRequest, agent: str) -> str:
    action = request.action
    head = f"── {agent} asks: {request.title or action.tool or action.risk} "
    lines = [head + "─" * max(3, 64 - len(head)), action.describe()]
    lines.append(f"why asked: {request.verdict.reason}")
    if request.options:
        for number, option in enumerate(request.options, start=1):
            lines.append(f"  {number}  {option_label(option)}")
        count = len(request.options)
        lines.append(f"answer 1-{count} (y = allow once, n = deny, Enter = deny): ")
    else:
        lines.append("allow this once? (y = allow once, n = deny, Enter = deny): ")
    return "\n".join(lines)


def parse_answer(text: str, request: ApprovalRequest) -> Answer:
    """The person's line as an answer; ``ValueError`` with what to type instead."""
    word = text.strip().lower()
    if word in ("", "n", "no", "d", "deny"):
        return False
    if word in ("y", "yes", "a", "allow"):
        return _ALLOW_ONCE if request.options else True
    if word.isdigit() and request.options:
        index = int(word) - 1
        if 0 <= index < len(request.options):
            return request.options[index].kind
    count = len(request.options)
    choices = f"a number 1-{count}, y or n" if count else "y or n"
    raise ValueError(f"not an answer: type {choices}")


class TerminalApprover:
    """Asks on ``tty_path`` (the controlling terminal). ``pause`` / ``resume`` let a live view
    step aside while the question is open."""

    def __init__(
        self,
        agent: str,
        *,
        tty_path: str = "/dev/tty",
        pause: Callable[[], None] = lambda: None,
        resume: Callable[[], None] = lambda: None,
    ) -> None:
        self.agent = agent
        self.tty_path = tty_path
        self.pause = pause
        self.resume = resume

    @staticmethod
    def available(tty_path: str = "/dev/tty") -> bool:
        """Whether a terminal can be opened to ask on."""
        try:
            fd = os.open(tty_path, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return False
        os.close(fd)
        return True

    async def ask(self, request: ApprovalRequest) -> Answer:
        self.pause()
        try:
            fd = os.open(self.tty_path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            self.resume()
            return None  # no terminal after all: no answer, so a deny
        try:
            _write(fd, "\n" + render_question(request, self.agent))
            for _ in range(ATTEMPTS):
                line = await _read_line(fd)
                if line is None:
                    return None
                try:
                    return parse_answer(line, request)
                except ValueError as exc:
                    _write(fd, f"{exc}: ")
            return None
        finally:
            os.close(fd)
            self.resume()


def _write(fd: int, text: str) -> None:
    data = text.encode("utf-8", "replace")
    while data:
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
        data = data[written:]


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _read_line(fd: int) -> str | None:
    """One line from the non-blocking ``fd``, waiting on the event loop; None at end of input."""
    loop = asyncio.get_running_loop()
    buffer = bytearray()
    while b"\n" not in buffer:
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _settle, ready)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        try:
            chunk = os.read(fd, 1024)
        except BlockingIOError:
            continue
        except OSError:
            return None  # the terminal went away (EIO on a hung-up tty)
        if not chunk:
            return None
        buffer.extend(chunk)
    with contextlib.suppress(ValueError):
        return buffer[: buffer.index(b"\n")].decode("utf-8", "replace")
    return None
