"""Running an ACP agent as a supervised child, on the official SDK (agent-client-protocol).

::

    argv (bwrap … agent) ─▶ own process group, stdin/stdout pipes, stderr drained to a tail
                         ─▶ connect_to_agent(client, stdin, stdout, observers=[observe])
    observe: every JSON-RPC message, both ways ─▶ transcript line + AcpFold ─▶ RunEvents
    initialize (fs read/write, no terminal) ─▶ session/new (cwd = worktree, no MCP servers)
                         ─▶ session/prompt ─▶ stop reason | JSON-RPC error | budget/cancel
    budget, silence (max_idle) or cancel ─▶ session/cancel, a grace for the prompt to answer
    shutdown: close stdin, a short wait, SIGTERM the group, grace, SIGKILL the group
    sweep: every other process of the run still alive (process.ProcessWatch: descendants
           snapshotted while it ran, its session, the run's cookie, adopted daemons) TERMed,
           then frozen and killed; named in ChildResult.survivors_killed

The supervisor serves, inside the worktree only (:func:`resolve_in_worktree`):
``fs/read_text_file`` (a missing file inside reads as empty, as gemini needs) and
``fs/write_text_file``; each goes through the permission gate as a read or write action, and a
refusal is a JSON-RPC error plus a ``PermissionDenied`` naming the path. No ``terminal/*``: the
capability is not offered. ``session/request_permission`` goes through
:mod:`supervisor.policy` (:func:`action_for_tool_call` maps the ACP tool kind onto a risk
class); an ask goes to the run's approver (:mod:`supervisor.approval`), and with none it is a
deny; an allow is answered with the agent's ``allow_once`` option, never ``allow_always``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import posixpath
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

from supervisor import __version__
from supervisor.acp.fold import AcpFold, Direction, outcome_for_stop_reason
from supervisor.approval import Answer, ApprovalRequest, Approver
from supervisor.events import (
    ErrorReported,
    FailureKind,
    Outcome,
    OutcomeStatus,
    PermissionDenied,
    RunEvent,
    SeqCounter,
    WarningRaised,
)
from supervisor.policy import (
    DEFAULT_POLICY,
    Action,
    Approvals,
    DecidedBy,
    Decision,
    FinalDecision,
    PermissionOption,
    PermissionOptionKind,
    Policy,
    RiskClass,
    Rule,
    answer_option,
    authorise,
    evaluate,
    resolve_ask,
)
from supervisor.probe import Probe, probe_agent
from supervisor.process import (
    POLL_INTERVAL,
    ChildResult,
    ChildSpawnError,
    KilledProcess,
    ProcessWatch,
)
from supervisor.registry import AgentSpec, Mode

__all__ = [
    "KIND_RISK",
    "AcpRun",
    "OutsideWorktree",
    "SupervisorClient",
    "action_for_tool_call",
    "probe_acp_agent",
    "resolve_in_worktree",
    "run_acp_agent",
    "run_policy",
]

STDIN_CLOSE_WAIT_S = 0.5
KILL_WAIT_S = 2.0
LATE_ANSWER_S = 1.0
STREAM_LIMIT = 64 * 1024 * 1024

# ACP ToolKind → risk class. Unknown or vague kinds fail closed as destructive (asked, so
# denied headless).
KIND_RISK: Mapping[str, RiskClass] = {
    "read": RiskClass.READ,
    "search": RiskClass.READ,
    "edit": RiskClass.WRITE,
    "move": RiskClass.WRITE,
    "delete": RiskClass.DESTRUCTIVE,
    "execute": RiskClass.SHELL,
    "fetch": RiskClass.NETWORK,
}

# A path outside the worktree, as supervisor.policy writes targets: absolute or with `..`.
_OUTSIDE = ("/*", "~*", "..", "../*", "*/..", "*/../*")


def run_policy(mode: Mode, extra: Policy | None = None) -> Policy:
    """The policy of one ACP run, in layers: the defaults; for a write run, a layer that allows
    writes inside the worktree (``--write`` is the person's yes to that) and still denies any
    outside; then ``extra`` — the user's config and the run's own rules, in that order — whose
    rules win as the last match. The hard denies (git metadata, credentials) stay terminal
    whatever a later layer says."""
    layers = [DEFAULT_POLICY]
    if mode is Mode.WORKTREE_WRITE:
        layers.append(
            Policy(
                rules=(
                    Rule(risk=RiskClass.WRITE, pattern="*", decision=Decision.ALLOW),
                    *(
                        Rule(risk=RiskClass.WRITE, pattern=p, decision=Decision.DENY)
                        for p in _OUTSIDE
                    ),
                )
            )
        )
    if extra is not None:
        layers.append(extra)
    return Policy.layered(*layers)


# -- the worktree boundary ------------------------------------------------------------------


class OutsideWorktree(ValueError):
    """A path the supervisor will not serve: outside the worktree or in its git metadata."""


def resolve_in_worktree(root: Path, path: str) -> tuple[Path, str]:
    """``path`` (absolute, or relative to ``root``) resolved inside the worktree: the real
    path and the path relative to the worktree's real root. Raises :class:`OutsideWorktree`
    for a ``..`` component, a path outside, a symlink that leads out, or git metadata."""
    if not path or "\0" in path:
        raise OutsideWorktree(f"{path!r} is not a path")
    parts = path.split("/")
    if ".." in parts:
        raise OutsideWorktree(f"{path} has a '..' component")
    real_root = Path(os.path.realpath(root))
    joined = path if posixpath.isabs(path) else posixpath.join(str(root), path)
    real = Path(os.path.realpath(joined))
    if real != real_root and real_root not in real.parents:
        raise OutsideWorktree(f"{path} is outside the worktree")
    rel = real.relative_to(real_root).as_posix() if real != real_root else "."
    if ".git" in rel.split("/") or ".git" in parts:
        raise OutsideWorktree(f"{path} is git metadata")
    return real, rel


# -- the permission gate --------------------------------------------------------------------


def _target_path(path: str, root: Path) -> str:
    """A path as a policy target: relative to the worktree when inside it, else absolute."""
    try:
        return resolve_in_worktree(root, path)[1]
    except OutsideWorktree:
        if posixpath.isabs(path):
            return os.path.realpath(path)
        return path


def _command_line(raw: object) -> str | None:
    if isinstance(raw, dict):
        for key in ("command", "cmd"):
            value = raw.get(key)
            if isinstance(value, list):
                return " ".join(str(v) for v in value)
            if isinstance(value, str):
                return value
    return None


def action_for_tool_call(call: Mapping[str, Any], *, agent: str, root: Path) -> Action:
    """The :class:`~supervisor.policy.Action` a permission request asks for. ``call`` is the
    request's tool call as JSON (camelCase keys). The risk comes from the tool kind
    (:data:`KIND_RISK`); the target is the first location (or ``rawInput`` path, or a diff's
    path) for reads and writes, the command line for a shell, the host for a fetch; a kind
    without one falls back to the tool's title."""
    kind = call.get("kind")
    risk = KIND_RISK.get(kind, RiskClass.DESTRUCTIVE) if isinstance(kind, str) else None
    raw = call.get("rawInput")
    meta = call.get("_meta")
    tool = None
    if isinstance(meta, dict) and isinstance(meta.get("claudeCode"), dict):
        name = meta["claudeCode"].get("toolName")
        tool = name if isinstance(name, str) else None
    title = call.get("title") if isinstance(call.get("title"), str) else None
    paths: list[str] = []
    for loc in call.get("locations") or ():
        if isinstance(loc, dict) and isinstance(loc.get("path"), str):
            paths.append(loc["path"])
    for item in call.get("content") or ():
        if (
            isinstance(item, dict)
            and item.get("type") == "diff"
            and isinstance(item.get("path"), str)
        ):
            paths.append(item["path"])
    if isinstance(raw, dict):
        for key in ("file_path", "path", "notebook_path"):
            if isinstance(raw.get(key), str):
                paths.append(raw[key])
    command = _command_line(raw)
    if risk is None:
        # no kind: a diff means a write, a command a shell; else fail closed
        risk = RiskClass.WRITE if paths else RiskClass.SHELL if command else RiskClass.DESTRUCTIVE
    target: str | None = None
    match risk:
        case RiskClass.READ | RiskClass.WRITE | RiskClass.DESTRUCTIVE:
            target = _target_path(paths[0], root) if paths else None
            if target is None and risk is RiskClass.DESTRUCTIVE:
                target = command
        case RiskClass.SHELL:
            target = command
        case RiskClass.NETWORK:
            url = raw.get("url") if isinstance(raw, dict) else None
            target = urlsplit(url).hostname if isinstance(url, str) else None
        case _:
            target = None
    if tool is None and title is not None:
        repeats = title in (*paths, target) or (command is not None and title in command)
        tool = None if repeats else title
    return Action(
        risk=risk,
        target=target if target is not None else (title or tool or "unknown"),
        agent=agent,
        # the agent's tool name; a title that only repeats the target (opencode titles a write
        # with its path, codex a command with its command line) says nothing more: the kind
        tool=tool or (kind if isinstance(kind, str) else None),
    )


# -- the client handlers --------------------------------------------------------------------


class SupervisorClient:
    """The ``acp.Client`` side of one run: permissions through the policy and, for an ask, the
    run's approver (none: headless, an ask is a deny); fs inside the worktree.
    ``session/update`` is folded by the connection's observer, which sees every message in
    order, so the handler here does nothing.

    Asks are put to the approver one at a time (a lock), in the order they arrive. A person's
    yes to a permission request for a read or write of one path also grants the single
    ``fs/*`` request that carries it out (gemini and opencode ask, then write through the
    client): a :class:`~supervisor.policy.Approvals` grant bound to that exact action, spent on
    first use."""

    def __init__(
        self,
        *,
        root: Path,
        agent: str,
        policy: Policy,
        seq: SeqCounter,
        emit: Callable[[RunEvent], None],
        approver: Approver | None = None,
    ) -> None:
        self.root = root
        self.agent = agent
        self.policy = policy
        self.seq = seq
        self.emit = emit
        self.approver = approver
        self.approvals = Approvals()
        self.decisions: list[FinalDecision] = []
        self._asking = asyncio.Lock()
        self._stopped = asyncio.Event()

    @property
    def asking(self) -> bool:
        """A question is open to the person right now."""
        return self._asking.locked()

    def stop(self) -> None:
        """The run is ending (cancel, budget, shutdown): a question still open is withdrawn and
        answered as a deny; permission requests from now on are answered ``cancelled``."""
        self._stopped.set()

    async def _ask(self, request: ApprovalRequest) -> Answer:
        assert self.approver is not None
        async with self._asking:
            if self._stopped.is_set():
                return None
            asking = asyncio.ensure_future(self.approver.ask(request))
            stopping = asyncio.ensure_future(self._stopped.wait())
            try:
                await asyncio.wait({asking, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
                if not asking.done():
                    asking.cancel()
                    with contextlib.suppress(BaseException):
                        await asking
            if asking.cancelled():
                return None
            error = asking.exception()
            if error is not None:
                self.emit(
                    WarningRaised(
                        self.seq(),
                        f"the approver failed ({error!r}); the ask is denied",
                        "approver_failed",
                    )
                )
                return None
            return asking.result()

    async def _decide(
        self,
        action: Action,
        options: Sequence[PermissionOption] = (),
        title: str | None = None,
    ) -> FinalDecision:
        verdict = evaluate(self.policy, action)
        final, self.approvals = authorise(verdict, self.approvals)
        if final is None:
            answer: Answer = None
            if self.approver is not None:
                answer = await self._ask(ApprovalRequest(verdict, tuple(options), title))
            final = resolve_ask(verdict, approver_live=self.approver is not None, approved=answer)
        self.decisions.append(final)
        self.emit(WarningRaised(self.seq(), final.reason, f"policy_{final.decision}"))
        return final

    def _refuse(self, method: str, path: str, reason: str) -> acp.RequestError:
        self.emit(PermissionDenied(self.seq(), method, None, path, reason))
        return acp.RequestError.invalid_params({"path": path, "reason": reason})

    def _confine(self, method: str, path: str) -> tuple[Path, str]:
        try:
            return resolve_in_worktree(self.root, path)
        except OutsideWorktree as exc:
            raise self._refuse(method, path, str(exc)) from None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        call = tool_call.model_dump(mode="json", by_alias=True, exclude_none=True)
        action = action_for_tool_call(call, agent=self.agent, root=self.root)
        ours = []
        for opt in options:
            with contextlib.suppress(ValueError):
                kind = PermissionOptionKind(str(opt.kind))
                ours.append(PermissionOption(option_id=opt.option_id, name=opt.name, kind=kind))
        title = call.get("title") if isinstance(call.get("title"), str) else None
        final = await self._decide(action, ours, title)
        if final.allowed and final.decided_by is DecidedBy.APPROVER:
            self._grant_follow_up(action)
        chosen = answer_option(ours, final)
        if chosen is None or self._stopped.is_set():
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=chosen.option_id, outcome="selected")
        )

    def _grant_follow_up(self, action: Action) -> None:
        """The person allowed ``action``: grant the one fs request that would carry it out."""
        method = {RiskClass.READ: "fs/read_text_file", RiskClass.WRITE: "fs/write_text_file"}
        tool = method.get(action.risk)
        if tool is not None:
            follow = Action(risk=action.risk, target=action.target, agent=self.agent, tool=tool)
            self.approvals = self.approvals.grant(follow)

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        real, rel = self._confine("fs/read_text_file", path)
        final = await self._decide(
            Action(risk=RiskClass.READ, target=rel, agent=self.agent, tool="fs/read_text_file"),
            title=f"read {rel}",
        )
        if not final.allowed:
            raise self._refuse("fs/read_text_file", path, final.reason)
        try:
            text = real.read_text(encoding="utf-8", errors="replace") if real.is_file() else ""
        except OSError as exc:
            raise acp.RequestError.internal_error({"path": path, "reason": str(exc)}) from None
        if line is not None or limit is not None:
            rows = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(rows[start : start + limit if limit is not None else None])
        return ReadTextFileResponse(content=text)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        real, rel = self._confine("fs/write_text_file", path)
        final = await self._decide(
            Action(risk=RiskClass.WRITE, target=rel, agent=self.agent, tool="fs/write_text_file"),
            title=f"write {rel} ({len(content.encode('utf-8'))} bytes)",
        )
        if not final.allowed:
            raise self._refuse("fs/write_text_file", path, final.reason)
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
            # the parents just made are inside: re-check that nothing swapped a link in
            resolve_in_worktree(self.root, str(real))
            real.write_text(content, encoding="utf-8")
        except OutsideWorktree as exc:
            raise self._refuse("fs/write_text_file", path, str(exc)) from None
        except OSError as exc:
            raise acp.RequestError.internal_error({"path": path, "reason": str(exc)}) from None
        return WriteTextFileResponse()


# -- the probe --------------------------------------------------------------------------------


def probe_acp_agent(agent: AgentSpec, host_env: Mapping[str, str]) -> Probe:
    """Installed and which version, for an ACP agent (see :func:`supervisor.probe.probe_agent`,
    which reads it from the agent's npm package: neither has a ``--version``)."""
    return probe_agent(agent, host_env)


# -- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AcpRun:
    outcome: Outcome
    child: ChildResult
    stop_reason: str | None


def _error_outcome(error: ErrorReported | None, exc: BaseException) -> Outcome:
    if error is not None:
        if error.usage_limited:
            return Outcome(OutcomeStatus.USAGE_LIMITED, None, error.message)
        return Outcome.failed(error.kind, error.message)
    return Outcome.failed(FailureKind.PROTOCOL, f"the ACP connection failed: {exc}")


async def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def run_acp_agent(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    prompt: str,
    client: SupervisorClient,
    fold: AcpFold,
    on_transcript: Callable[[bytes], None],
    max_runtime: float | None = None,
    max_idle: float | None = None,
    grace: float = 5.0,
    cancel: Any = None,
    stderr_tail_bytes: int = 16384,
) -> AcpRun:
    """Run one prompt against the agent started by ``argv`` and end it (module docstring).
    ``cancel`` is an event with ``wait()`` (anyio or asyncio). ``max_idle``: end the run as
    timed out when the agent sends nothing for that many seconds, while no question is open to
    the person (an agent that retries a failing model API silently never ends by itself)."""
    started = time.monotonic()
    last_heard = [started]
    watch = ProcessWatch()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=watch.env(env),
            start_new_session=True,
            limit=STREAM_LIMIT,
        )
    except OSError as exc:
        raise ChildSpawnError(
            f"could not start {argv[0]!r} in {str(cwd)!r}: {exc.strerror or exc}; "
            "check that the program is installed and the directory exists"
        ) from exc
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    tail = bytearray()
    first_byte: list[float] = []
    last_error: list[ErrorReported] = []

    async def drain(stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            tail.extend(chunk)
            if len(tail) > stderr_tail_bytes:
                del tail[: len(tail) - stderr_tail_bytes]

    def observe(event: Any) -> None:
        direction: Direction = "out" if event.direction.value == "outgoing" else "in"
        if direction == "in":
            last_heard[0] = time.monotonic()
            if not first_byte:
                first_byte.append(last_heard[0] - started)
        record = {"direction": direction, "message": event.message}
        on_transcript((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        for ev in fold.feed(event.message, direction):
            if isinstance(ev, ErrorReported):
                last_error.append(ev)
            client.emit(ev)

    watch.started(proc.pid)

    async def snapshots() -> None:
        while True:
            await asyncio.to_thread(watch.poll)
            await asyncio.sleep(POLL_INTERVAL)

    poller = asyncio.ensure_future(snapshots())
    drainer = asyncio.ensure_future(drain(proc.stderr))
    conn = acp.connect_to_agent(
        cast("acp.Client", client), proc.stdin, proc.stdout, observers=[observe]
    )
    session: list[str] = []

    async def converse() -> Any:
        await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=False,
            ),
            client_info=Implementation(name="agent-supervisor", version=__version__),
        )
        new = await conn.new_session(cwd=str(cwd), mcp_servers=[])
        session.append(new.session_id)
        return await conn.prompt(session_id=new.session_id, prompt=[acp.text_block(prompt)])

    talk = asyncio.ensure_future(converse())
    exited = asyncio.ensure_future(proc.wait())
    waits: set[asyncio.Future[Any]] = {talk, exited}
    canceled_by: asyncio.Future[Any] | None = None
    if cancel is not None:
        canceled_by = asyncio.ensure_future(cancel.wait())
        waits.add(canceled_by)
    timed_out = canceled = False
    outcome: Outcome | None = None
    stop_reason: str | None = None
    budget_reason = f"the run exceeded {max_runtime} s"
    try:
        done: set[asyncio.Future[Any]] = set()
        while not done:
            now = time.monotonic()
            waits_for = [1.0]
            if max_runtime is not None:
                if now - started >= max_runtime:
                    break
                waits_for.append(max_runtime - (now - started))
            if max_idle is not None:
                if client.asking:
                    last_heard[0] = now  # the person's time to answer is not the agent's
                elif now - last_heard[0] >= max_idle:
                    budget_reason = (
                        f"the agent sent nothing for {max_idle:g} s (--max-idle); it may be "
                        "retrying a failing model API"
                    )
                    break
            done, _ = await asyncio.wait(
                waits, timeout=min(waits_for), return_when=asyncio.FIRST_COMPLETED
            )
        if talk not in done and exited in done:
            # the answer may still be in the pipe
            await asyncio.wait({talk}, timeout=LATE_ANSWER_S)
        if talk.done():
            pass
        elif exited.done():
            outcome = Outcome.failed(
                FailureKind.PROTOCOL,
                f"the agent exited (status {proc.returncode}) before it answered the prompt",
            )
        else:
            timed_out = canceled_by is None or canceled_by not in done
            canceled = not timed_out
            client.stop()
            if session:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.cancel(session_id=session[0]), 2.0)
            await asyncio.wait({talk}, timeout=grace)
            outcome = (
                Outcome(OutcomeStatus.TIMED_OUT, None, budget_reason)
                if timed_out
                else Outcome(OutcomeStatus.CANCELED, None, "the run was canceled")
            )
        if outcome is None:
            error = talk.exception()
            if error is None:
                stop_reason = str(talk.result().stop_reason)
                outcome = outcome_for_stop_reason(stop_reason)
                denied = [d for d in client.decisions if not d.allowed]
                if stop_reason == "cancelled" and denied:
                    # asup did not cancel (that is handled above): the agent ended its turn
                    # because a request was refused (codex's "abort" option does this)
                    outcome = Outcome(
                        OutcomeStatus.DENIED,
                        None,
                        "the agent ended its turn when asup refused "
                        f"{denied[-1].action.describe()}",
                    )
            else:
                outcome = _error_outcome(last_error[-1] if last_error else None, error)
    finally:
        client.stop()
        with contextlib.suppress(BaseException):
            await asyncio.shield(_shutdown(proc, grace, watch))
        poller.cancel()
        survivors: tuple[KilledProcess, ...] = ()
        left: tuple[KilledProcess, ...] = ()
        with contextlib.suppress(BaseException):
            survivors, left = await asyncio.shield(asyncio.to_thread(watch.sweep, grace))
        for fut in (talk, exited, canceled_by):
            if fut is not None and not fut.done():
                fut.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(conn.close(), KILL_WAIT_S)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(drainer, 1.0)
        if not drainer.done():
            drainer.cancel()
        if talk.done() and not talk.cancelled():
            talk.exception()  # retrieved: no "never retrieved" warning
    for ev in fold.close():
        client.emit(ev)
    code = proc.returncode
    child = ChildResult(
        pid=proc.pid,
        exit_code=code if code is not None and code >= 0 else None,
        signal=-code if code is not None and code < 0 else None,
        timed_out=timed_out,
        canceled=canceled,
        stderr_tail=bytes(tail).decode("utf-8", "replace"),
        wall_time_s=time.monotonic() - started,
        first_byte_s=first_byte[0] if first_byte else None,
        survivors_killed=survivors,
        survivors_left=left,
    )
    return AcpRun(outcome, child, stop_reason)


async def _shutdown(proc: asyncio.subprocess.Process, grace: float, watch: ProcessWatch) -> None:
    """Close stdin, a short wait; SIGTERM the group and every known process of the run,
    ``grace``; SIGKILL the same (the sandbox's init runs in a session of its own, so the group
    signal alone misses it and it would linger until --die-with-parent ends it)."""
    if proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    if proc.returncode is None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), min(STDIN_CLOSE_WAIT_S, grace))
    if proc.returncode is None:
        await _signal_group(proc.pid, signal.SIGTERM)
        await asyncio.to_thread(watch.signal_known, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
    await _signal_group(proc.pid, signal.SIGKILL)  # whatever of the group is left
    if proc.returncode is None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), KILL_WAIT_S)
