"""Record the real ``gemini --acp`` (Gemini CLI) over ACP against the fake model server, offline.

``python -m supervisor.lab.acp_record_gemini [--scenario NAME]… [--out DIR]``. The same
procedure as :mod:`supervisor.lab.acp_record` (whose work dir, scrubbing, client and request
summary it reuses): a scratch git repo, ``unshare --net`` with only ``lo``, a
:class:`~supervisor.lab.server.FakeModelServer` on 127.0.0.1 (the Gemini wire,
:mod:`supervisor.lab.wire_gemini`), the ACP SDK's client side recording every message. What
differs is the agent: ``vendor/gemini/node_modules/.bin/gemini --acp``, env ``GEMINI_API_KEY``
(dummy) and ``GOOGLE_GEMINI_BASE_URL`` (the fake server), and ``$HOME/.gemini/settings.json``
written per run (:data:`SETTINGS`). The client's ``fs/read_text_file`` answers a missing file
inside the repo with empty content (VENDORS.md: an error there stops gemini creating files).

Written to ``<out>/gemini-acp/<version>/<scenario>.jsonl`` and ``.meta.json`` (same shapes as
the claude-acp fixtures).
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
import time
from pathlib import Path
from typing import Any, cast

from supervisor.lab.acp_record import (
    DEFAULT_SCRATCH,
    KILL_GRACE_S,
    REPO_ROOT,
    STDERR_TAIL_BYTES,
    AcpScenario,
    _bind,
    _LabClient,
    _make_workdir,
    _request_summary,
    _scrub,
)
from supervisor.lab.recorder import files_changed
from supervisor.lab.script import Reply, Script, Text, Thinking, ToolCall
from supervisor.lab.server import FakeModelServer

__all__ = ["AGENT_DIR", "SCENARIOS", "SETTINGS", "VERSION", "agent_env", "main", "record"]

VERSION = "0.61.0"
AGENT_DIR = "gemini-acp"
AGENT_BIN = REPO_ROOT / "vendor" / "gemini" / "node_modules" / ".bin" / "gemini"
DUMMY_KEY = "gemini-lab-dummy-key-not-a-secret"

# $HOME/.gemini/settings.json: nothing phones home, one attempt per model request. The model is
# pinned: under the default "auto" selection gemini 0.61.0 first asks a flash-lite classifier
# (a side generateContent) and its availability policy retries a failing request 3 times
# whatever general.maxAttempts says.
SETTINGS: dict[str, Any] = {
    "model": {"name": "gemini-2.5-pro"},
    "general": {
        "enableAutoUpdate": False,
        "enableAutoUpdateNotification": False,
        "maxAttempts": 1,
    },
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "gateway"}, "folderTrust": {"enabled": False}},
}

_APP = "<repo>/src/app.py"

SCENARIOS: dict[str, AcpScenario] = {
    s.name: s
    for s in (
        AcpScenario(
            "plain_text",
            "A thought, then one text answer; no tools.",
            "Say hello to the lab.",
            (
                Reply(
                    (
                        Thinking(
                            "**Greeting the lab**\n\n"
                            "The user wants a short greeting. No tools are needed."
                        ),
                        Text("Hello from the lab."),
                    )
                ),
            ),
        ),
        AcpScenario(
            "read_file",
            "Read a file of the repo (read_file → fs/read_text_file), then answer from it.",
            "What does greet() in src/app.py return?",
            (
                Reply((Text("Let me look."), ToolCall("read_file", {"file_path": _APP}))),
                Reply((Text("greet() returns 'hello ' followed by the name."),)),
            ),
        ),
        AcpScenario(
            "write_file",
            "Create a new file with write_file; the permission request is answered "
            "proceed_once (allow_once), the write goes through fs/write_text_file.",
            "Create NOTES.md with a one-line summary of the project.",
            (
                Reply(
                    (
                        ToolCall(
                            "write_file",
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
            "Every model request answers HTTP 500; general.maxAttempts=1.",
            "Say hello.",
            (Reply(http_status=500, repeat=10),),
        ),
    )
}


def _placeholders(workdir: Path) -> dict[str, str]:
    return {
        str(workdir / "repo"): "<repo>",
        str(workdir / "home"): "<home>",
        str(workdir / "config"): "<config>",
        str(workdir / "tmp"): "<tmp>",
        str(workdir): "<workdir>",
        str(AGENT_BIN.parent): "<vendor-bin>",
        str(AGENT_BIN.parents[1]): "<vendor-modules>",
    }


def _unshare_argv(job_file: Path) -> list[str]:
    prefix = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "-r", "--net"]
    module = "supervisor.lab.acp_record_gemini"
    return [*prefix, "--", sys.executable, "-m", module, "--inside", str(job_file)]


def record(name: str, out: Path, scratch: Path) -> Path:
    """Run one scenario in ``scratch/<name>`` (replaced) and write its fixtures."""
    if not AGENT_BIN.exists():
        raise RuntimeError(f"{AGENT_BIN} is missing (run scripts/install-gemini.sh)")
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
    lines = [json.dumps(_scrub(m, subs), ensure_ascii=False) for m in result["messages"]]
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
        "settings": SETTINGS,
        "exit_code": result["exit_code"],
        "killed_by": result["killed_by"],
        "wall_time_s": result["wall_time_s"],
        "stop_reason": result["stop_reason"],
        "client_error": _scrub(result["client_error"], subs),
        "stderr_tail": _scrub(stderr.decode("utf-8", "replace"), subs),
        "files_changed": files_changed(workdir / "repo"),
        "requests": _request_summary(result["requests"]),
        "request_paths": sorted({_scrub(r["path"], subs) for r in result["requests"]}),
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
        "GEMINI_API_KEY": DUMMY_KEY,
        "GOOGLE_GEMINI_BASE_URL": base_url,
    }
    env.update(extra)
    return env


def _write_settings(home: Path) -> None:
    gemini = home / ".gemini"
    gemini.mkdir(parents=True, exist_ok=True)
    (gemini / "settings.json").write_text(json.dumps(SETTINGS, indent=2) + "\n")


async def _drive(
    scenario: AcpScenario, workdir: Path, env: dict[str, str], messages: list[dict[str, Any]]
) -> dict[str, Any]:
    import acp
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    repo = workdir / "repo"
    argv = [str(AGENT_BIN), "--acp"]
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
        _write_settings(workdir / "home")
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
    parser = argparse.ArgumentParser(prog="python -m supervisor.lab.acp_record_gemini")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--out", type=Path, default=Path("fixtures/external"))
    parser.add_argument(
        "--scratch", type=Path, default=DEFAULT_SCRATCH.with_name("asup-gemini-lab")
    )
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
