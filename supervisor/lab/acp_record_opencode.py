"""Record the real ``opencode acp`` over ACP against the fake model server, offline.

``python -m supervisor.lab.acp_record_opencode [--scenario NAME]… [--out DIR]``: the same
procedure as :mod:`supervisor.lab.acp_record` (whose work dir, client, scrubbing and summaries
it reuses) for opencode 1.18.33, whose model calls go to ``POST /v1/chat/completions`` through
the ``@ai-sdk/openai-compatible`` provider (:mod:`supervisor.lab.wire_chat`).

Per run: ``HOME``, the four XDG dirs under it, ``TMPDIR``, and ``OPENCODE_CONFIG`` pointing at
a per-run ``config/opencode.json`` (provider ``lab`` with ``baseURL=<fake>/v1``,
``enabled_providers=["lab"]``, ``permission: {"edit": "ask", "bash": "ask"}``, autoupdate and
sharing off), plus the ``OPENCODE_DISABLE_*`` switches and ``npm_config_offline=true``. argv:
``opencode acp --pure``. Everything runs inside ``unshare --net`` (only ``lo``).

Written to ``<out>/opencode-acp/<version>/<scenario>.jsonl`` and ``.meta.json``, as for
claude-agent-acp.
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

__all__ = ["AGENT_DIR", "MODEL", "SCENARIOS", "VERSION", "agent_env", "config_for", "main"]

VERSION = "1.18.33"
AGENT_DIR = "opencode-acp"
AGENT_BIN = REPO_ROOT / "vendor" / "opencode" / "node_modules" / ".bin" / "opencode"
MODEL = "lab-model"
PROVIDER = "lab"
DUMMY_KEY = "sk-lab-dummy-key-not-a-secret"

_APP = "<repo>/src/app.py"

SCENARIOS: dict[str, AcpScenario] = {
    s.name: s
    for s in (
        AcpScenario(
            "plain_text",
            "Reasoning, then one text answer; no tools.",
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
            "Read a file of the repo with opencode's read tool, then answer from it.",
            "What does greet() in src/app.py return?",
            (
                Reply((Text("Let me look."), ToolCall("read", {"filePath": _APP}))),
                Reply((Text("greet() returns 'hello ' followed by the name."),)),
            ),
        ),
        AcpScenario(
            "write_file",
            "Create a new file with opencode's write tool; the permission request is answered "
            "with its allow-once option.",
            "Create NOTES.md with a one-line summary of the project.",
            (
                Reply(
                    (
                        ToolCall(
                            "write",
                            {
                                "filePath": "<repo>/NOTES.md",
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
            "Every model request answers HTTP 500.",
            "Say hello.",
            (Reply(http_status=500, repeat=50),),
            timeout_s=60.0,
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
    }


def _unshare_argv(job_file: Path) -> list[str]:
    prefix = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "-r", "--net"]
    module = "supervisor.lab.acp_record_opencode"
    return [*prefix, "--", sys.executable, "-m", module, "--inside", str(job_file)]


def record(name: str, out: Path, scratch: Path) -> Path:
    """Run one scenario in ``scratch/<name>`` (replaced) and write its fixtures."""
    if not AGENT_BIN.exists():
        raise RuntimeError(f"{AGENT_BIN} is missing (run scripts/install-opencode.sh)")
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
    subs = {result["base_url"]: "<fake>", **_placeholders(workdir)}
    target = out / AGENT_DIR / VERSION
    target.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(_scrub(m, subs), ensure_ascii=False) for m in result["messages"]]
    (target / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines))
    stderr = (workdir / "agent.stderr").read_bytes()[-STDERR_TAIL_BYTES:]
    requests = result["requests"]
    meta = {
        "agent": AGENT_DIR,
        "vendor_version": VERSION,
        "scenario": name,
        "description": scenario.description,
        "synthetic": False,
        "transport": "acp-stdio",
        "argv": _scrub(result["argv"], subs),
        "env_names": result["env_names"],
        "config": _scrub(result["config"], subs),
        "exit_code": result["exit_code"],
        "killed_by": result["killed_by"],
        "wall_time_s": result["wall_time_s"],
        "stop_reason": result["stop_reason"],
        "client_error": _scrub(result["client_error"], subs),
        "cancelled_after_s": result["cancelled_after_s"],
        "stderr_tail": _scrub(stderr.decode("utf-8", "replace"), subs),
        "files_changed": files_changed(workdir / "repo"),
        "requests": _request_summary(requests),
        "request_bodies": _scrub(_bodies(requests), subs),
        "netns_links": result["netns_links"],
    }
    meta_file = target / f"{name}.meta.json"
    meta_file.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return meta_file


def _bodies(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each model request asked for, without the long parts (system prompt, tool
    schemas, history): the keys, the model, the stream options, tool names, message roles."""
    out: list[dict[str, Any]] = []
    for r in requests:
        body = r.get("body")
        entry: dict[str, Any] = {"n": r["n"], "method": r["method"], "path": r["path"]}
        entry["headers"] = r.get("headers")
        if isinstance(body, dict):
            entry["keys"] = sorted(body)
            entry["model"] = body.get("model")
            entry["stream_options"] = body.get("stream_options")
            tools = body.get("tools")
            if isinstance(tools, list):
                entry["tools"] = [
                    t.get("function", {}).get("name") for t in tools if isinstance(t, dict)
                ]
            messages = body.get("messages")
            if isinstance(messages, list):
                entry["roles"] = [m.get("role") for m in messages if isinstance(m, dict)]
        out.append(entry)
    return out


