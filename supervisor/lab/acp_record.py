"""Record real ACP agents over ACP against the fake model server, offline.

``python -m supervisor.lab.acp_record [--agent ID] [--scenario NAME]… [--out DIR] [--keep]``
(``--agent`` defaults to ``claude-acp``, ``--out`` to ``fixtures/external``). Test
infrastructure, like :mod:`supervisor.lab.recorder`. The agents are
:mod:`supervisor.lab.acp_agents` (argv, env, HOME files and scenario scripts per agent); this
module is everything they share:

For each scenario: a work dir ``<scratch>/<agent>/<scenario>`` with a scratch git repo (the seed
files, one commit), a per-run HOME and TMPDIR; then
``unshare --net -- <python> -m supervisor.lab.acp_record --inside job.json`` re-runs this module
in a network namespace where only loopback exists (as non-root with ``--user -r`` as well). The
inside brings ``lo`` up, records ``ip -o link``, starts a
:class:`~supervisor.lab.server.FakeModelServer` on 127.0.0.1 with the scenario's replies, asks
the agent's lab for its launch (the product's recipe with the fake server as endpoint), writes
the HOME files, spawns the agent in its own process group (stderr to a file) and drives it with
the ACP SDK's client side: ``initialize`` (fs read/write offered, served inside the scratch repo
only; no terminal), ``session/new`` (cwd = the repo), ``session/prompt``; ``session/cancel``
when the scenario says (after ``timeout_s`` without an answer, or once the fake server holds a
reply open); every permission request answered with the scenario's ``answer``. Then stdin is
closed, SIGTERM to the group after the agent's grace, SIGKILL if it lingers. An SDK observer
records every JSON-RPC message both ways.

Written to ``<out>/<agent>/<version>/``:

- ``<scenario>.jsonl``: one object per line, ``{"direction": "out"|"in", "message": {…}}``
  (``out``: client → agent; ``in``: agent → client), in the order the observer saw them, with
  the scratch paths replaced by ``<repo>``, ``<home>``, ``<tmp>``, ``<workdir>``, the fake
  server's URL by ``<fake>``;
- ``<scenario>.meta.json``: argv, env names, HOME files, exit code, how it was stopped, stop
  reason or client error, stderr tail, wall time, files changed in the repo, the fake server's
  requests (summary, paths and body outlines: tool names, message roles), the namespace's
  interface list, ``synthetic: false``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from supervisor.lab.acp_agents import ACP_LABS, AcpAgentLab, AcpContext, AcpScenario, get_acp_lab
from supervisor.lab.recorder import files_changed, lab_git, request_summary
from supervisor.lab.script import Reply, Script, ToolCall
from supervisor.lab.server import FakeModelServer

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_SCRATCH",
    "SEED",
    "body_outline",
    "compare",
    "main",
    "placeholders",
    "record",
    "scrub",
    "shape",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_AGENT = "claude-acp"
KILL_GRACE_S = 3.0
CANCEL_GRACE_S = 15.0
LATE_NOTIFICATIONS_S = 0.5
STDERR_TAIL_BYTES = 4096
DEFAULT_SCRATCH = Path(tempfile.gettempdir()) / "asup-acp-lab"

SEED: dict[str, str] = {
    "README.md": "# greeter\n\nA tiny module that greets.\n",
    "src/app.py": "def greet(name: str) -> str:\n    return 'hello ' + name\n",
}
# -- outside the namespace ------------------------------------------------------------------


def make_workdir(workdir: Path) -> None:
    repo = workdir / "repo"
    for d in (repo, workdir / "home", workdir / "tmp"):
        d.mkdir(parents=True)
    for rel, text in SEED.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    lab_git(repo, "init", "-q", "-b", "main")
    lab_git(repo, "add", "-A")
    lab_git(repo, "commit", "-q", "-m", "lab seed")


def _unshare_argv(job_file: Path) -> list[str]:
    prefix = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "-r", "--net"]
    module = "supervisor.lab.acp_record"
    return [*prefix, "--", sys.executable, "-m", module, "--inside", str(job_file)]


def placeholders(workdir: Path, lab: AcpAgentLab, base_url: str | None) -> dict[str, str]:
    """Real value → placeholder, longest first (so ``<repo>`` wins over ``<workdir>``)."""
    subs = {
        str(workdir / "repo"): "<repo>",
        str(workdir / "home"): "<home>",
        str(workdir / "tmp"): "<tmp>",
        str(workdir): "<workdir>",
        **lab.placeholders(),
    }
    if base_url:
        subs[base_url] = "<fake>"
    return dict(sorted(subs.items(), key=lambda kv: -len(kv[0])))


def scrub(value: Any, subs: dict[str, str]) -> Any:
    if isinstance(value, str):
        for real, name in subs.items():
            value = value.replace(real, name)
        return value
    if isinstance(value, list):
        return [scrub(v, subs) for v in value]
    if isinstance(value, dict):
        return {scrub(k, subs): scrub(v, subs) for k, v in value.items()}
    return value


def _tool_names(tools: object) -> list[str]:
    """Tool names of any wire: Anthropic / Responses ``name``, Chat ``function.name``, Gemini
    ``functionDeclarations[].name``."""
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function")
        name = tool.get("name") or (fn.get("name") if isinstance(fn, dict) else None)
        if isinstance(name, str):
            names.append(name)
        for decl in tool.get("functionDeclarations") or ():
            if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                names.append(decl["name"])
    return names


def body_outline(request: dict[str, Any]) -> dict[str, Any]:
    """What one model request asked for, without the long parts (system prompt, tool schemas,
    history): the keys, the model, the stream options, tool names, message roles / item types."""
    body = request.get("body")
    entry: dict[str, Any] = {
        "n": request["n"],
        "method": request["method"],
        "path": request["path"],
        "lane": request.get("lane"),
        "headers": request.get("headers"),
    }
    if isinstance(body, dict):
        entry["keys"] = sorted(body)
        entry["model"] = body.get("model")
        entry["stream_options"] = body.get("stream_options")
        if "tools" in body:
            entry["tools"] = _tool_names(body["tools"])
        for key in ("messages", "input", "contents"):
            items = body.get(key)
            if isinstance(items, list):
                entry["roles"] = [
                    i.get("role") or i.get("type") for i in items if isinstance(i, dict)
                ]
    return entry


def _as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def shape(records: list[dict[str, Any]]) -> list[str]:
    """A transcript without its volatile values (ids, texts, timings, paths, ports): one entry
    per run of equal steps, each ``<direction> <what>`` — the method of a request or
    notification, the ``sessionUpdate`` kind (with the tool call status), the stop reason of a
    result, the code of an error. Two recordings of one scenario should have the same shape."""
    steps: list[str] = []
    for rec in records:
        msg = _as_dict(rec.get("message"))
        what: str
        if isinstance(msg.get("method"), str):
            update = _as_dict(_as_dict(msg.get("params")).get("update")) or None
            if msg["method"] == "session/update" and update is not None:
                what = f"update {update.get('sessionUpdate')}"
                if update.get("status") is not None:
                    what += f" {update.get('status')}"
            else:
                what = f"{'request' if 'id' in msg else 'notification'} {msg['method']}"
        elif "error" in msg:
            error = _as_dict(msg["error"])
            what = f"error {error.get('code')}"
        else:
            result = msg.get("result")
            what = "result"
            if isinstance(result, dict) and "stopReason" in result:
                what += f" stopReason={result['stopReason']}"
        step = f"{rec.get('direction')} {what}"
        if not steps or steps[-1] != step:
            steps.append(step)
    return steps


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compare(lab: AcpAgentLab, name: str, recorded: Path, reference: Path) -> list[str]:
    """The difference between two recordings of one scenario, modulo volatile values: the
    transcript shapes (:func:`shape`) as a unified diff, then the meta's stop reason, whether a
    client error happened, the files changed and the model requests (path, count, statuses).
    Empty when they agree."""
    rel = Path(lab.agent_id) / lab.version
    new_lines = shape(read_records(recorded / rel / f"{name}.jsonl"))
    old_lines = shape(read_records(reference / rel / f"{name}.jsonl"))
    out = list(difflib.unified_diff(old_lines, new_lines, "reference", "recorded", lineterm=""))
    new_meta = json.loads((recorded / rel / f"{name}.meta.json").read_text())
    old_meta = json.loads((reference / rel / f"{name}.meta.json").read_text())

    def facts(meta: dict[str, Any]) -> dict[str, Any]:
        return {
            "stop_reason": meta.get("stop_reason"),
            "client_error": meta.get("client_error") is not None,
            "files_changed": meta.get("files_changed"),
            "requests": [
                (r["method"], r["path"], r["count"], r["statuses"])
                for r in meta.get("requests", ())
            ],
        }

    old_facts, new_facts = facts(old_meta), facts(new_meta)
    out += [
        f"meta {k}: reference {old_facts[k]!r}, recorded {new_facts[k]!r}"
        for k in old_facts
        if old_facts[k] != new_facts[k]
    ]
    return out


def record(lab: AcpAgentLab, name: str, out: Path, scratch: Path) -> Path:
    """Run one scenario in ``scratch/<agent>/<name>`` (replaced) and write its fixtures."""
    if not lab.installed():
        raise RuntimeError(f"{lab.binary} is missing (run {lab.install_hint})")
    scenario = lab.scenarios[name]
    workdir = (scratch / lab.agent_id / name).resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    make_workdir(workdir)
    job_file = workdir / "job.json"
    job = {"agent": lab.agent_id, "scenario": name, "workdir": str(workdir)}
    job_file.write_text(json.dumps(job))
    proc = subprocess.run(
        _unshare_argv(job_file),
        capture_output=True,
        timeout=scenario.timeout_s + CANCEL_GRACE_S + 90,
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
    subs = placeholders(workdir, lab, result["base_url"])
    target = out / lab.agent_id / lab.version
    target.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(scrub(m, subs), ensure_ascii=False) for m in result["messages"]]
    (target / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines))
    stderr = (workdir / "agent.stderr").read_bytes()[-STDERR_TAIL_BYTES:]
    requests = result["requests"]
    meta = {
        "agent": lab.agent_id,
        "vendor_version": lab.version,
        "scenario": name,
        "description": scenario.description,
        "synthetic": False,
        "transport": "acp-stdio",
        "mode": scenario.mode.value,
        "permission_answer": scenario.answer,
        "argv": scrub(result["argv"], subs),
        "env_names": result["env_names"],
        "home_files": scrub(result["home_files"], subs),
        "exit_code": result["exit_code"],
        "killed_by": result["killed_by"],
        "wall_time_s": result["wall_time_s"],
        "stop_reason": result["stop_reason"],
        "client_error": scrub(result["client_error"], subs),
        "cancelled_after_s": result["cancelled_after_s"],
        "stderr_tail": scrub(stderr.decode("utf-8", "replace"), subs),
        "files_changed": files_changed(workdir / "repo"),
        "requests": request_summary(requests),
        "request_paths": sorted({scrub(r["path"], subs) for r in requests}),
        "request_bodies": scrub([body_outline(r) for r in requests], subs),
        "netns_links": result["netns_links"],
    }
    meta_file = target / f"{name}.meta.json"
    meta_file.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return meta_file


# -- inside the namespace -------------------------------------------------------------------


def bind_replies(replies: tuple[Reply, ...], repo: str) -> list[Reply]:
    """The replies with ``<repo>`` bound in tool inputs (JSON inputs and custom input text)."""
    out: list[Reply] = []
    for r in replies:
        blocks = tuple(
            dataclasses.replace(
                b,
                input=b.input.replace("<repo>", repo)
                if isinstance(b.input, str)
                else json.loads(json.dumps(b.input).replace("<repo>", repo)),
            )
            if isinstance(b, ToolCall)
            else b
            for b in r.blocks
        )
        out.append(dataclasses.replace(r, blocks=blocks))
    return out


def choose_option(options: list[Any], answer: str) -> str | None:
    """The option id the lab answers with (None: answer ``cancelled``). ``allow``: the
    ``allow_once`` option, else ``allow_always``; ``reject``: ``reject_once``, else
    ``reject_always``. ``options`` are the SDK's ``PermissionOption`` values."""
    kinds = (
        ("allow_once", "allow_always") if answer == "allow" else ("reject_once", "reject_always")
    )
    for kind in kinds:
        for opt in options:
            if opt.kind == kind:
                return str(opt.option_id)
    return None


