"""A scripted ACP agent on the official SDK's agent side, for the client's unit tests.

Run as ``python scripted_acp_agent.py SCENARIO ARG``; the tests spawn it as the supervised
child. Scenarios (what ``session/prompt`` does):

- ``answer``: tries ``fs/write_text_file`` to the path ARG (the tests pass one outside the
  worktree, which the client must refuse), then says "all done" and ends the turn;
- ``hang``: waits for ``session/cancel``, then answers ``cancelled``; ignores SIGTERM, so only
  the SIGKILL ends it;
- ``silent``: waits for ``session/cancel`` without a word (for the silence budget);
- ``ask``: asks permission to run ``make`` (kind execute), then says "done";
- ``leave``: starts a daemon in a session of its own (its pid written to the file ARG), ends
  the turn, and leaves the daemon behind;
- ``error``: answers a JSON-RPC internal error naming an HTTP 500;
- ``crash``: exits with status 3 before answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from typing import Any

import acp
from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)

SCENARIO = sys.argv[1]
ARG = sys.argv[2] if len(sys.argv) > 2 else ""


class Scripted:
    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        self.cancelled = asyncio.Event()

    async def initialize(self, protocol_version: int, **kw: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=protocol_version, agent_capabilities=AgentCapabilities()
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> Any:
        return NewSessionResponse(session_id="s1")

    async def prompt(self, prompt: Any, session_id: str, **kw: Any) -> PromptResponse:
        if SCENARIO in ("hang", "silent"):
            await self.cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        if SCENARIO == "crash":
            os._exit(3)
        if SCENARIO == "error":
            raise acp.RequestError.internal_error({"details": "API Error: 500 overloaded"})
        if SCENARIO == "leave":
            daemon = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(120)"],
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            with open(ARG, "w", encoding="utf-8") as f:
                f.write(str(daemon.pid))
            return PromptResponse(stop_reason="end_turn")
        if SCENARIO == "ask":
            await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(
                    tool_call_id="c1", kind="execute", title="make", raw_input={"command": "make"}
                ),
                options=[
                    PermissionOption(option_id="ok", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                ],
            )
            await self.conn.session_update(session_id, acp.update_agent_message_text("done"))
            return PromptResponse(stop_reason="end_turn")
        with contextlib.suppress(acp.RequestError):  # refused: the tests pass a path outside
            await self.conn.write_text_file(path=ARG, content="x", session_id=session_id)
        await self.conn.session_update(session_id, acp.update_agent_message_text("all done"))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kw: Any) -> None:
        self.cancelled.set()


if __name__ == "__main__":
    if SCENARIO == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # needs the SIGKILL
    asyncio.run(acp.run_agent(Scripted()))
