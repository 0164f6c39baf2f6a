"""An ACP agent that leaves a process behind (one in a session of its own, which the group
signals at shutdown miss): the client's survivor sweep finds it and kills it, as open_child's
does for line-stream children."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import psutil

from supervisor.acp.client import SupervisorClient, run_acp_agent, run_policy
from supervisor.acp.fold import AcpFold
from supervisor.events import SeqCounter
from supervisor.registry import Mode

LEAVING_AGENT = r"""
import asyncio, subprocess, sys
import acp
from acp.schema import AgentCapabilities, InitializeResponse, NewSessionResponse, PromptResponse

PIDFILE = sys.argv[1]


class Fake:
    def on_connect(self, conn):
        self.conn = conn

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kw):
        return InitializeResponse(protocol_version=protocol_version,
                                  agent_capabilities=AgentCapabilities())

    async def new_session(self, cwd, mcp_servers=None, **kw):
        return NewSessionResponse(session_id="s1")

    async def prompt(self, prompt, session_id, **kw):
        # a daemon of its own: a new session, so killing the agent's group misses it
        daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                  start_new_session=True, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open(PIDFILE, "w").write(str(daemon.pid))
        return PromptResponse(stop_reason="end_turn")


asyncio.run(acp.run_agent(Fake()))
"""


def test_a_process_the_agent_leaves_behind_is_killed_and_named(tmp_path: Path) -> None:
    root = tmp_path / "wt"
    root.mkdir()
    script = tmp_path / "agent.py"
    script.write_text(LEAVING_AGENT)
    pidfile = tmp_path / "daemon.pid"
    seq = SeqCounter()
    client = SupervisorClient(
        root=root,
        agent="fake",
        policy=run_policy(Mode.READ_ONLY),
        seq=seq,
        emit=lambda _e: None,
    )
    run = asyncio.run(
        run_acp_agent(
            [sys.executable, str(script), str(pidfile)],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
            cwd=root,
            prompt="hi",
            client=client,
            fold=AcpFold(seq, cwd=str(root)),
            on_transcript=lambda _b: None,
            max_runtime=60.0,
            grace=1.0,
        )
    )
    assert run.outcome.status == "completed"
    daemon = int(pidfile.read_text())
    assert daemon in [p.pid for p in run.child.survivors_killed]
    assert run.child.survivors_left == ()
    gone = not psutil.pid_exists(daemon) or psutil.Process(daemon).status() == "zombie"
    assert gone
