"""`asup replay`: exit statuses, the JSON shape, the plain view."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.cli.main import main
from supervisor.lab.expect import transcripts

ALL = transcripts()
REQUIRED = {
    "agent",
    "events",
    "unknown_lines",
    "session_id",
    "model",
    "final_text",
    "outcome",
    "failure_kind",
    "tool_calls",
    "file_changes",
    "usage",
    "cost_usd",
    "turns",
    "permission_denials",
}


def _by_scenario(agent: str, scenario: str) -> Path:
    for t in ALL:
        if t.agent == agent and t.scenario == scenario and t.is_last_step:
            return t.path
    raise AssertionError(f"no fixture {agent}/{scenario}")


@pytest.mark.parametrize(
    ("agent", "scenario", "exit_code", "outcome", "kind"),
    [
        ("claude-cli", "http_500", 1, "failed", "server_error"),
        ("claude-cli", "http_401", 1, "failed", "auth"),
        ("claude-cli", "cut_mid_tool_call", 1, "failed", "stream_cut"),
        ("claude-cli", "stream_error", 1, "failed", "overloaded"),
        ("claude-cli", "plain_text", 0, "completed", None),
        ("codex-cli", "http_500", 1, "failed", "server_error"),
        ("codex-cli", "http_401", 1, "failed", "auth"),
        ("codex-cli", "cut_mid_tool_call", 1, "failed", "stream_cut"),
        ("codex-cli", "plain_text", 0, "completed", None),
    ],
)
def test_replay_json_outcomes(
    capsys: pytest.CaptureFixture[str],
    agent: str,
    scenario: str,
    exit_code: int,
    outcome: str,
    kind: str | None,
) -> None:
    path = _by_scenario(agent, scenario)
    meta = json.loads(path.with_name(f"{scenario}.meta.json").read_text())
    assert meta["exit_code"] == exit_code
    code = main(["replay", "--agent", agent, "--exit-code", str(exit_code), "--json", str(path)])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= REQUIRED
    assert data["agent"] == agent
    assert (data["outcome"], data["failure_kind"]) == (outcome, kind)
    assert all({"name", "id"} <= set(c) for c in data["tool_calls"])


def test_replay_reads_the_stderr_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _by_scenario("codex-cli", "plain_text")
    stderr = tmp_path / "stderr.txt"
    stderr.write_text("Refusing to create helper binaries under temporary dir\n")
    assert (
        main(["replay", "--agent", "codex-cli", "--stderr", str(stderr), "--json", str(path)]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert (data["outcome"], data["failure_kind"]) == ("failed", "sandbox_unavailable")


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--agent", "nobody", "x.jsonl"], "unknown agent 'nobody'"),
        (["--agent", "claude-cli", "/nonexistent/x.jsonl"], "cannot read the transcript"),
        (["--agent", "claude-cli", "/"], "is a directory"),
        (["--agent", "claude-cli", "--stderr", "/nonexistent", "/dev/null"], "stderr file"),
    ],
)
def test_unusable_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], reason: str
) -> None:
    assert main(["replay", *args]) == 2
    err = capsys.readouterr().err
    assert reason in err
    assert len(err.strip().splitlines()) == 1


def test_plain_view_renders_missing_figures_as_missing() -> None:
    path = _by_scenario("codex-cli", "plain_text")
    proc = subprocess.run(
        [sys.executable, "-m", "supervisor.cli.main", "replay", "--agent", "codex-cli", str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    )
    assert "outcome" in proc.stdout
    assert "completed" in proc.stdout
    cost_line = next(line for line in proc.stdout.splitlines() if line.startswith("cost"))
    assert "—" in cost_line  # codex reports no cost: missing, never $0