class _LabClient:
    """The client side: answers fs requests inside the repo only (a missing file reads as
    empty), and every permission request with the scenario's answer."""

    def __init__(self, repo: Path, answer: str) -> None:
        self.repo = repo.resolve()
        self.answer = answer

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

        option = choose_option(options, self.answer)
        if option is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=option, outcome="selected")
        )

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


async def _cancel_when_due(
    scenario: AcpScenario, held: Callable[[], bool], cancel: Callable[[], Awaitable[None]]
) -> None:
    """Send ``session/cancel`` when the scenario says: once the fake server holds a reply open
    (plus ``cancel_delay_s``), or after ``timeout_s``. Cancelled when the prompt answers first."""
    deadline = time.monotonic() + scenario.timeout_s
    while time.monotonic() < deadline:
        if scenario.cancel == "hold" and held():
            await asyncio.sleep(scenario.cancel_delay_s)  # the agent is mid-turn
            break
        await asyncio.sleep(0.1)
    await cancel()


async def _stop(proc: asyncio.subprocess.Process, stdin_grace: float) -> tuple[int, str]:
    """Close stdin; SIGTERM to the group after ``stdin_grace``; SIGKILL after KILL_GRACE_S."""
    assert proc.stdin is not None
    with contextlib.suppress(Exception):
        proc.stdin.close()
    with contextlib.suppress(TimeoutError):
        return await asyncio.wait_for(proc.wait(), stdin_grace), "stdin-close"
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
    return code, killed_by


