"""Record the real ``claude-agent-acp`` over ACP against the fake model server, offline.

``python -m supervisor.lab.acp_record [--scenario NAME]… [--out DIR]`` (``--out`` defaults to
``fixtures/external``). Test infrastructure, like :mod:`supervisor.lab.recorder`.

For each scenario: a work dir with a scratch git repo (the seed files, one commit), a per-run
``CLAUDE_CONFIG_DIR`` and HOME, and a TMPDIR; then
``unshare --net -- <python> -m supervisor.lab.acp_record --inside job.json`` re-runs this module
in a network namespace where only loopback exists (as non-root with ``--user -r`` as well). The
inside brings ``lo`` up, records ``ip -o link``, starts a
:class:`~supervisor.lab.server.FakeModelServer` on 127.0.0.1 with the scenario's replies, writes
``$CLAUDE_CONFIG_DIR/plugins/blocklist.json`` fresh, spawns the agent in its own process group
(stderr to a file) and drives it with the ACP SDK's client side: ``initialize`` (fs read/write
offered, served inside the scratch repo only), ``session/new`` (cwd = the repo),
``session/prompt``, then SIGTERM to the group after a grace (the agent ignores stdin close),
SIGKILL if it lingers. An SDK observer records every JSON-RPC message both ways.

Written to ``<out>/claude-acp/<version>/``:

- ``<scenario>.jsonl``: one object per line, ``{"direction": "out"|"in", "message": {…}}``
  (``out``: client → agent; ``in``: agent → client), in the order the observer saw them, with
  the scratch paths replaced by ``<repo>``, ``<home>``, ``<workdir>``;
- ``<scenario>.meta.json``: argv, env names, exit code, stderr tail, wall time, files changed in
  the repo, the fake server's requests, the namespace's interface list, ``synthetic: false``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from supervisor.lab.recorder import files_changed
from supervisor.lab.script import Reply, Script, Text, Thinking, ToolCall
from supervisor.lab.server import FakeModelServer

__all__ = [
    "AGENT_DIR",
    "SCENARIOS",
    "VERSION",
    "AcpScenario",
    "agent_env",
    "main",
    "record",
]

VERSION = "0.23.1"
AGENT_DIR = "claude-acp"
REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT_BIN = REPO_ROOT / "vendor" / "acp" / "node_modules" / ".bin" / "claude-agent-acp"
DUMMY_KEY = "sk-ant-lab-dummy-key-not-a-secret"
KILL_GRACE_S = 3.0
STDERR_TAIL_BYTES = 4096
DEFAULT_SCRATCH = Path(tempfile.gettempdir()) / "asup-acp-lab"

SEED: dict[str, str] = {
    "README.md": "# greeter\n\nA tiny module that greets.\n",
    "src/app.py": "def greet(name: str) -> str:\n    return 'hello ' + name\n",
}
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


@dataclass(frozen=True, slots=True)
class AcpScenario:
    """One prompt against a scripted model. ``<repo>`` in tool inputs is the scratch repo."""

    name: str
    description: str
    prompt: str
    replies: tuple[Reply, ...]
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 90.0


_APP = "<repo>/src/app.py"

SCENARIOS: dict[str, AcpScenario] = {
    s.name: s
    for s in (
        AcpScenario(
            "plain_text",
            "A thinking block, then one text answer; no tools.",
            "Say hello to the lab.",
            (
                Reply(
                    (
                        Thinking("The user wants a short greeting. No tools are needed."),
                        Text("Hello from the lab."),
                    )
                ),
            ),
        ),
        AcpScenario(
            "read_file",
            "Read a file of the repo, then answer from it.",
            "What does greet() in src/app.py return?",
            (
                Reply((Text("Let me look."), ToolCall("Read", {"file_path": _APP}))),
                Reply((Text("greet() returns 'hello ' followed by the name."),)),
            ),
        ),
        AcpScenario(
            "write_file",
            "Create a new file with Write; the permission request is answered 'allow'.",
            "Create NOTES.md with a one-line summary of the project.",
            (
                Reply(
                    (
                        ToolCall(
                            "Write",
                            {
                                "file_path": "<repo>/NOTES.md",
                                "content": "greeter: a tiny module that greets.\n",
                            },
                        ),
                    )
                ),
                Reply((Text("Created NOTES.md."),)),
            ),
        ),
        AcpScenario(
            "http_500",
            "Every model request answers HTTP 500; retries bounded by CLAUDE_CODE_MAX_RETRIES=1.",
            "Say hello.",
            (Reply(http_status=500, repeat=10),),
            env={"CLAUDE_CODE_MAX_RETRIES": "1"},
        ),
    )
}


# -- outside the namespace ------------------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo), **_GIT_ENV}
    subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True)


def _make_workdir(workdir: Path) -> None:
    repo = workdir / "repo"
    for d in (repo, workdir / "home", workdir / "config", workdir / "tmp"):
        d.mkdir(parents=True)
    for rel, text in SEED.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "lab seed")


def _unshare_argv(job_file: Path) -> list[str]:
    prefix = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "-r", "--net"]
    return [
        *prefix,
        "--",
        sys.executable,
        "-m",
        "supervisor.lab.acp_record",
        "--inside",
        str(job_file),
    ]


def _placeholders(workdir: Path) -> dict[str, str]:
    # longest first, so <repo> wins over <workdir>
    return {
        str(workdir / "repo"): "<repo>",
        str(workdir / "home"): "<home>",
        str(workdir / "config"): "<config>",
        str(workdir / "tmp"): "<tmp>",
        str(workdir): "<workdir>",
        str(AGENT_BIN.parent): "<vendor-bin>",
    }


def _scrub(value: Any, subs: dict[str, str]) -> Any:
    if isinstance(value, str):
        for real, name in subs.items():
            value = value.replace(real, name)
        return value
    if isinstance(value, list):
        return [_scrub(v, subs) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, subs) for k, v in value.items()}
    return value


def _request_summary(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in requests:
        groups.setdefault((r["method"], r["path"], r["lane"]), []).append(r)
    return [
        {
            "method": m,
            "path": p,
            "lane": lane,
            "count": len(rs),
            "statuses": [r["status"] for r in rs],
        }
        for (m, p, lane), rs in groups.items()
    ]


def record(name: str, out: Path, scratch: Path) -> Path:
    """Run one scenario in ``scratch/<name>`` (replaced) and write its fixtures."""
    if not AGENT_BIN.exists():
        raise RuntimeError(f"{AGENT_BIN} is missing (run scripts/install-acp-vendors.sh)")
    scenario = SCENARIOS[name]
    workdir = (scratch / name).resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    _make_workdir(workdir)
    job_file = workdir / "job.json"
    job_file.write_text(json.dumps({"scenario": name, "workdir": str(workdir)}))
    proc = subprocess.run(
        _unshare_argv(job_file),
        capture_output=True,
        timeout=scenario.timeout_s + 60,
        check=False,
        cwd=REPO_ROOT,
    )
    result_file = workdir / "result.json"
    if proc.returncode != 0 or not result_file.exists():
        raise RuntimeError(
            f"acp lab child failed (exit {proc.returncode}): "
            + proc.stderr[-STDERR_TAIL_BYTES:].decode("utf-8", "replace")
        )
    result = json.loads(result_file.read_text())
    subs = _placeholders(workdir)
    target = out / AGENT_DIR / VERSION
    target.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(_scrub(m, subs), ensure_ascii=False, sort_keys=False) for m in result["messages"]
    ]
    (target / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines))
    stderr = (workdir / "agent.stderr").read_bytes()[-STDERR_TAIL_BYTES:]
    meta = {
        "agent": AGENT_DIR,
        "vendor_version": VERSION,
        "scenario": name,
        "description": scenario.description,
        "synthetic": False,
        "transport": "acp-stdio",
        "argv": _scrub(result["argv"], subs),
        "env_names": result["env_names"],
        "exit_code": result["exit_code"],
        "killed_by": result["killed_by"],
        "wall_time_s": result["wall_time_s"],
        "stop_reason": result["stop_reason"],
        "client_error": _scrub(result["client_error"], subs),
        "stderr_tail": _scrub(stderr.decode("utf-8", "replace"), subs),
        "files_changed": files_changed(workdir / "repo"),
        "requests": _request_summary(result["requests"]),
        "netns_links": result["netns_links"],
    }
    meta_file = target / f"{name}.meta.json"
    meta_file.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return meta_file


# -- inside the namespace -------------------------------------------------------------------


def agent_env(workdir: Path, base_url: str, extra: dict[str, str]) -> dict[str, str]:
    """The agent's whole environment: nothing inherited but PATH and the locale."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(workdir / "home"),
        "TMPDIR": str(workdir / "tmp"),
        "USER": "lab",
        "LOGNAME": "lab",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": DUMMY_KEY,
        "CLAUDE_CONFIG_DIR": str(workdir / "config"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    env.update(extra)
    return env


def _write_blocklist(config: Path) -> None:
    plugins = config / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    body = {"fetchedAt": int(time.time() * 1000), "plugins": []}
    (plugins / "blocklist.json").write_text(json.dumps(body))


def _bind(replies: tuple[Reply, ...], repo: str) -> list[Reply]:
    out: list[Reply] = []
    for r in replies:
        blocks = tuple(
            ToolCall(
                b.name,
                json.loads(json.dumps(b.input).replace("<repo>", repo)),
                b.kind,
                b.call_id,
            )
            if isinstance(b, ToolCall)
            else b
            for b in r.blocks
        )
        out.append(
            Reply(
                blocks, r.http_status, r.repeat, r.cut_after_events, r.stream_error, r.error_message
            )
        )
    return out


class _LabClient:
    """The client side: answers fs requests inside the repo only, allows every permission
    request with its first ``allow_once``-kind option."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo.resolve()

    def _inside(self, path: str) -> Path:
        from acp import RequestError

        p = Path(path).resolve()
        if p != self.repo and self.repo not in p.parents:
            raise RequestError.invalid_params({"path": path, "reason": "outside the worktree"})
        return p

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        for kind in ("allow_once", "allow_always"):
            for opt in options:
                if opt.kind == kind:
                    return RequestPermissionResponse(
                        outcome=AllowedOutcome(option_id=opt.option_id, outcome="selected")
                    )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        from acp.schema import ReadTextFileResponse

        p = self._inside(path)
        text = p.read_text() if p.is_file() else ""
        if line is not None or limit is not None:
            rows = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(rows[start : start + limit if limit is not None else None])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        from acp.schema import WriteTextFileResponse

        p = self._inside(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
        return WriteTextFileResponse()


async def _drive(
    scenario: AcpScenario, workdir: Path, env: dict[str, str], messages: list[dict[str, Any]]
) -> dict[str, Any]:
    import acp
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    repo = workdir / "repo"
    argv = [str(AGENT_BIN)]
    start = time.monotonic()
    with (workdir / "agent.stderr").open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            cwd=repo,
            env=env,
            start_new_session=True,
            limit=64 * 1024 * 1024,
        )

    def observe(event: Any) -> None:
        direction = "out" if event.direction.value == "outgoing" else "in"
        messages.append({"direction": direction, "message": event.message})

    assert proc.stdin is not None
    assert proc.stdout is not None
    # _LabClient serves what the lab offers; the SDK answers method-not-found for the rest
    client = cast("acp.Client", _LabClient(repo))
    conn = acp.connect_to_agent(client, proc.stdin, proc.stdout, observers=[observe])
    stop_reason: str | None = None
    client_error: str | None = None
    try:
        async with asyncio.timeout(scenario.timeout_s):
            await conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=False,
                ),
                client_info=Implementation(name="asup-lab", version="0"),
            )
            session = await conn.new_session(cwd=str(repo), mcp_servers=[])
            resp = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block(scenario.prompt)]
            )
            stop_reason = resp.stop_reason
    except Exception as exc:  # the agent's JSON-RPC error is recorded; keep the reason too
        client_error = f"{type(exc).__name__}: {exc}"
    await asyncio.sleep(0.5)  # late notifications
    killed_by = "SIGTERM"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        code = await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
    except TimeoutError:
        killed_by = "SIGKILL"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        code = await proc.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(conn.close(), 2.0)
    return {
        "argv": argv,
        "exit_code": code,
        "killed_by": killed_by,
        "wall_time_s": round(time.monotonic() - start, 3),
        "stop_reason": stop_reason,
        "client_error": client_error,
    }


def _inside(job_file: Path) -> int:
    job = json.loads(job_file.read_text())
    workdir = Path(job["workdir"])
    scenario = SCENARIOS[job["scenario"]]
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    script = Script(_bind(scenario.replies, str(workdir / "repo")))
    messages: list[dict[str, Any]] = []
    with FakeModelServer(script, log_path=workdir / "server.jsonl") as server:
        env = agent_env(workdir, server.base_url, scenario.env)
        _write_blocklist(workdir / "config")
        result = asyncio.run(_drive(scenario, workdir, env, messages))
        requests = [r.to_dict() for r in server.requests]
    result.update(
        {
            "env_names": sorted(env),
            "netns_links": [ln for ln in links.stdout.splitlines() if ln.strip()],
            "messages": messages,
            "requests": requests,
        }
    )
    (workdir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m supervisor.lab.acp_record")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--out", type=Path, default=Path("fixtures/external"))
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH)
    parser.add_argument("--keep", action="store_true", help="keep the work dirs afterwards")
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside is not None:
        return _inside(args.inside)
    failures = 0
    for name in args.scenario or sorted(SCENARIOS):
        try:
            meta_file = record(name, args.out, args.scratch)
        except (RuntimeError, subprocess.SubprocessError) as exc:
            failures += 1
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            continue
        finally:
            if not args.keep:
                shutil.rmtree(args.scratch / name, ignore_errors=True)
        meta = json.loads(meta_file.read_text())
        print(
            f"{name}: stop_reason={meta['stop_reason']} error={meta['client_error']} "
            f"exit={meta['exit_code']} {meta['wall_time_s']} s → {meta_file}"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
