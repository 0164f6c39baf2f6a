"""One supervised run, from a request to a finished record: the supervisor's main path.

::

    RunRequest ─▶ refusals: nested run, gates (CI first), agent installed, repository
               ─▶ leftovers of crashed runs reaped (runs marked interrupted, worktrees removed)
               ─▶ prompt: directive + task + the user's uncommitted work as a diff (cut to budget)
               ─▶ disposable worktree at HEAD (removed on every way out)
               ─▶ per-run HOME / TMPDIR, the agent's files in HOME
               ─▶ network: none | open | restricted (host proxy on a unix socket + bridge)
               ─▶ allowlisted child env ─▶ bwrap argv (pure) ─▶ supervised child
               ─▶ stdout → raw transcript + codec → events → store + on_event
               ─▶ flush, stderr events, classify → run.finished (always last)

Every event goes to ``on_event`` as it happens and to the run's ``events.jsonl``; the raw stdout
goes to ``stdout.jsonl`` as it arrives, so a later codec can decode the run again.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import MappingProxyType

import anyio
from pydantic import BaseModel, ConfigDict, Field

from supervisor import paths
from supervisor.acp.client import (
    SupervisorClient,
    probe_acp_agent,
    run_acp_agent,
    run_policy,
)
from supervisor.acp.fold import AcpFold
from supervisor.acp.recipes import acp_recipe
from supervisor.approval import Approver
from supervisor.codecs import codec_for
from supervisor.env import ChildEnv, build_child_env, check_not_nested
from supervisor.errors import Refusal, SandboxUnavailable, SupervisorError
from supervisor.events import (
    FailureKind,
    Outcome,
    OutcomeStatus,
    ReviewStaged,
    RunEvent,
    RunFinished,
    RunStarted,
    SeqCounter,
    WarningRaised,
)
from supervisor.launch import endpoint_host, plan_launch
from supervisor.policy import Policy
from supervisor.probe import PROBE_CACHE, ProbeState, probe_agent
from supervisor.process import ChildResult, run_child
from supervisor.prompt import compose_prompt, redact_dirty
from supervisor.redact import redact_patch
from supervisor.registry import AgentSpec, Mode, get_agent
from supervisor.review import DEFAULT_LIMIT_BYTES, capture, stage_review
from supervisor.sandbox.bridge import BridgeRuntime, compile_restricted_network
from supervisor.sandbox.bwrap import NetworkBridge, compile_bwrap
from supervisor.sandbox.netpolicy import NetworkPolicy, PortForward
from supervisor.sandbox.profile import (
    LauncherMissing,
    NetworkMode,
    ResolvedSandbox,
    SandboxProfile,
    load_builtin_profile,
    resolve,
)
from supervisor.sandbox.proxy import ProxyDecision, Resolver, open_proxy, system_resolver
from supervisor.store import RunRecord, RunStore
from supervisor.summary import Folder, RunSummary
from supervisor.worktree import (
    Reaped,
    Worktree,
    dirty_diff,
    disposable_worktree_async,
    open_repository,
    reap_leftovers,
)

__all__ = [
    "DIRECTIVE",
    "LaunchInfo",
    "RunReport",
    "RunRequest",
    "Sandbox",
    "dispatch_run",
    "open_sandbox",
    "tidy_up",
]

DIRECTIVE = (
    "You are working on a task handed to you by agent-supervisor. You run in a disposable git "
    "worktree checked out at the user's HEAD commit, inside a sandbox. Work only inside the "
    "current directory. Do not commit, push or change git state. When you are done, answer "
    "with a short summary of what you found or did."
)
FORWARD_NAME = "endpoint"


class RunRequest(BaseModel):
    """What the caller asks for. ``network`` None takes the profile's mode; ``endpoint`` points
    the agent at another model API (its host is added to a restricted allowlist; a loopback
    URL becomes a loopback port forward)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    task: str = Field(min_length=1)
    repo: Path
    mode: Mode = Mode.READ_ONLY
    network: NetworkMode | None = None
    allowed_domains: tuple[str, ...] = ()
    endpoint: str | None = None
    model: str | None = None
    max_runtime_s: float | None = Field(default=None, gt=0)
    # ACP agents: end the run when the agent sends nothing for this long (no open question)
    max_idle_s: float | None = Field(default=None, gt=0)
    max_turns: int | None = Field(default=None, gt=0)
    prompt_budget_bytes: int = Field(default=200_000, gt=0)
    review_limit_bytes: int = Field(default=DEFAULT_LIMIT_BYTES, gt=0)
    grace_s: float = Field(default=5.0, ge=0)
    # Permission rules over the defaults for ACP agents' requests: the user's config layer,
    # then the run's own options (supervisor.policy.Policy.layered).
    policy: Policy = Policy()


