"""The inside of a lab run: executed in a fresh network namespace where only ``lo`` exists.

``unshare --net -- <python> -m supervisor.lab.netns_child <job.json>`` (spawned by
:mod:`supervisor.lab.recorder`). It brings ``lo`` up, records ``ip -o link`` as proof that no
other interface exists, then for each step of the scenario starts a
:class:`~supervisor.lab.server.FakeModelServer` on 127.0.0.1, runs the vendor CLI (stdin
``/dev/null``, cwd the scratch repo, its own process group, killed after the scenario's timeout)
and writes its stdout/stderr to files. The results go to ``result.json`` in the work dir.

Job file keys: ``agent_id``, ``scenario``, ``workdir``. Work dir layout: ``repo/``, ``home/``,
``outside/``, ``tmp/``; written here: ``step<k>.stdout``, ``step<k>.stderr``,
``server.step<k>.jsonl``, ``result.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.lab.agents import AgentLab, RunContext, get_lab
from supervisor.lab.scenarios import Scenario, Step, get_scenario
from supervisor.lab.server import FakeModelServer

__all__ = ["KILL_GRACE_S", "main", "run_job"]

KILL_GRACE_S = 3.0


@dataclass(frozen=True, slots=True)
class _Exit:
    code: int
    timed_out: bool
    wall_s: float


def _bring_up_loopback() -> list[str]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line.strip()]


def _run_cli(
    argv: list[str], env: dict[str, str], cwd: Path, stdout: Path, stderr: Path, timeout: float
) -> _Exit:
    start = time.monotonic()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        timed_out = False
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                code = proc.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
    # descendants that outlived the CLI go with it
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return _Exit(code, timed_out, round(time.monotonic() - start, 3))


def _run_step(
    lab: AgentLab,
    scenario: Scenario,
    step: Step,
    k: int,
    workdir: Path,
    kept_session: str | None,
) -> tuple[dict[str, Any], str | None]:
    base = RunContext(
        scenario=scenario,
        workdir=workdir,
        repo=workdir / "repo",
        home=workdir / "home",
        outside=workdir / "outside",
        base_url="",
    )
    script = step.script(base.placeholders())
    log = workdir / f"server.step{k}.jsonl"
    with FakeModelServer(script, log_path=log) as server:
        ctx = RunContext(
            scenario, base.workdir, base.repo, base.home, base.outside, server.base_url
        )
        lab.prepare_home(ctx)
        session_id: str | None = None
        if step.session == "new":
            session_id = lab.new_session_id()
        elif step.session == "resume":
            session_id = kept_session
        argv = lab.argv(step, ctx, session_id=session_id)
        env = lab.env(ctx)
        stdout, stderr = workdir / f"step{k}.stdout", workdir / f"step{k}.stderr"
        result = _run_cli(argv, env, ctx.repo, stdout, stderr, scenario.timeout_s)
        requests = [r.to_dict() for r in server.requests]
        replies_left = server.replies_left
    if step.session == "new":
        kept_session = session_id or lab.session_id_from_stdout(stdout.read_bytes())
    record = {
        "step": k,
        "argv": argv,
        "env_names": sorted(env),
        "exit_code": result.code,
        "timed_out": result.timed_out,
        "wall_time_s": result.wall_s,
        "session": step.session,
        "session_id": session_id if step.session != "new" else kept_session,
        "stdout_file": stdout.name,
        "stderr_file": stderr.name,
        "requests": requests,
        "replies_left": replies_left,
    }
    return record, kept_session


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    workdir = Path(job["workdir"])
    links = _bring_up_loopback()
    lab = get_lab(job["agent_id"])
    scenario = get_scenario(job["agent_id"], job["scenario"])
    version = lab.version()
    steps: list[dict[str, Any]] = []
    kept: str | None = None
    for k, step in enumerate(scenario.steps, start=1):
        record, kept = _run_step(lab, scenario, step, k, workdir, kept)
        steps.append(record)
    return {"version": version, "netns_links": links, "steps": steps}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m supervisor.lab.netns_child <job.json>", file=sys.stderr)
        return 2
    job = json.loads(Path(args[0]).read_text())
    result = run_job(job)
    Path(job["workdir"], "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
