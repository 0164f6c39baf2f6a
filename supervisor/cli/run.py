"""``asup run``: one contained run with a live view (or JSON lines with ``--json``).

Exit status, from the run's outcome:

=========  ===============================================
0          completed
1          failed
2          bad arguments
3          refused (a gate, a missing agent, the repository, the sandbox)
4          denied (the agent was refused actions it asked for)
5          usage_limited
124        timed_out
130        canceled (Ctrl-C, SIGTERM)
=========  ===============================================
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from supervisor.approval import Approver
from supervisor.cli.approve import TerminalApprover
from supervisor.dispatch import LaunchInfo, RunReport, RunRequest, dispatch_run
from supervisor.errors import Refusal, SupervisorError
from supervisor.events import OutcomeStatus, RunEvent, describe, event_to_json
from supervisor.summary import Folder

EXIT_CODES: dict[OutcomeStatus, int] = {
    OutcomeStatus.COMPLETED: 0,
    OutcomeStatus.FAILED: 1,
    OutcomeStatus.REFUSED: 3,
    OutcomeStatus.DENIED: 4,
    OutcomeStatus.USAGE_LIMITED: 5,
    OutcomeStatus.TIMED_OUT: 124,
    OutcomeStatus.CANCELED: 130,
}
EXIT_REFUSED = 3
# An ACP agent that sends nothing for this long is ended (opencode retries a failing model API
# silently for over a minute, an agent can hang on a stalled stream); a question open to the
# person does not count.
DEFAULT_MAX_IDLE_S = 600.0
MISSING = "—"


def _fig(value: Any) -> str:
    return MISSING if value is None else str(value)


class LiveView:
    """Work (the folded transcript as it streams), Meta and Command panels."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.folder = Folder()
        self.lines: deque[Text] = deque(maxlen=18)
        self.launch: LaunchInfo | None = None
        self.finished: str | None = None

    def event(self, ev: RunEvent) -> None:
        self.folder.add(ev)
        style = {"error": "red", "warning": "yellow", "run.finished": "bold"}.get(ev.type, "")
        self.lines.append(Text(describe(ev)[:300], style=style))

    def render(self) -> Group:
        s = self.folder.summary()
        u = s.usage
        work = Panel(Group(*self.lines) if self.lines else Text("waiting…"), title="Work")
        meta = Table.grid(padding=(0, 2))
        meta.add_column(style="bold")
        meta.add_column()
        launch = self.launch
        meta.add_row("agent", f"{self.agent} {_fig(launch.vendor_version if launch else None)}")
        meta.add_row("model", _fig(s.model))
        if launch is not None:
            meta.add_row("sandbox", f"{launch.profile} · network {launch.network.value}")
            meta.add_row("worktree", launch.worktree)
        meta.add_row("session", _fig(s.session_id))
        meta.add_row("turns", _fig(s.turns))
        meta.add_row(
            "tokens",
            f"in {_fig(u.input_tokens)} · out {_fig(u.output_tokens)} · cache read "
            f"{_fig(u.cache_read_tokens)} · reasoning {_fig(u.reasoning_tokens)}",
        )
        meta.add_row("cost", MISSING if u.cost is None else f"${u.cost:.4f}")
        meta.add_row("unknown lines", str(s.unknown_lines))
        meta.add_row("warnings", str(len(s.warnings)))
        parts: list[Any] = [work, Panel(meta, title="Meta")]
        if launch is not None:
            shown = [a if len(a) <= 160 else f"<{len(a)} bytes: the prompt>" for a in launch.argv]
            command = Text(shlex.join(shown), overflow="fold")
            title = (
                "Command (prompt elided here; the copy-pasteable form is launch.sh in "
                f"`asup runs show {launch.run_id}`)"
            )
            parts.append(Panel(command, title=title))
        if self.finished:
            parts.append(Text(self.finished, style="bold"))
        return Group(*parts)