@dataclass(frozen=True, slots=True)
class LaunchInfo:
    """What is about to run, told before the child starts (for live views)."""

    run_id: str
    agent: str
    vendor_version: str | None
    profile: str
    network: NetworkMode
    worktree: str
    argv: list[str]  # the whole launch: bwrap, its options, the child's argv
    child_argv: list[str]  # the vendor CLI's own argv
    shell: str = ""  # a copy-pasteable form: `env -i NAME=… bwrap …`, the key by reference


def shell_form(argv: list[str], env: Mapping[str, str], secret: str | None) -> str:
    """``env -i`` with the child's environment, then the argv. The signing key appears as a
    reference to the variable of the same name in the pasting shell, never as its value."""
    assignments = [
        f'{name}="${name}"' if name == secret else f"{name}={shlex.quote(value)}"
        for name, value in sorted(env.items())
    ]
    return " ".join(["env", "-i", *assignments, shlex.join(argv)])


@dataclass
class RunReport:
    """How a run went. ``argv`` is the exact launch argv (bwrap and all)."""

    record: RunRecord
    outcome: Outcome
    summary: RunSummary
    argv: list[str]
    child_argv: list[str]
    worktree: str
    vendor_version: str | None
    profile: str
    network: NetworkMode
    child: ChildResult | None
    proxy_decisions: list[ProxyDecision] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Tidied:
    interrupted: list[RunRecord]
    reaped: list[Reaped]


def tidy_up(state_dir: Path) -> Tidied:
    """What a crashed supervisor left: its runs become ``interrupted`` (outcome unknown, never
    re-run) and their worktrees are removed. Every asup command starts with this; its
    processes are already gone (bwrap dies with its parent, and its pid namespace with it)."""
    if not state_dir.is_dir():
        return Tidied([], [])
    with RunStore(state_dir) as store:
        interrupted = store.recover_interrupted()
    return Tidied(interrupted, reap_leftovers(state_dir))


def _agent_install_dirs(binary: str) -> list[str]:
    """The vendor CLI's install: the outermost ``node_modules`` above the resolved binary (npm
    packages resolve their platform packages from there), else the binary's own directory."""
    real = Path(os.path.realpath(binary))
    top: Path | None = None
    for parent in real.parents:
        if parent.name == "node_modules":
            top = parent
    return [str(top if top is not None else real.parent)]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.asynccontextmanager
async def _network(
    mode: NetworkMode,
    *,
    allowed: tuple[str, ...],
    denied: tuple[str, ...],
    endpoint: str | None,
    on_decision: Callable[[ProxyDecision], None],
    resolver: Resolver | None = None,
) -> AsyncIterator[tuple[NetworkBridge | None, dict[str, str]]]:
    """For ``restricted``: the host-side proxy for the run, and what the sandbox needs of it.
    ``resolver`` None is the host's resolver; tests inject a table."""
    if mode is not NetworkMode.RESTRICTED:
        yield None, {}
        return
    forwards: list[PortForward] = []
    allow = list(allowed)
    if endpoint is not None:
        host, port = endpoint_host(endpoint)
        if _is_loopback(host):
            forwards.append(PortForward(name=FORWARD_NAME, port=port))
        else:
            allow.append(host)
    policy = NetworkPolicy(allowed=tuple(allow), denied=denied, forwards=tuple(forwards))
    sock_dir = tempfile.mkdtemp(prefix="asup-net-")  # unix socket paths are short-limited
    try:
        sock = os.path.join(sock_dir, "proxy.sock")
        plan = compile_restricted_network(policy, host_socket=sock, runtime=BridgeRuntime.current())
        async with open_proxy(
            policy, sock, on_decision=on_decision, resolver=resolver or system_resolver
        ):
            yield plan.bridge, dict(plan.env)
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


