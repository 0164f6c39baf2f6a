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

SCRIPTED_AGENT = Path(__file__).with_name("scripted_acp_agent.py")


def test_a_process_the_agent_leaves_behind_is_killed_and_named(tmp_path: Path) -> None:
    root = tmp_path / "wt"
    root.mkdir()
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
            [sys.executable, str(SCRIPTED_AGENT), "leave", str(pidfile)],
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
