"""``asup review``, ``asup apply`` and ``asup discard``: look at, land or drop a run's change.

The wiring in ``supervisor/cli/main.py`` (inside ``_parser()``, after the ``runs`` parser)::

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

and in ``main()``, before the final ``parser.error``::

    if args.command in ("review", "apply", "discard"):
        from supervisor.cli import review as review_cli

        command = {
            "review": review_cli.review_command,
            "apply": review_cli.apply_command,
            "discard": review_cli.discard_command,
        }[args.command]
        return command(args)

Exit codes: 0 done, 1 refused or failed (the message says which), 2 usage.
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.syntax import Syntax

from supervisor import paths
from supervisor.errors import Refusal, SupervisorError
from supervisor.review import (
    DIGITS,
    apply_review,
    discard_review,
    pending_review,
    read_patch,
)
from supervisor.store import ReviewRecord, ReviewState, RunStore
from supervisor.worktree import open_repository

__all__ = ["PROMPT", "apply_command", "discard_command", "review_command"]

PROMPT = f"type the first {DIGITS} hex digits of the patch hash to apply: "
EXIT_OK = 0
EXIT_REFUSED = 1


def _store() -> RunStore:
    return RunStore(paths.state_dir(os.environ))


def _refused(command: str, exc: SupervisorError) -> int:
    kind = "refused" if isinstance(exc, Refusal) else "failed"
    print(f"asup {command}: {kind}: {exc}", file=sys.stderr)
    return EXIT_REFUSED


def _visible(text: str) -> str:
    """The patch as it may reach a terminal: control characters (escape sequences could hide or
    rewrite lines) are shown as ``\\xNN`` instead of being sent."""
    return "".join(
        c
        if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf")
        else f"\\x{ord(c):02x}"
        if ord(c) < 0x100
        else f"\\u{ord(c):04x}"
        for c in text
    )


def _show(console: Console, review: ReviewRecord, patch: bytes | None) -> None:
    stats = review.stats
    console.print(
        f"[bold]run {review.run_id}[/bold]  {review.state.value}  base {review.base_commit[:12]}"
        f"  {stats.get('files', 0)} file(s), +{stats.get('insertions', 0)}"
        f" -{stats.get('deletions', 0)}",
        highlight=False,
    )
    for reason in review.flag_reasons:
        console.print(f"[bold red]flagged:[/bold red] {_visible(reason)}", highlight=False)
    if review.branch:
        console.print(f"branch {review.branch}", highlight=False)
    if patch is not None:
        text = _visible(patch.decode("utf-8", errors="replace"))
        console.print(Syntax(text, "diff", theme="ansi_dark", word_wrap=True))
        console.print(
            f"patch sha256 [bold]{review.patch_sha256}[/bold]"
            f" (apply asks for its first {DIGITS} digits)",
            highlight=False,
        )


def review_command(args: Any) -> int:
    """``asup review <run-id> [--json]``: the stats, the flags and the diff of a run's review."""
    try:
        with _store() as store:
            review = store.get_review(args.run_id)
            if review is None:
                pending_review(store, args.run_id)  # raises the no-review refusal
                return EXIT_REFUSED
            patch = read_patch(review) if review.state is ReviewState.PENDING else None
    except SupervisorError as exc:
        return _refused("review", exc)
    if args.json:
        body = review.model_dump(mode="json")
        body["patch"] = None if patch is None else patch.decode("utf-8", errors="replace")
        print(json.dumps(body, ensure_ascii=False))
        return EXIT_OK
    _show(Console(), review, patch)
    return EXIT_OK


def apply_command(args: Any) -> int:
    """``asup apply <run-id> [--allow-flagged] [--repo PATH]``: land a run's change as branch
    ``external/<run-id>`` once the person at the terminal types the first digits of its hash."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(
            "asup apply: refused: applying needs a person at a terminal to read the diff and"
            " type its hash, and stdin or stdout is not a terminal; run asup apply in a terminal",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    console = Console()
    try:
        with _store() as store:
            review = pending_review(store, args.run_id)
            patch = read_patch(review)
            if review.flagged and not args.allow_flagged:
                _show(console, review, patch)
                print(
                    f"asup apply: refused: run {args.run_id}'s change is flagged; nothing was"
                    " applied: read the diff, and apply with --allow-flagged if it is what you"
                    " want",
                    file=sys.stderr,
                )
                return EXIT_REFUSED
            run = store.get(args.run_id)
            where = args.repo or (run.repo if run is not None else None) or "."
            repo = open_repository(Path(where))
            _show(console, review, patch)
            try:
                typed = input(PROMPT)
            except EOFError:
                typed = ""
            applied = apply_review(
                repo,
                store,
                args.run_id,
                typed_digits=typed,
                allow_flagged=args.allow_flagged,
            )
    except SupervisorError as exc:
        return _refused("apply", exc)
    print(
        f"applied run {applied.run_id}: branch {applied.branch} with one commit"
        f" {applied.commit[:12]} on the base {applied.base_commit[:12]}; your branch, index and"
        " working tree are as they were, and nothing was pushed"
    )
    for note in applied.notes:
        print(f"note: {note}")
    return EXIT_OK


def discard_command(args: Any) -> int:
    """``asup discard <run-id>``: drop a pending review; its patch file is removed."""
    try:
        with _store() as store:
            discard_review(store, args.run_id)
    except SupervisorError as exc:
        return _refused("discard", exc)
    print(f"discarded run {args.run_id}'s change; its patch file is removed and nothing landed")
    return EXIT_OK
