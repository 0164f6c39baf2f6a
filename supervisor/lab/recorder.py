"""Record real vendor CLIs against the fake model server, offline, inside a network namespace.

``python -m supervisor.lab.recorder --agent claude-cli [--scenario NAME]… [--out DIR]``
(``--out`` defaults to ``fixtures/external``).

For each scenario: a work dir with a scratch git repo (the seed files, one commit), a per-run
HOME, an empty ``outside/`` dir next to the repo and a TMPDIR; then
``unshare --net -- <python> -m supervisor.lab.netns_child job.json`` runs every step of the
scenario against a fresh fake server on 127.0.0.1 in a namespace where only loopback exists
(as non-root the namespace is made with ``--user --map-root-user`` as well).

Written to ``<out>/<agent>/<version>/``:

- ``<scenario>.jsonl``: the CLI's stdout bytes, verbatim, of the last step;
- ``<scenario>.step<k>.jsonl``: the stdout of each earlier step of a multi-step scenario;
- ``<scenario>.meta.json``: argv (temp paths as ``<repo>``, ``<home>``, ``<outside>``,
  ``<tmp>``, ``<workdir>``), env names only, exit code, stderr tail, wall time, files changed
  in the repo vs its base commit, the requests the fake server received, the namespace's
  interface list, the vendor version, the scenario's expectations, ``synthetic: false``; the
  same per step under ``steps``.

:func:`run_scenario` does the same in a given work dir without writing fixtures (e2e tests).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.lab.agents import get_lab
from supervisor.lab.agents.base import VENDOR_BIN, RunContext
from supervisor.lab.scenarios import Expect, Scenario, get_scenario, scenarios_for

__all__ = [
    "DEFAULT_SCRATCH",
    "STDERR_TAIL_BYTES",
    "LabRunError",
    "RecordedRun",
    "lab_git",
    "main",
    "record",
    "request_summary",
    "run_scenario",
]

STDERR_TAIL_BYTES = 4096
DEFAULT_SCRATCH = Path(tempfile.gettempdir()) / "asup-lab"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "lab",
    "GIT_AUTHOR_EMAIL": "lab@example.invalid",
    "GIT_COMMITTER_NAME": "lab",
    "GIT_COMMITTER_EMAIL": "lab@example.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
_STATUS_KINDS = {"?": "add", "A": "add", "M": "update", "T": "update", "D": "delete", "R": "rename"}


class LabRunError(RuntimeError):
    """The lab itself failed (not the CLI under test)."""


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """One scenario run. ``stdout`` is the last step's; ``step_stdouts`` holds every step's;
    ``step_requests`` the fake server's full request log of each step (bodies included)."""

    agent_id: str
    scenario: Scenario
    stdout: bytes
    step_stdouts: tuple[bytes, ...]
    step_requests: tuple[tuple[dict[str, Any], ...], ...]
    meta: dict[str, Any]
    repo: Path
    workdir: Path

    @property
    def exit_code(self) -> int:
        code: int = self.meta["exit_code"]
        return code

    def lines(self) -> list[dict[str, Any]]:
        """The last step's stdout parsed as JSON lines (non-JSON lines skipped)."""
        out: list[dict[str, Any]] = []
        for raw in self.stdout.splitlines():
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out


def lab_git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo), **_GIT_ENV}
    out = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout


def _make_workdir(workdir: Path, scenario: Scenario) -> RunContext:
    ctx = RunContext(
        scenario=scenario,
        workdir=workdir,
        repo=workdir / "repo",
        home=workdir / "home",
        outside=workdir / "outside",
        base_url="",
    )
    for d in (ctx.repo, ctx.home, ctx.outside, ctx.tmpdir):
        d.mkdir(parents=True, exist_ok=False)
    for rel, text in scenario.seed_files.items():
        path = ctx.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    lab_git(ctx.repo, "init", "-q", "-b", "main")
    lab_git(ctx.repo, "add", "-A")
    lab_git(ctx.repo, "commit", "-q", "--allow-empty", "-m", "lab seed")
    return ctx


