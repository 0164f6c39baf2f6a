"""The offline demo (``make demo``), in two parts, both with the real pinned vendor CLI and the
bundled fake model server on 127.0.0.1:

1. ``asup`` itself: ``asup run <agent> --write`` on a scratch git repo (with uncommitted work in
   it) — a disposable worktree, bubblewrap, the restricted network reaching the fake server as
   a port forward — then ``asup review`` of the staged change. Nothing reaches the scratch
   repo's checkout: landing it is ``asup apply``, which asks a person at a terminal for the
   hash (the demo prints the command).
2. The vendor lab: a recorded scenario run inside a loopback-only network namespace and
   decoded event by event (``--lab-only`` shows just this part).

``python -m supervisor.lab.demo [--agent claude-cli] [--scenario edit_file] [--lab-only]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text as RichText

from supervisor.codecs import decode_transcript
from supervisor.events import describe
from supervisor.lab.agents.base import VENDOR_BIN
from supervisor.lab.recorder import LabRunError, run_scenario
from supervisor.lab.scenarios import UnknownScenarioError, get_scenario
from supervisor.lab.script import Reply, Script, Text, Thinking, ToolCall
from supervisor.lab.server import FakeModelServer

DEMO_REPLIES = {
    "claude-cli": [
        Reply(
            (
                Thinking("Look at the greeting first."),
                ToolCall("Read", {"file_path": "<cwd>/src/app.py"}),
            )
        ),
        Reply(
            (
                ToolCall(
                    "Edit",
                    {
                        "file_path": "<cwd>/src/app.py",
                        "old_string": "'hello '",
                        "new_string": "'hi '",
                    },
                ),
            )
        ),
        Reply((Text("greet() now says 'hi'."),)),
    ],
    "codex-cli": [
        Reply(
            (
                ToolCall(
                    "apply_patch",
                    "*** Begin Patch\n*** Update File: src/app.py\n@@\n"
                    "-    return 'hello ' + name\n+    return 'hi ' + name\n*** End Patch\n",
                    kind="custom",
                ),
            )
        ),
        Reply((Text("greet() now says 'hi'."),)),
    ],
}
DEMO_MODEL = {"claude-cli": "claude-sonnet-4-5", "codex-cli": "gpt-5.5"}


def _git(repo: Path, *args: str) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "you",
        "GIT_AUTHOR_EMAIL": "you@example.invalid",
        "GIT_COMMITTER_NAME": "you",
        "GIT_COMMITTER_EMAIL": "you@example.invalid",
    }
    subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True)


def product_demo(agent: str, console: Console) -> int:
    """``asup run --write`` and ``asup review`` on a scratch repo, with a user environment of
    its own (temporary XDG dirs, asup enabled there, a dummy key, no CI marker)."""
    if agent not in DEMO_REPLIES:
        console.print(f"[red]demo:[/red] no product demo for {agent}")
        return 2
    with tempfile.TemporaryDirectory(prefix="asup-demo-") as tmp:
        root = Path(tmp)
        repo = root / "greeter"
        (repo / "src").mkdir(parents=True)
        (repo / "src" / "app.py").write_text(
            "def greet(name: str) -> str:\n    return 'hello ' + name\n"
        )
        (repo / "README.md").write_text("# greeter\n")
        _git(repo, "init", "-q", "-b", "main")
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", "initial")
        (repo / "NOTES.md").write_text("my uncommitted notes\n")
        env = {
            "PATH": f"{VENDOR_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "XDG_STATE_HOME": str(root / "state"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "ANTHROPIC_API_KEY": "demo-dummy-key",
            "OPENAI_API_KEY": "demo-dummy-key",
            "COLUMNS": os.environ.get("COLUMNS", "110"),
        }
        asup = [sys.executable, "-m", "supervisor.cli.main"]
        subprocess.run([*asup, "config", "enable"], env=env, check=True, capture_output=True)
        console.rule(f"[bold]asup run {agent} --write[/bold] on a scratch repo")
        with FakeModelServer(Script(list(DEMO_REPLIES[agent]))) as server:
            task = "Make greet() say 'hi' instead of 'hello'."
            command = [
                *asup,
                "run",
                agent,
                "--write",
                "--task",
                task,
                "--endpoint",
                server.base_url,
                "--model",
                DEMO_MODEL[agent],
                "--max-runtime",
                "120",
            ]
            console.print(
                f"[dim]$ asup run {agent} --write --task {task!r} --endpoint "
                f"{server.base_url}[/dim]"
            )
            done = subprocess.run(command, env=env, cwd=repo, check=False)
        runs = subprocess.run(
            [*asup, "runs", "list", "--json"], env=env, capture_output=True, text=True, check=True
        )
        run_id = json.loads(runs.stdout)[0]["id"]
        console.rule(f"[bold]asup review {run_id}[/bold]")
        subprocess.run([*asup, "review", run_id], env=env, cwd=repo, check=False)
        status = subprocess.run(
            ["git", "-C", str(repo), "status", "--short"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        console.print(
            f"[dim]the scratch repo's own checkout is untouched (git status: "
            f"{status.strip() or 'clean'}); to land the change a person runs "
            f"`asup apply {run_id}` at a terminal and types the hash's first 12 "
            "digits[/dim]"
        )
        return 0 if done.returncode == 0 else done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m supervisor.lab.demo", description=__doc__)
    parser.add_argument("--agent", default="claude-cli")
    parser.add_argument("--scenario", default="edit_file")
    parser.add_argument("--lab-only", action="store_true", help="only the lab part")
    args = parser.parse_args(argv)
    console = Console()
    if not args.lab_only:
        code = product_demo(args.agent, console)
        if code != 0:
            return code
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
            console.print(
                RichText.assemble((f"{ev.seq:>3} ", "dim"), describe(ev)), highlight=False
            )
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
