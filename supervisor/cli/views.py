"""rich renderings for the CLI. Missing figures render as missing (an em dash), never 0."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

MISSING = "—"


def _fig(value: Any) -> str:
    return MISSING if value is None else str(value)


def print_replay(data: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    outcome = data["outcome"] + (f" / {data['failure_kind']}" if data["failure_kind"] else "")
    meta = Table.grid(padding=(0, 2))
    meta.add_column(style="bold")
    meta.add_column()
    meta.add_row("agent", data["agent"])
    meta.add_row("outcome", outcome)
    if data.get("reason"):
        meta.add_row("reason", data["reason"])
    meta.add_row("session", _fig(data["session_id"]))
    meta.add_row("model", _fig(data["model"]))
    meta.add_row("turns", _fig(data["turns"]))
    u = data["usage"]
    meta.add_row(
        "tokens",
        f"in {_fig(u['input_tokens'])} · out {_fig(u['output_tokens'])} · cache read "
        f"{_fig(u['cache_read_tokens'])} · cache write {_fig(u['cache_write_tokens'])} · "
        f"reasoning {_fig(u['reasoning_tokens'])}",
    )
    cost = data["cost_usd"]
    meta.add_row("cost", MISSING if cost is None else f"${cost:.4f}")
    meta.add_row("events", f"{data['events']} ({data['unknown_lines']} unrecognized lines)")
    console.print(meta)
    if data["tool_calls"]:
        calls = Table(title="tool calls", title_justify="left")
        for col in ("name", "id", "result"):
            calls.add_column(col)
        for c in data["tool_calls"]:
            result = {True: "ok", False: "error", None: "never finished"}[c["ok"]]
            calls.add_row(c["name"], c["id"], result)
        console.print(calls)
    if data["file_changes"]:
        console.print("[bold]files changed[/bold]")
        for f in data["file_changes"]:
            console.print(f"  {f['kind']:<7} {f['path']}")
    for d in data["permission_denials"]:
        console.print(f"[yellow]permission denied[/yellow]: {d['tool']} {d['path'] or ''}")
    for w in data["warnings"]:
        console.print(f"[yellow]warning[/yellow]: {w}")
    for e in data["errors"]:
        tag = "error" if e["fatal"] else "retried error"
        console.print(f"[red]{tag}[/red] ({e['kind']}): {e['message']}")
    if data["final_text"]:
        console.rule("final answer")
        console.print(data["final_text"], markup=False, highlight=False)