def files_changed(repo: Path) -> list[dict[str, str]]:
    """Paths changed vs HEAD (tracked and untracked), with their kind."""
    out = lab_git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    entries = out.split("\0")
    changes: list[dict[str, str]] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        letter = code[1] if code[1] not in (" ", "?") else code[0]
        if code == "??":
            letter = "?"
        if letter == "R":
            i += 1  # the rename source follows
        changes.append({"path": path, "kind": _STATUS_KINDS.get(letter, "unknown")})
    return sorted(changes, key=lambda c: c["path"])


def _unshare_argv(job_file: Path) -> list[str]:
    prefix = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "-r", "--net"]
    return [*prefix, "--", sys.executable, "-m", "supervisor.lab.netns_child", str(job_file)]


def _placeholder(text: str, ctx: RunContext) -> str:
    for key, value in {**ctx.placeholders(), "<vendor-bin>": str(VENDOR_BIN)}.items():
        text = text.replace(value, key)
    return text


def _tail(data: bytes, ctx: RunContext) -> str:
    return _placeholder(data[-STDERR_TAIL_BYTES:].decode("utf-8", "replace"), ctx)


def request_summary(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests grouped by (method, path, lane) in order of first arrival, with each one's
    status and whether it asked for a stream."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in requests:
        groups.setdefault((r["method"], r["path"], r["lane"]), []).append(r)
    return [
        {
            "method": method,
            "path": path,
            "lane": lane,
            "count": len(rs),
            "statuses": [r["status"] for r in rs],
            "streamed": [r["stream"] for r in rs],
        }
        for (method, path, lane), rs in groups.items()
    ]


def _expect_dict(expect: Expect) -> dict[str, Any]:
    return {
        "exit_code": expect.exit_code,
        "status": expect.status.value,
        "failure_kind": expect.failure_kind.value if expect.failure_kind else None,
        "tools": list(expect.tools),
        "failed_tools": list(expect.failed_tools),
        "files": dict(expect.files),
        "final_text_contains": list(expect.final_text_contains),
        "denied_tools": list(expect.denied_tools),
        "absent_paths": list(expect.absent_paths),
    }


def _step_meta(step: dict[str, Any], ctx: RunContext, file_name: str) -> dict[str, Any]:
    stderr = (ctx.workdir / step["stderr_file"]).read_bytes()
    return {
        "file": file_name,
        "argv": [_placeholder(a, ctx) for a in step["argv"]],
        "env_names": step["env_names"],
        "exit_code": step["exit_code"],
        "timed_out": step["timed_out"],
        "wall_time_s": step["wall_time_s"],
        "session": step["session"],
        "stderr_tail": _tail(stderr, ctx),
        "requests": request_summary(step["requests"]),
        "replies_left": step["replies_left"],
    }


def step_file_names(scenario: Scenario) -> list[str]:
    """Fixture file of each step: ``<name>.step<k>.jsonl`` for earlier ones, the last
    ``<name>.jsonl``."""
    n = len(scenario.steps)
    return [
        f"{scenario.name}.jsonl" if k == n else f"{scenario.name}.step{k}.jsonl"
        for k in range(1, n + 1)
    ]


def run_scenario(agent_id: str, scenario_name: str, workdir: Path) -> RecordedRun:
    """Run one scenario of one agent in ``workdir`` (created; must not exist or be empty)."""
    scenario = get_scenario(agent_id, scenario_name)
    lab = get_lab(agent_id)
    if not lab.installed():
        raise LabRunError(f"{lab.binary()} is not installed (run scripts/install-vendors.sh)")
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        raise LabRunError("the lab needs `unshare` (util-linux) and `ip` (iproute2)")
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        raise LabRunError(f"the work dir {workdir} is not empty")
    ctx = _make_workdir(workdir.resolve(), scenario)
    job_file = ctx.workdir / "job.json"
    job = {"agent_id": agent_id, "scenario": scenario_name, "workdir": str(ctx.workdir)}
    job_file.write_text(json.dumps(job))
    budget = scenario.timeout_s * len(scenario.steps) + 60
    try:
        proc = subprocess.run(
            _unshare_argv(job_file),
            capture_output=True,
            timeout=budget,
            check=False,
            cwd=Path(__file__).resolve().parents[2],
        )
    except subprocess.TimeoutExpired:
        raise LabRunError(f"the lab child ran longer than {budget} s") from None
    result_file = ctx.workdir / "result.json"
    if proc.returncode != 0 or not result_file.exists():
        raise LabRunError(
            f"lab child failed (exit {proc.returncode}): "
            + proc.stderr[-STDERR_TAIL_BYTES:].decode("utf-8", "replace")
        )
    result = json.loads(result_file.read_text())
    names = step_file_names(scenario)
    steps = [_step_meta(s, ctx, names[i]) for i, s in enumerate(result["steps"])]
    stdouts = tuple((ctx.workdir / s["stdout_file"]).read_bytes() for s in result["steps"])
    last = steps[-1]
    meta: dict[str, Any] = {
        "agent": agent_id,
        "vendor_version": result["version"],
        "scenario": scenario.name,
        "description": scenario.description,
        "synthetic": False,
        "mode": scenario.mode.value,
        "argv": last["argv"],
        "env_names": last["env_names"],
        "exit_code": last["exit_code"],
        "timed_out": last["timed_out"],
        "wall_time_s": round(sum(s["wall_time_s"] for s in steps), 3),
        "stderr_tail": last["stderr_tail"],
        "files_changed": files_changed(ctx.repo),
        "requests": request_summary([r for s in result["steps"] for r in s["requests"]]),
        "netns_links": result["netns_links"],
        "expect": _expect_dict(scenario.expect),
        "steps": steps,
    }
    requests = tuple(tuple(s["requests"]) for s in result["steps"])
    return RecordedRun(
        agent_id, scenario, stdouts[-1], stdouts, requests, meta, ctx.repo, ctx.workdir
    )


def record(agent_id: str, scenario_name: str, out: Path, scratch: Path) -> Path:
    """Run a scenario in ``scratch/<agent>-<scenario>`` (replaced if it exists) and write its
    fixtures; returns the meta file's path. A fixed scratch path keeps the paths that appear
    verbatim in the recorded stdout the same from one recording to the next."""
    workdir = scratch / f"{agent_id}-{scenario_name}"
    if workdir.exists():
        shutil.rmtree(workdir)
    run = run_scenario(agent_id, scenario_name, workdir)
    target = out / agent_id / run.meta["vendor_version"]
    target.mkdir(parents=True, exist_ok=True)
    for name, data in zip(step_file_names(run.scenario), run.step_stdouts, strict=True):
        (target / name).write_bytes(data)
    meta_file: Path = target / f"{scenario_name}.meta.json"
    meta_file.write_text(json.dumps(run.meta, indent=2, ensure_ascii=False) + "\n")
    return meta_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m supervisor.lab.recorder")
    parser.add_argument("--agent", required=True)
    parser.add_argument("--scenario", action="append", help="repeatable; default: all")
    parser.add_argument("--out", type=Path, default=Path("fixtures/external"))
    parser.add_argument(
        "--scratch", type=Path, default=DEFAULT_SCRATCH, help="where the work dirs go"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work dirs afterwards")
    args = parser.parse_args(argv)
    names = args.scenario or sorted(scenarios_for(args.agent))
    failures = 0
    for name in names:
        try:
            meta_file = record(args.agent, name, args.out, args.scratch)
        except LabRunError as exc:
            failures += 1
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            continue
        finally:
            if not args.keep:
                shutil.rmtree(args.scratch / f"{args.agent}-{name}", ignore_errors=True)
        meta = json.loads(meta_file.read_text())
        expected = meta["expect"]["exit_code"]
        flag = "" if meta["exit_code"] == expected else "  <-- UNEXPECTED EXIT CODE"
        print(
            f"{name}: exit {meta['exit_code']} (expected {expected}), "
            f"{meta['wall_time_s']} s → {meta_file}{flag}"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