# -- inside the namespace -------------------------------------------------------------------


def config_for(base_url: str) -> dict[str, Any]:
    """The per-run ``opencode.json``: one OpenAI-compatible provider at the fake server."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Lab",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": DUMMY_KEY},
                "models": {MODEL: {"name": "Lab model", "tool_call": True, "reasoning": True}},
            }
        },
        "model": f"{PROVIDER}/{MODEL}",
        "small_model": f"{PROVIDER}/{MODEL}",
        "enabled_providers": [PROVIDER],
        "permission": {"edit": "ask", "bash": "ask"},
        "autoupdate": False,
        "share": "disabled",
    }


def agent_env(workdir: Path, config_file: Path, extra: dict[str, str]) -> dict[str, str]:
    """The agent's whole environment: nothing inherited but PATH and the locale."""
    home = workdir / "home"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(workdir / "tmp"),
        "USER": "lab",
        "LOGNAME": "lab",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "OPENCODE_CONFIG": str(config_file),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
        "npm_config_offline": "true",
    }
    env.update(extra)
    return env


async def _drive(
    scenario: AcpScenario, workdir: Path, env: dict[str, str], messages: list[dict[str, Any]]
) -> dict[str, Any]:
    import acp
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    repo = workdir / "repo"
    argv = [str(AGENT_BIN), "acp", "--pure"]
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
    cancelled_after: float | None = None
    try:
        async with asyncio.timeout(scenario.timeout_s + 15):
            await conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=False,
                ),
                client_info=Implementation(name="asup-lab", version="0"),
            )
            session = await conn.new_session(cwd=str(repo), mcp_servers=[])
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[acp.text_block(scenario.prompt)])
            )
            done, _ = await asyncio.wait({prompt}, timeout=scenario.timeout_s)
            if not done:  # e.g. retrying a failing model forever: cancel as a client would
                cancelled_after = round(time.monotonic() - start, 3)
                await conn.cancel(session_id=session.session_id)
            resp = await prompt
            stop_reason = resp.stop_reason
    except Exception as exc:  # the agent's JSON-RPC error is recorded; keep the reason too
        client_error = f"{type(exc).__name__}: {exc}"
    await asyncio.sleep(0.5)  # late notifications
    killed_by = "stdin-close"
    with contextlib.suppress(Exception):
        proc.stdin.close()
    try:
        code = await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
    except TimeoutError:
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
        "cancelled_after_s": cancelled_after,
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
        config = config_for(server.base_url)
        config_file = workdir / "config" / "opencode.json"
        config_file.write_text(json.dumps(config, indent=2) + "\n")
        env = agent_env(workdir, config_file, scenario.env)
        result = asyncio.run(_drive(scenario, workdir, env, messages))
        requests = [r.to_dict() for r in server.requests]
    result.update(
        {
            "env_names": sorted(env),
            "config": config,
            "base_url": server.base_url,
            "netns_links": [ln for ln in links.stdout.splitlines() if ln.strip()],
            "messages": messages,
            "requests": requests,
        }
    )
    (workdir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m supervisor.lab.acp_record_opencode")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--out", type=Path, default=Path("fixtures/external"))
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH.with_name("asup-oc-lab"))
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
