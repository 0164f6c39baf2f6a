"""``asup agents list`` and ``asup agents probe``."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from supervisor.probe import LOGIN_NOTE, Probe, probe_agent
from supervisor.registry import AGENTS, UnknownAgentError, get_agent


def _row(p: Probe) -> dict[str, Any]:
    spec = AGENTS[p.agent]
    return {
        "id": p.agent,
        "name": spec.display_name,
        "transport": spec.transport,
        "modes": [m.value for m in spec.modes],
        "binary": spec.binary,
        "state": p.state.value,
        "path": p.binary_path,
        "version": p.version,
        "recorded_range": (
            spec.recorded_range.min
            if spec.recorded_range.min == spec.recorded_range.max
            else f"{spec.recorded_range.min}–{spec.recorded_range.max}"
        ),
        "in_recorded_range": p.in_recorded_range,
        "warning": p.warning,
        "detail": p.detail,
        "login": LOGIN_NOTE,
    }


def _print(rows: list[dict[str, Any]]) -> None:
    console = Console()
    table = Table(title="agents", title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("version", no_wrap=True)
    table.add_column("recorded", no_wrap=True)
    table.add_column("transport · modes")
    table.add_column("note")
    for r in rows:
        table.add_row(
            r["id"],
            r["state"],
            r["version"] or "—",
            r["recorded_range"],
            f"{r['transport']} · {', '.join(r['modes'])}",
            r["warning"] or r["detail"] or "",
        )
    console.print(table)
    console.print(f"[dim]{LOGIN_NOTE}[/dim]")


def run_list(*, as_json: bool, probe: bool) -> int:
    rows = [_row(probe_agent(spec, os.environ, probe=probe)) for spec in AGENTS.values()]
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
    else:
        _print(rows)
    return 0


def run_probe(agent_id: str, *, as_json: bool) -> int:
    try:
        spec = get_agent(agent_id)
    except UnknownAgentError as exc:
        print(f"asup agents probe: {exc}", file=sys.stderr)
        return 2
    row = _row(probe_agent(spec, os.environ))
    if as_json:
        print(json.dumps(row, ensure_ascii=False))
    else:
        _print([row])
    return 0 if row["state"] == "installed" else 1