def _request(args: Any, env: Mapping[str, str]) -> RunRequest:
    from supervisor.config import config_path, load_config
    from supervisor.policy import Policy, rule_from_option
    from supervisor.registry import AGENTS, Mode
    from supervisor.sandbox.profile import NetworkMode

    # Defaults from the user's config; the CI gate is checked before any config is read.
    config = None if _ci(env) else load_config(config_path(env=env))
    options = list(args.rules or ())
    spec = AGENTS.get(args.agent)
    if options and spec is not None and spec.transport != "acp":
        flags = ", ".join(sorted({f"--{d}" for d, _ in options}))
        raise ValueError(
            f"{flags} set rules for the permission requests of ACP agents; {args.agent} asks "
            "none (its permissions follow --write), so leave them out"
        )
    if args.max_idle is not None and spec is not None and spec.transport != "acp":
        raise ValueError(
            f"--max-idle bounds the silence of ACP agents; {args.agent} is not one, so bound "
            "it with --max-runtime instead"
        )
    if args.max_idle is not None and args.max_idle < 0:
        raise ValueError("--max-idle must be 0 (off) or a number of seconds")
    max_idle = DEFAULT_MAX_IDLE_S if args.max_idle is None else args.max_idle or None
    run_layer = Policy(rules=tuple(rule_from_option(d, text) for d, text in options))
    policy = Policy.layered(config.policy if config else Policy(), run_layer)
    endpoint = args.endpoint or (config.endpoint if config else None)
    network = args.network or (
        config.default_network.value if config and config.default_network else None
    )
    return RunRequest(
        agent=args.agent,
        task=args.task,
        repo=Path(args.repo).resolve(),
        mode=Mode.WORKTREE_WRITE if args.write else Mode.READ_ONLY,
        network=NetworkMode(network) if network else None,
        allowed_domains=tuple(args.allow_domain or ()),
        endpoint=endpoint,
        model=args.model,
        max_runtime_s=args.max_runtime,
        max_idle_s=max_idle if spec is not None and spec.transport == "acp" else None,
        max_turns=args.max_turns,
        policy=policy,
    )


async def _run(
    request: RunRequest,
    env: Mapping[str, str],
    view: LiveView | None,
    live: Live | None,
    approver: Approver | None,
) -> RunReport:
    cancel = anyio.Event()

    def on_event(ev: RunEvent) -> None:
        if view is None:
            print(event_to_json(ev), flush=True)
            return
        view.event(ev)
        if live is not None:
            live.update(view.render())

    def on_launch(info: LaunchInfo) -> None:
        if view is not None:
            view.launch = info
            if live is not None:
                live.update(view.render())

    async def watch_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                cancel.set()
                return

    from supervisor.gates import check_run_gates

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_signals)
            try:
                report = await dispatch_run(
                    request,
                    host_env=env,
                    on_event=on_event,
                    on_launch=on_launch,
                    cancel=cancel,
                    check_gates=check_run_gates,
                    approver=approver,
                )
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # One failure inside the task group: raise it as itself (a refusal keeps its sentence).
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return report


def _ci(env: Mapping[str, str]) -> bool:
    from supervisor.gates import CiGateClosed, check_env_gates

    try:
        check_env_gates(env)
    except CiGateClosed:
        return True
    except Refusal:
        return False
    return False


def run_command(args: Any) -> int:
    env = dict(os.environ)
    console = Console(stderr=False)
    try:
        request = _request(args, env)
    except ValueError as exc:
        print(f"asup run: {exc}", file=sys.stderr)
        return 2
    except SupervisorError as exc:
        print(f"asup run: {exc}", file=sys.stderr)
        return 1
    view = None if args.json else LiveView(request.agent)
    # A person can answer the policy's questions only at a terminal, and not when told not to.
    attended = not args.unattended and sys.stdin.isatty() and TerminalApprover.available()
    try:
        if view is None:
            approver = TerminalApprover(request.agent) if attended else None
            report = anyio.run(_run, request, env, None, None, approver)
        else:
            # Transient: a refusal before the run leaves no empty panels behind; a run that
            # happened is printed once more, whole, when it ends.
            with Live(view.render(), console=console, refresh_per_second=8, transient=True) as live:
                approver = (
                    TerminalApprover(request.agent, pause=live.stop, resume=live.start)
                    if attended
                    else None
                )
                report = anyio.run(_run, request, env, view, live, approver)
            outcome = report.outcome
            kind = f" / {outcome.failure_kind.value}" if outcome.failure_kind else ""
            why = f": {outcome.reason}" if outcome.reason else ""
            view.finished = f"run {report.record.id}: {outcome.status.value}{kind}{why}"
            console.print(view.render())
    except Refusal as exc:
        if args.json:
            print(json.dumps({"type": "refused", "code": exc.code, "reason": str(exc)}))
        else:
            console.print(f"[red]asup refused:[/red] {exc}")
        return EXIT_REFUSED
    except SupervisorError as exc:
        print(f"asup run: {exc}", file=sys.stderr)
        return 1
    if report.outcome.status is OutcomeStatus.CANCELED and not args.json:
        console.print("canceled: the child was stopped and its worktree removed")
    return EXIT_CODES[report.outcome.status]
