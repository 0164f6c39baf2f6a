"""``asup runs list`` and ``asup runs show``."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from supervisor import paths
from supervisor.errors import StoreError
from supervisor.store import RunRecord, RunStore

MISSING = "—"


def _dict(r: RunRecord) -> dict[str, Any]:
    return r.model_dump(mode="json")


def _outcome(r: RunRecord) -> str:
    if r.outcome is None:
        return "unknown" if r.state.value == "interrupted" else r.state.value
    return r.outcome.value + (f" / {r.failure_kind.value}" if r.failure_kind else "")


def runs_command(args: Any) -> int:
    try:
        with RunStore(paths.state_dir(os.environ)) as store:
            store.recover_interrupted()
            if args.runs_command == "list":
                records = store.list(args.limit)
                if args.json:
                    print(json.dumps([_dict(r) for r in records], ensure_ascii=False))
                    return 0
                table = Table(title="runs", title_justify="left")
                for col in ("id", "agent", "state", "outcome", "started"):
                    table.add_column(col, no_wrap=col != "outcome")
                for r in records:
                    table.add_row(
                        r.id, r.agent, r.state.value, _outcome(r), r.started_at.isoformat()
                    )
                Console().print(table)
                return 0
            record = store.get(args.run_id)
            if record is None:
                print(
                    f"asup runs show: no run {args.run_id!r}; `asup runs list` shows the ids",
                    file=sys.stderr,
                )
                return 2
            if args.json:
                print(json.dumps(_dict(record), ensure_ascii=False))
                return 0
            console = Console()
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold")
            grid.add_column()
            data = _dict(record)
            for key in (
                "id",
                "agent",
                "vendor_version",
                "state",
                "profile",
                "network",
                "repo",
                "base_commit",
                "worktree",
                "started_at",
                "finished_at",
            ):
                grid.add_row(key, MISSING if data[key] is None else str(data[key]))
            grid.add_row("outcome", _outcome(record))
            if record.reason:
                grid.add_row("reason", record.reason)
            summary = record.summary or {}
            for key in ("session_id", "model", "turns", "cost_usd", "unknown_lines"):
                if key in summary:
                    grid.add_row(key, MISSING if summary[key] is None else str(summary[key]))
            run_dir = store.run_dir(record.id)
            grid.add_row("transcript", str(run_dir / "stdout.jsonl"))
            grid.add_row("events", str(run_dir / "events.jsonl"))
            if (run_dir / "launch.sh").exists():
                grid.add_row("launch.sh", str(run_dir / "launch.sh"))
            console.print(grid)
            return 0
    except StoreError as exc:
        print(f"asup runs: {exc}", file=sys.stderr)
        return 1