async def dispatch_run(
    request: RunRequest,
    *,
    host_env: Mapping[str, str],
    on_event: Callable[[RunEvent], None] = lambda _e: None,
    on_launch: Callable[[LaunchInfo], None] = lambda _l: None,
    cancel: anyio.Event | None = None,
    state_dir: Path | None = None,
    check_gates: Callable[[Mapping[str, str], str], None] | None = None,
    approver: Approver | None = None,
) -> RunReport:
    """Run one request to its end. Refusals raise :class:`~supervisor.errors.Refusal` before
    anything is started; once the run is recorded it always ends with ``run.finished``.
    ``approver`` answers what the policy asks of the person (ACP agents); None is headless:
    every ask is a deny."""
    check_not_nested(host_env)
    if check_gates is not None:
        check_gates(host_env, request.agent)
    agent = get_agent(request.agent)
    state = state_dir if state_dir is not None else paths.state_dir(host_env)
    state.mkdir(parents=True, exist_ok=True)
    probe = (
        probe_acp_agent(agent, host_env)
        if agent.transport == "acp"
        else probe_agent(agent, host_env, cache=paths.cache_dir(host_env) / PROBE_CACHE)
    )
    if probe.state is not ProbeState.INSTALLED or probe.binary_path is None:
        raise Refusal(
            f"{agent.id} cannot run: {probe.detail or probe.state.value}; install "
            f"{agent.display_name} so that `{agent.binary}` is on PATH",
            code="agent_not_installed",
        )
    if (
        request.mode is Mode.WORKTREE_WRITE
        and agent.write_needs_recorded_version
        and probe.in_recorded_range is not True
    ):
        raise Refusal(
            f"{agent.id} {probe.version} is outside the versions asup verified its write "
            f"settings against ({agent.recorded_range.min}–{agent.recorded_range.max}); it "
            "ignores settings it does not know, so a write run could be looser than asked. "
            "Install a verified version, or run read-only",
            code="write_version_unverified",
        )
    repo = open_repository(request.repo)
    dirty, secrets = redact_dirty(dirty_diff(repo))
    prompt = compose_prompt(
        directive=DIRECTIVE,
        task=request.task,
        dirty=dirty,
        budget_bytes=request.prompt_budget_bytes,
    )
    profile = load_builtin_profile(request.mode.value)
    network = request.network or profile.network
    if network is not profile.network:
        profile = profile.model_copy(
            update={
                "network": network,
                "allowed_domains": profile.allowed_domains
                if network is NetworkMode.RESTRICTED
                else (),
                "denied_domains": profile.denied_domains
                if network is NetworkMode.RESTRICTED
                else (),
            }
        )

    await anyio.to_thread.run_sync(tidy_up, state)
    with RunStore(state) as store:
        record = store.create_run(
            agent=agent.id,
            argv=[],
            vendor_version=probe.version,
            profile=profile.name,
            network=network.value,
            repo=str(Path(repo.workdir).resolve()),
            base_commit=dirty.base_commit,
        )
        run_dir = store.run_dir(record.id)
        seq = SeqCounter()
        folder = Folder()

        def emit(ev: RunEvent) -> None:
            folder.add(ev)
            store.append_event(record.id, ev)
            on_event(ev)

        emit(RunStarted(seq(), agent.id, record.id))
        if probe.warning:
            emit(WarningRaised(seq(), probe.warning, "version_out_of_range"))
        if secrets:
            rules = ", ".join(sorted({finding.rule for _, finding in secrets}))
            where = ", ".join(sorted({path for path, _ in secrets}))
            emit(
                WarningRaised(
                    seq(),
                    f"{len(secrets)} secret(s) in your uncommitted changes were redacted from "
                    f"the prompt ({rules}; in {where})",
                    "prompt_redacted",
                )
            )
        if prompt.diff_cut:
            emit(
                WarningRaised(
                    seq(),
                    f"the uncommitted-changes diff was cut to fit the prompt budget "
                    f"({prompt.omitted_bytes} bytes of {prompt.omitted_files} file(s) left out)",
                    "diff_cut",
                )
            )
        decisions: list[ProxyDecision] = []
        child: ChildResult | None = None
        full_argv: list[str] = []
        child_argv: list[str] = []
        worktree_path = ""
        outcome: Outcome | None = None
        try:
            async with disposable_worktree_async(repo, run_id=record.id, state_dir=state) as wt:
                worktree_path = str(wt.path)
                run = _Run(
                    request,
                    wt,
                    agent,
                    probe.binary_path,
                    probe.version,
                    profile,
                    host_env,
                    run_dir,
                    store,
                    record,
                    seq,
                    folder,
                    emit,
                    on_launch,
                    cancel,
                    decisions,
                    approver,
                )
                outcome, child, full_argv, child_argv = await _run_in_worktree(run, prompt.text)
        except SupervisorError as exc:
            outcome = Outcome(
                OutcomeStatus.REFUSED if isinstance(exc, Refusal) else OutcomeStatus.FAILED,
                None if isinstance(exc, Refusal) else FailureKind.SANDBOX_UNAVAILABLE,
                str(exc),
            )
            raise
        except BaseException:
            outcome = Outcome(OutcomeStatus.CANCELED, None, "the supervisor was interrupted")
            raise
        finally:
            assert outcome is not None
            with anyio.CancelScope(shield=True):
                emit(RunFinished(seq(), outcome))
                summary = folder.summary()
                record = store.finish_run(record.id, outcome, summary)
        return RunReport(
            record,
            outcome,
            summary,
            full_argv,
            child_argv,
            worktree_path,
            probe.version,
            profile.name,
            network,
            child,
            decisions,
        )


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A run's containment, ready to launch commands: the allowlisted ``env`` the child sees,
    and :meth:`command`, the whole bwrap argv for a command. Start bwrap with
    :attr:`launcher_env` — exactly the child's environment, which bwrap hands on (no value is
    ever put in the argv)."""

    resolved: ResolvedSandbox | None  # None: unsandboxed (ASUP_ALLOW_UNSANDBOXED=1)
    env: ChildEnv
    bridge: NetworkBridge | None
    decisions: list[ProxyDecision]

    @property
    def unsandboxed(self) -> bool:
        return self.resolved is None

    def command(self, argv: list[str]) -> list[str]:
        if self.resolved is None:
            return list(argv)
        return compile_bwrap(self.resolved, argv, env=self.env.vars, bridge=self.bridge)

    @property
    def launcher_env(self) -> dict[str, str]:
        return dict(self.env.vars)


@contextlib.asynccontextmanager
async def open_sandbox(
    profile: SandboxProfile,
    *,
    agent: AgentSpec,
    worktree: Worktree,
    home: Path,
    tmpdir: Path,
    host_env: Mapping[str, str],
    install_dirs: list[str],
    extra_env: Mapping[str, str] = MappingProxyType({}),
    allowed_domains: tuple[str, ...] = (),
    endpoint: str | None = None,
    resolver: Resolver | None = None,
) -> AsyncIterator[Sandbox]:
    """The sandbox of one run around ``worktree``: resolved paths, the network (for
    ``restricted``, the host proxy for the block's lifetime) and the child's environment.
    ``resolver`` (None: the host's) is how the proxy resolves names.

    A missing launcher is a refusal, unless the user set ``ASUP_ALLOW_UNSANDBOXED=1``: then
    a run with network ``open`` goes ahead without a sandbox (the worktree, the allowlisted
    environment and the store still apply). The hatch never reaches a ``restricted`` or
    ``none`` run — only a sandbox can enforce those, and a run never gets a wider network
    than asked — nor a launcher that is there but cannot start."""
    resolved: ResolvedSandbox | None
    try:
        resolved = resolve(
            profile,
            worktree=worktree.path,
            git_dir=worktree.common_dir,
            git_paths=worktree.git_paths(),
            git_config=worktree.write_git_config(worktree.run_dir / "git-config"),
            home=home,
            tmpdir=tmpdir,
            agent_install_dirs=install_dirs,
            search_path=host_env.get("PATH"),
        )
    except LauncherMissing as exc:
        if host_env.get(UNSANDBOXED_VAR) != "1":
            raise
        if profile.network is not NetworkMode.OPEN:
            raise Refusal(
                f"{exc}. {UNSANDBOXED_VAR}=1 cannot lift it here: a {profile.network.value} "
                "network is enforced by the sandbox, and a run never gets a wider network "
                "than asked; install bubblewrap, or ask for --network open",
                code="unsandboxed_network",
            ) from exc
        resolved = None
    else:
        await _preflight(resolved)
    decisions: list[ProxyDecision] = []
    async with _network(
        profile.network,
        allowed=(*profile.allowed_domains, *allowed_domains),
        denied=profile.denied_domains,
        endpoint=endpoint,
        on_decision=decisions.append,
        resolver=resolver,
    ) as (bridge, net_env):
        env = build_child_env(
            host_env, agent, home=str(home), tmpdir=str(tmpdir), extra={**extra_env, **net_env}
        )
        yield Sandbox(resolved, env, bridge, decisions)


UNSANDBOXED_VAR = "ASUP_ALLOW_UNSANDBOXED"
_PREFLIGHT_OK: set[str] = set()


async def _preflight(resolved: ResolvedSandbox) -> None:
    """Can this launcher start a sandbox here? A host that denies user namespaces makes bwrap
    fail at once: refuse with its own words, before any child or run exists."""
    if resolved.backend != "bwrap" or resolved.launcher in _PREFLIGHT_OK:
        return
    argv = [resolved.launcher, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"]
    argv += ["--", "/bin/true"]
    try:
        done = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise SandboxUnavailable(
            f"{resolved.launcher} cannot be started ({exc}); reinstall bubblewrap"
        ) from exc
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise SandboxUnavailable(
            f"bubblewrap cannot create its namespaces on this host (it said: {said[0]}); "
            "allow unprivileged user namespaces (e.g. sysctl kernel.unprivileged_userns_clone=1"
            " or the AppArmor rule for bwrap) or run asup where they are allowed"
        )
    _PREFLIGHT_OK.add(resolved.launcher)


async def _stage(
    store: RunStore,
    run_id: str,
    wt: Worktree,
    seq: SeqCounter,
    emit: Callable[[RunEvent], None],
    limit_bytes: int,
) -> None:
    """The child's change: captured against the base commit, redacted, hashed, kept pending.
    Nothing reaches the user's checkout here; ``asup apply`` is the only way it lands."""
    try:
        change = await anyio.to_thread.run_sync(
            partial(capture, wt.path, wt.base_commit, limit_bytes=limit_bytes)
        )
    except Refusal as exc:
        emit(WarningRaised(seq(), f"nothing was kept for review: {exc}", exc.code))
        return
    for note in change.notes:
        emit(WarningRaised(seq(), note, "capture_note"))
    if change.empty:
        emit(WarningRaised(seq(), "the agent changed no file: nothing to review", "no_change"))
        return
    try:
        review = stage_review(store, run_id, change, redact_patch)
    except Refusal as exc:
        emit(WarningRaised(seq(), f"nothing was kept for review: {exc}", exc.code))
        return
    emit(
        ReviewStaged(
            seq(),
            run_id,
            review.patch_sha256,
            review.stats.get("files", len(change.files)),
            review.flagged,
            review.flag_reasons,
        )
    )


@dataclass
class _Run:
    """One run inside its worktree: what both transports need, passed as one value."""

    request: RunRequest
    wt: Worktree
    agent: AgentSpec
    binary: str
    vendor_version: str | None
    profile: SandboxProfile
    host_env: Mapping[str, str]
    run_dir: Path
    store: RunStore
    record: RunRecord
    seq: SeqCounter
    folder: Folder
    emit: Callable[[RunEvent], None]
    on_launch: Callable[[LaunchInfo], None]
    cancel: anyio.Event | None
    decisions: list[ProxyDecision]
    approver: Approver | None = None

    @property
    def home(self) -> Path:
        return self.run_dir / "home"

    @property
    def tmpdir(self) -> Path:
        return self.run_dir / "tmp"


@contextlib.asynccontextmanager
async def _launch(
    run: _Run, *, argv: list[str], env: Mapping[str, str], home_files: Mapping[str, str]
) -> AsyncIterator[tuple[Sandbox, list[str], list[str]]]:
    """What every transport does before its child starts: the agent's files in HOME, the
    sandbox (and its network) for the block, the launch recorded (argv in the store, a
    copy-pasteable ``launch.sh``) and told. Yields the sandbox, the whole argv and the
    vendor CLI's own argv. The proxy's decisions are kept when the block ends."""
    for rel, content in home_files.items():
        target = run.home / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    child_argv = [run.binary, *argv[1:]]
    async with open_sandbox(
        run.profile,
        agent=run.agent,
        worktree=run.wt,
        home=run.home,
        tmpdir=run.tmpdir,
        host_env=run.host_env,
        install_dirs=_agent_install_dirs(run.binary),
        extra_env=env,
        allowed_domains=run.request.allowed_domains,
        endpoint=run.request.endpoint,
    ) as sandbox:
        full_argv = sandbox.command(child_argv)
        if sandbox.unsandboxed:
            run.emit(
                WarningRaised(
                    run.seq(),
                    f"running WITHOUT a sandbox ({UNSANDBOXED_VAR}=1 and bubblewrap is not "
                    "installed): the child can read and write whatever this user can",
                    "unsandboxed",
                )
            )
        run.store.set_launch(run.record.id, argv=full_argv, worktree=str(run.wt.path))
        shell = shell_form(full_argv, sandbox.env.vars, run.agent.signing_key)
        launch_file = run.run_dir / "launch.sh"
        launch_file.write_text("#!/bin/sh\n" + shell + "\n", encoding="utf-8")
        launch_file.chmod(0o700)
        run.on_launch(
            LaunchInfo(
                run.record.id,
                run.agent.id,
                run.vendor_version,
                run.profile.name,
                run.profile.network,
                str(run.wt.path),
                full_argv,
                child_argv,
                shell,
            )
        )
        try:
            yield sandbox, full_argv, child_argv
        finally:
            run.decisions.extend(sandbox.decisions)


def _report_survivors(run: _Run, child: ChildResult) -> None:
    """Each process of the run that outlived the child, named in a warning."""
    for p in child.survivors_killed:
        run.emit(
            WarningRaised(run.seq(), f"killed a leftover process {p.pid} ({p.name})", "survivor")
        )
    for p in child.survivors_left:
        run.emit(
            WarningRaised(
                run.seq(),
                f"process {p.pid} ({p.name}) of the run did not end even after SIGKILL",
                "survivor_left",
            )
        )


async def _after_child(run: _Run) -> None:
    """What every transport does after its child ended, while the worktree still exists:
    each denied action named in a warning, and a write run's change staged for review."""
    for d in run.folder.summary().permission_denials:
        what = d.path or d.detail or d.call_id or "an action"
        run.emit(WarningRaised(run.seq(), f"{d.tool} was denied: {what}", "permission_denied"))
    if run.request.mode is Mode.WORKTREE_WRITE:
        await _stage(
            run.store, run.record.id, run.wt, run.seq, run.emit, run.request.review_limit_bytes
        )


async def _run_in_worktree(
    run: _Run, prompt: str
) -> tuple[Outcome, ChildResult, list[str], list[str]]:
    run.home.mkdir(mode=0o700)
    run.tmpdir.mkdir(mode=0o700)
    if run.agent.transport == "acp":
        return await _run_acp_in_worktree(run, prompt)
    request = run.request
    plan = plan_launch(
        run.agent,
        prompt=prompt,
        mode=request.mode,
        home=str(run.home),
        endpoint=request.endpoint,
        model=request.model,
        max_turns=request.max_turns,
    )
    async with _launch(run, argv=plan.argv, env=plan.env, home_files=plan.home_files) as (
        sandbox,
        full_argv,
        child_argv,
    ):
        codec = codec_for(run.agent.id, run.seq, cwd=str(run.wt.path))

        def on_stdout(data: bytes) -> None:
            run.store.append_stdout(run.record.id, data)
            for ev in codec.feed(data):
                run.emit(ev)

        result = await run_child(
            full_argv,
            env=sandbox.launcher_env,
            cwd=run.wt.path,
            on_stdout=on_stdout,
            max_runtime=request.max_runtime_s,
            grace=request.grace_s,
            cancel=run.cancel,
        )
        run.store.append_stderr(run.record.id, result.stderr_tail)
        for ev in codec.flush():
            run.emit(ev)
        for ev in codec.stderr_events(result.stderr_tail):
            run.emit(ev)
        _report_survivors(run, result)
    await _after_child(run)
    if result.timed_out:
        outcome = Outcome(
            OutcomeStatus.TIMED_OUT, None, f"the run exceeded {request.max_runtime_s} s"
        )
    elif result.canceled:
        outcome = Outcome(OutcomeStatus.CANCELED, None, "the run was canceled")
    else:
        outcome = codec.classify(result.exit_code, result.stderr_tail, run.folder.summary())
    return outcome, result, full_argv, child_argv


async def _run_acp_in_worktree(
    run: _Run, prompt: str
) -> tuple[Outcome, ChildResult, list[str], list[str]]:
    """The ACP transport (supervisor.acp.client) inside the same containment as a line-stream
    run: the same sandbox, env, store and staging; the SDK's client over the child's pipes
    instead of a codec over its stdout."""
    request = run.request
    recipe = acp_recipe(
        run.agent,
        mode=request.mode,
        home=str(run.home),
        now_ms=time.time_ns() // 1_000_000,
        endpoint=request.endpoint,
        model=request.model,
        max_turns=request.max_turns,
    )
    async with _launch(run, argv=recipe.argv, env=recipe.env, home_files=recipe.home_files) as (
        sandbox,
        full_argv,
        child_argv,
    ):
        client = SupervisorClient(
            root=run.wt.path,
            agent=run.agent.id,
            policy=run_policy(request.mode, request.policy),
            seq=run.seq,
            emit=run.emit,
            approver=run.approver,
        )
        fold = AcpFold(run.seq, cwd=str(run.wt.path))
        acp = await run_acp_agent(
            full_argv,
            env=sandbox.launcher_env,
            cwd=run.wt.path,
            prompt=prompt,
            client=client,
            fold=fold,
            on_transcript=partial(run.store.append_stdout, run.record.id),
            max_runtime=request.max_runtime_s,
            max_idle=request.max_idle_s,
            grace=request.grace_s,
            cancel=run.cancel,
        )
        run.store.append_stderr(run.record.id, acp.child.stderr_tail)
        _report_survivors(run, acp.child)
    await _after_child(run)
    return acp.outcome, acp.child, full_argv, child_argv
