"""Probing agents from --version and exit codes only; `asup agents list/probe`."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from supervisor.cli.main import main
from supervisor.probe import LOGIN_NOTE, ProbeState, probe_agent
from supervisor.registry import AGENTS


def fake_cli(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    return d


def env_with(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_installed_in_range(bin_dir: Path) -> None:
    fake_cli(bin_dir, "claude", 'echo "2.1.197 (Claude Code)"')
    p = probe_agent(AGENTS["claude-cli"], env_with(bin_dir))
    assert (p.state, p.version, p.in_recorded_range, p.warning) == (
        ProbeState.INSTALLED,
        "2.1.197",
        True,
        None,
    )


def test_out_of_range_is_a_warning_not_a_refusal(bin_dir: Path) -> None:
    fake_cli(bin_dir, "codex", 'echo "codex-cli 0.999.0"')
    p = probe_agent(AGENTS["codex-cli"], env_with(bin_dir))
    assert p.state is ProbeState.INSTALLED
    assert p.in_recorded_range is False
    assert p.warning is not None
    assert "outside the range" in p.warning


def test_not_installed(bin_dir: Path) -> None:
    p = probe_agent(AGENTS["claude-cli"], env_with(bin_dir))
    assert p.state is ProbeState.NOT_INSTALLED
    assert p.detail == "claude is not on PATH"


def test_not_probed_runs_nothing(bin_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    fake_cli(bin_dir, "claude", f'touch "{marker}"; echo "2.1.197 (Claude Code)"')
    p = probe_agent(AGENTS["claude-cli"], env_with(bin_dir), probe=False)
    assert p.state is ProbeState.NOT_PROBED
    assert not marker.exists()


def test_failing_version_is_broken_with_its_exit_code(bin_dir: Path) -> None:
    fake_cli(bin_dir, "claude", 'echo "cannot start: missing lib" >&2; exit 3')
    p = probe_agent(AGENTS["claude-cli"], env_with(bin_dir))
    assert p.state is ProbeState.BROKEN
    assert p.detail is not None
    assert "exited 3" in p.detail
    assert "missing lib" in p.detail


def test_probe_passes_no_credential_and_no_real_home(bin_dir: Path, tmp_path: Path) -> None:
    dump = tmp_path / "env.txt"
    fake_cli(bin_dir, "claude", f'env > "{dump}"; echo "2.1.197 (Claude Code)"')
    host = {**env_with(bin_dir), "ANTHROPIC_API_KEY": "sk-secret", "HOME": "/root"}
    probe_agent(AGENTS["claude-cli"], host)
    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert "ANTHROPIC_API_KEY" not in seen
    assert seen["HOME"] != "/root"
    assert "sk-secret" not in dump.read_text()


def test_cli_list_json_says_login_is_unknown(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cli(bin_dir, "claude", 'echo "2.1.197 (Claude Code)"')
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert main(["agents", "list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(AGENTS)
    assert rows["claude-cli"]["state"] == "installed"
    assert rows["codex-cli"]["state"] == "not installed"
    assert all(r["login"] == LOGIN_NOTE for r in rows.values())


def test_cli_probe_exit_status(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert main(["agents", "probe", "claude-cli", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["state"] == "not installed"
    assert main(["agents", "probe", "nobody"]) == 2
    assert "unknown agent 'nobody'" in capsys.readouterr().err


def test_acp_agent_version_comes_from_its_npm_package_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    pkg = tmp_path / "node_modules" / "@zed-industries" / "codex-acp"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text('{"name": "@zed-industries/codex-acp", "version": "0.16.0"}')
    fake_cli(pkg / "bin", "codex-acp", f'touch "{marker}"')
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "codex-acp").symlink_to(pkg / "bin" / "codex-acp")
    p = probe_agent(AGENTS["codex-acp"], env_with(bin_dir))
    assert (p.state, p.version, p.in_recorded_range) == (ProbeState.INSTALLED, "0.16.0", True)
    assert not marker.exists()


def test_a_found_version_is_cached_by_the_binarys_identity(bin_dir: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cache = tmp_path / "cache" / "probes.json"
    fake_cli(bin_dir, "claude", f'echo x >> "{runs}"; echo "2.1.197 (Claude Code)"')
    first = probe_agent(AGENTS["claude-cli"], env_with(bin_dir), cache=cache)
    second = probe_agent(AGENTS["claude-cli"], env_with(bin_dir), cache=cache)
    assert first == second
    assert second.version == "2.1.197"
    assert runs.read_text().count("x") == 1  # the second answer came from the cache


def test_an_upgraded_binary_is_probed_again(bin_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "probes.json"
    fake_cli(bin_dir, "claude", 'echo "2.1.197 (Claude Code)"')
    assert probe_agent(AGENTS["claude-cli"], env_with(bin_dir), cache=cache).version == "2.1.197"
    fake_cli(bin_dir, "claude", 'echo "2.1.300 (Claude Code)" # a longer file: another size')
    upgraded = probe_agent(AGENTS["claude-cli"], env_with(bin_dir), cache=cache)
    assert upgraded.version == "2.1.300"
    assert upgraded.in_recorded_range is False
    assert len(json.loads(cache.read_text())) == 1  # the old entry was replaced


def test_a_broken_probe_is_not_cached_and_a_bad_cache_is_ignored(
    bin_dir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "probes.json"
    fake_cli(bin_dir, "claude", "exit 3")
    assert probe_agent(AGENTS["claude-cli"], env_with(bin_dir), cache=cache).state is (
        ProbeState.BROKEN
    )
    assert not cache.exists()
    cache.write_text("{not json")
    fake_cli(bin_dir, "claude", 'echo "2.1.197 (Claude Code)"')
    p = probe_agent(AGENTS["claude-cli"], env_with(bin_dir), cache=cache)
    assert (p.state, p.version) == (ProbeState.INSTALLED, "2.1.197")
    assert json.loads(cache.read_text()) != {}  # rewritten whole
