"""``asup``: a thin shell over the library. Parses, renders, decides nothing.

Imports of the heavier modules happen inside the command functions so ``asup --help`` stays
fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from supervisor import __version__

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="asup",
        description="Hand a bounded task to an installed coding CLI and get back a supervised, "
        "contained, reviewable result.",
    )
    p.add_argument("--version", action="version", version=f"asup {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser(
        "replay",
        help="decode a recorded transcript offline and print the folded run",
        description="Decode a recorded stdout transcript (JSON lines) with an agent's codec and "
        "print the folded run. Exit 0 when it decoded, whatever the run's outcome; 2 on unusable "
        "input.",
    )
    r.add_argument("--agent", required=True, help="agent id, e.g. claude-cli or codex-cli")
    r.add_argument("transcript", help="path to the transcript (.jsonl); - for standard input")
    r.add_argument("--exit-code", type=int, default=0, help="the CLI's exit code (default 0)")
    r.add_argument("--stderr", metavar="FILE", help="a file holding the CLI's stderr tail")
    r.add_argument("--json", action="store_true", help="print one JSON object")

    run = sub.add_parser(
        "run",
        help="run an agent on a task in a disposable, sandboxed worktree of this repository",
        description="Run an installed coding CLI on a task, read-only, in a disposable git "
        "worktree of the repository, under bubblewrap, with an allowlisted environment. "
        "Exit status: 0 completed, 1 failed, 2 bad arguments, 3 refused, 4 denied, "
        "5 usage limited, 124 timed out, 130 canceled.",
    )
    run.add_argument("agent", help="agent id, e.g. claude-cli or codex-cli")
    run.add_argument("--task", required=True, help="what the agent should do")
    run.add_argument("--repo", default=".", help="the repository (default: the current dir)")
    run.add_argument(
        "--network",
        choices=("none", "open", "restricted"),
        help="network of the sandbox (default: the profile's, restricted to the model APIs)",
    )
    run.add_argument(
        "--allow-domain", action="append", metavar="HOST", help="also allow HOST (restricted)"
    )
    run.add_argument("--endpoint", metavar="URL", help="the model endpoint the agent talks to")
    run.add_argument("--model", help="the model name to ask the agent for")
    run.add_argument("--max-runtime", type=float, metavar="S", help="wall-clock budget, seconds")
    run.add_argument(
        "--max-idle",
        type=float,
        metavar="S",
        help="ACP agents: end the run when the agent sends nothing for S seconds while no "
        "question is open (default 600; 0 turns it off)",
    )
    run.add_argument(
        "--max-turns", type=int, metavar="N", help="turn budget (agents that enforce one)"
    )
    run.add_argument("--json", action="store_true", help="print the run's events as JSON lines")
    run.add_argument(
        "--write",
        action="store_true",
        help="let the agent edit files in its worktree; the change is kept for review "
        "(asup review / apply / discard), nothing reaches your checkout before that",
    )

    def rule_option(decision: str) -> Callable[[str], tuple[str, str]]:
        return lambda spec: (decision, spec)

    for decision, what in (
        ("allow", "allow without asking"),
        ("ask", "ask the person at the terminal"),
        ("deny", "deny"),
    ):
        run.add_argument(
            f"--{decision}",
            dest="rules",
            action="append",
            type=rule_option(decision),
            metavar="RISK:PATTERN",
            help=f"ACP agents: {what} what matches (e.g. 'shell:git *'); rules apply in the "
            "order given, after your config's, and the last match wins",
        )
    run.add_argument(
        "--unattended",
        action="store_true",
        help="ACP agents: nobody answers questions; whatever the policy would ask is denied "
        "(the default when stdin is not a terminal)",
    )

    rs = sub.add_parser("runs", help="the runs asup has recorded")
    rsub = rs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    rl = rsub.add_parser("list", help="recent runs, newest first")
    rl.add_argument("--json", action="store_true")
    rl.add_argument("--limit", type=int, default=20)
    rsh = rsub.add_parser("show", help="one run: its record, outcome and summary")
    rsh.add_argument("run_id")
    rsh.add_argument("--json", action="store_true")

    rv = sub.add_parser("review", help="show the change a run left for review")
    rv.add_argument("run_id")
    rv.add_argument("--json", action="store_true", help="print one JSON object")
    apl = sub.add_parser(
        "apply", help="land a run's reviewed change as a new branch (asks for its hash)"
    )
    apl.add_argument("run_id")
    apl.add_argument(
        "--allow-flagged", action="store_true", help="also land a change the review flagged"
    )
    apl.add_argument("--repo", help="the repository (default: the one the run was made in)")
    dsc = sub.add_parser("discard", help="drop a run's pending change without landing it")
    dsc.add_argument("run_id")

    cf = sub.add_parser("config", help="turn asup on or off for this user")
    csub = cf.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    csub.add_parser("enable", help="allow asup to start runs (off by default)")
    csub.add_parser("disable", help="stop asup from starting runs")
    csub.add_parser("show", help="print the config file's path and content")

    a = sub.add_parser("agents", help="list the agents asup knows and whether they are installed")
    asub = a.add_subparsers(dest="agents_command", metavar="ACTION", required=True)
    al = asub.add_parser(
        "list", help="every agent: installed / not installed / not probed, from --version only"
    )
    al.add_argument("--json", action="store_true")
    al.add_argument("--no-probe", action="store_true", help="only look on PATH; run nothing")
    ap = asub.add_parser("probe", help="run one agent's --version and say what it found")
    ap.add_argument("agent")
    ap.add_argument("--json", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "replay":
        from supervisor.cli.replay import run_replay

        return run_replay(
            agent=args.agent,
            transcript=args.transcript,
            exit_code=args.exit_code,
            stderr_path=args.stderr,
            as_json=args.json,
        )
    if args.command in ("run", "runs", "agents", "review", "apply", "discard"):
        import os

        from supervisor import paths
        from supervisor.dispatch import tidy_up

        tidied = tidy_up(paths.state_dir(os.environ))
        for r in tidied.interrupted:
            print(f"asup: run {r.id} was interrupted ({r.reason})", file=sys.stderr)
        for w in tidied.reaped:
            if w.error:
                print(
                    f"asup: could not remove the leftover worktree {w.run_dir}: {w.error}",
                    file=sys.stderr,
                )
    if args.command == "run":
        from supervisor.cli.run import run_command

        return run_command(args)
    if args.command == "runs":
        from supervisor.cli.runs import runs_command

        return runs_command(args)
    if args.command == "config":
        from supervisor.cli.config import config_command

        return config_command(args)
    if args.command == "agents":
        from supervisor.cli.agents import run_list, run_probe

        if args.agents_command == "list":
            return run_list(as_json=args.json, probe=not args.no_probe)
        return run_probe(args.agent, as_json=args.json)
    if args.command in ("review", "apply", "discard"):
        from supervisor.cli import review as review_cli

        command = {
            "review": review_cli.review_command,
            "apply": review_cli.apply_command,
            "discard": review_cli.discard_command,
        }[args.command]
        return command(args)
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