async def _drive(
    lab: AcpAgentLab,
    ctx: AcpContext,
    argv: list[str],
    env: dict[str, str],
    messages: list[dict[str, Any]],
    held: Callable[[], bool],
) -> dict[str, Any]:
    import acp
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    scenario = ctx.scenario
    start = time.monotonic()
    with (ctx.workdir / "agent.stderr").open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            cwd=ctx.repo,
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
    client = cast("acp.Client", _LabClient(ctx.repo, scenario.answer))
    conn = acp.connect_to_agent(client, proc.stdin, proc.stdout, observers=[observe])
    stop_reason: str | None = None
    client_error: str | None = None
    cancelled_after: float | None = None
    try:
        async with asyncio.timeout(scenario.timeout_s + CANCEL_GRACE_S + 30):
            await conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=False,
                ),
                client_info=Implementation(name="asup-lab", version="0"),
            )
            session = await conn.new_session(cwd=str(ctx.repo), mcp_servers=[])

            async def cancel() -> None:
                nonlocal cancelled_after
                cancelled_after = round(time.monotonic() - start, 3)
                await conn.cancel(session_id=session.session_id)

            watcher = asyncio.ensure_future(_cancel_when_due(scenario, held, cancel))
            try:
                # awaited here, not in a task: the request goes out before anything the agent
                # sent after session/new is handled (as a client that prompts at once)
                resp = await conn.prompt(
                    session_id=session.session_id, prompt=[acp.text_block(scenario.prompt)]
                )
            finally:
                watcher.cancel()
            stop_reason = resp.stop_reason
    except Exception as exc:  # the agent's JSON-RPC error is recorded; keep the reason too
        client_error = f"{type(exc).__name__}: {exc}"
    await asyncio.sleep(LATE_NOTIFICATIONS_S)
    code, killed_by = await _stop(proc, lab.stdin_close_grace_s)
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
    lab = get_acp_lab(job["agent"])
    scenario = lab.scenarios[job["scenario"]]
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    script = Script(bind_replies(scenario.replies, str(workdir / "repo")))
    messages: list[dict[str, Any]] = []
    with FakeModelServer(script, log_path=workdir / "server.jsonl") as server:
        ctx = AcpContext(scenario, workdir, server.base_url)
        launch = lab.launch(ctx, path=os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
        for rel, content in launch.home_files.items():
            path = ctx.home / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)

        def held() -> bool:
            return any((r.fault or "").startswith("hold") for r in server.requests)

        result = asyncio.run(_drive(lab, ctx, launch.argv, launch.env, messages, held))
        requests = [r.to_dict() for r in server.requests]
    result.update(
        {
            "env_names": sorted(launch.env),
            "home_files": launch.home_files,
            "base_url": server.base_url,
            "netns_links": [ln for ln in links.stdout.splitlines() if ln.strip()],
            "messages": messages,
            "requests": requests,
        }
    )
    (workdir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def main(
    argv: list[str] | None = None, *, prog: str = "python -m supervisor.lab.acp_record"
) -> int:
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--agent", choices=sorted(ACP_LABS), default=DEFAULT_AGENT)
    parser.add_argument("--scenario", action="append", help="default: every scenario")
    parser.add_argument("--out", type=Path, default=Path("fixtures/external"))
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH)
    parser.add_argument("--keep", action="store_true", help="keep the work dirs afterwards")
    parser.add_argument("--list", action="store_true", help="list the agent's scenarios")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="REF",
        help="after recording, compare each scenario with the recording under REF (e.g. "
        "fixtures/external) modulo volatile values; exit 1 on a difference",
    )
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside is not None:
        return _inside(args.inside)
    lab = get_acp_lab(args.agent)
    if args.list:
        for name, scenario in sorted(lab.scenarios.items()):
            print(f"{name}: {scenario.description}")
        return 0
    unknown = sorted(set(args.scenario or ()) - set(lab.scenarios))
    if unknown:
        parser.error(f"{args.agent} has no scenario {', '.join(unknown)}")
    failures = 0
    for name in args.scenario or sorted(lab.scenarios):
        try:
            meta_file = record(lab, name, args.out, args.scratch)
        except (RuntimeError, subprocess.SubprocessError) as exc:
            failures += 1
            print(f"{args.agent}/{name}: FAILED: {exc}", file=sys.stderr)
            continue
        finally:
            if not args.keep:
                shutil.rmtree(args.scratch / lab.agent_id / name, ignore_errors=True)
        meta = json.loads(meta_file.read_text())
        print(
            f"{args.agent}/{name}: stop_reason={meta['stop_reason']} "
            f"error={meta['client_error']} exit={meta['exit_code']} ({meta['killed_by']}) "
            f"{meta['wall_time_s']} s → {meta_file}"
        )
        if args.compare is not None:
            diff = compare(lab, name, args.out, args.compare)
            print(f"  compared with {args.compare}: " + ("same" if not diff else "DIFFERENT"))
            for line in diff:
                print(f"    {line}")
            failures += bool(diff)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
