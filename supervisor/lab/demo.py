"""The offline demo: a real, pinned vendor CLI works on a scratch git repo against the bundled
fake model server, inside a network namespace where only loopback exists; the run is decoded by
the agent's codec and shown.

``python -m supervisor.lab.demo [--agent claude-cli] [--scenario edit_file]`` (``make demo``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from supervisor.codecs import decode_transcript
from supervisor.events import describe
from supervisor.lab.recorder import LabRunError, run_scenario
from supervisor.lab.scenarios import UnknownScenarioError, get_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m supervisor.lab.demo", description=__doc__)
    parser.add_argument("--agent", default="claude-cli")
    parser.add_argument("--scenario", default="edit_file")
    args = parser.parse_args(argv)
    console = Console()
    try:
        scenario = get_scenario(args.agent, args.scenario)
    except UnknownScenarioError as exc:
        console.print(f"[red]demo:[/red] {exc}")
        return 2
    console.rule(f"[bold]{args.agent}[/bold] · scenario [bold]{scenario.name}[/bold]")
    console.print(scenario.description)
    for step in scenario.steps:
        console.print(Panel(step.prompt, title="task", title_align="left"))
    with tempfile.TemporaryDirectory(prefix="asup-demo-") as tmp:
        try:
            run = run_scenario(args.agent, scenario.name, Path(tmp) / "run")
        except LabRunError as exc:
            console.print(f"[red]demo: the lab could not run:[/red] {exc}")
            return 1
        meta = run.meta
        links = [line.split(":")[1].strip() for line in meta["netns_links"] if ":" in line]
        console.print(
            f"[dim]{args.agent} {meta['vendor_version']} ran in a network namespace with "
            f"interfaces {', '.join(links)} only; exit code {meta['exit_code']}, "
            f"{meta['wall_time_s']} s; the fake model server answered "
            f"{sum(r['count'] for r in meta['requests'])} requests[/dim]"
        )
        console.print(f"[dim]argv: {' '.join(meta['argv'])}[/dim]")
        decoded = decode_transcript(
            args.agent, run.stdout, exit_code=meta["exit_code"], stderr_tail=meta["stderr_tail"]
        )
        console.rule("decoded events")
        for ev in decoded.events:
            console.print(Text.assemble((f"{ev.seq:>3} ", "dim"), describe(ev)), highlight=False)
        console.rule("folded run")
        from supervisor.cli.views import print_replay

        print_replay(decoded.to_dict(), console)
        diff = subprocess.run(
            ["git", "-C", str(run.repo), "diff", "--no-color", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        untracked = subprocess.run(
            ["git", "-C", str(run.repo), "ls-files", "--others", "--exclude-standard"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        console.rule("what changed on disk in the scratch repo")
        if diff:
            console.print(Syntax(diff, "diff", theme="ansi_dark"))
        for path in untracked:
            console.print(f"new file: {path}")
        if not diff and not untracked:
            console.print("nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
