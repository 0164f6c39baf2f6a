"""`asup agents list` for gemini-acp and opencode-acp: the version comes from the npm package
that holds the binary, laid out as the pinned packages are (gemini's bin is a script in
``@google/gemini-cli/bundle``, opencode's a native ``bin/opencode.exe``), and nothing runs."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from supervisor.cli.main import main
from supervisor.probe import ProbeState, probe_agent
from supervisor.registry import AGENTS

LAYOUT = {
    # agent: (package dir under node_modules, binary inside it, bin name, version)
    "gemini-acp": ("@google/gemini-cli", "bundle/gemini.js", "gemini", "0.61.0"),
    "opencode-acp": ("opencode-ai", "bin/opencode.exe", "opencode", "1.18.33"),
}


def install(root: Path, agent: str, version: str | None = None) -> tuple[Path, Path]:
    pkg_dir, inner, name, pinned = LAYOUT[agent]
    pkg = root / "node_modules" / pkg_dir
    target = pkg / inner
    target.parent.mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": pkg_dir, "version": version or pinned}))
    marker = root / f"{name}.ran"
    target.write_text(f'#!/bin/sh\ntouch "{marker}"\n')
    target.chmod(target.stat().st_mode | stat.S_IXUSR)
    bin_dir = root / "node_modules" / ".bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).symlink_to(target)
    return bin_dir, marker


@pytest.mark.parametrize("agent", sorted(LAYOUT))
def test_probe_reads_the_package_and_runs_nothing(tmp_path: Path, agent: str) -> None:
    bin_dir, marker = install(tmp_path, agent)
    p = probe_agent(AGENTS[agent], {"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert (p.state, p.version, p.in_recorded_range) == (
        ProbeState.INSTALLED,
        LAYOUT[agent][3],
        True,
    )
    assert p.warning is None
    assert not marker.exists()


def test_a_version_outside_the_recorded_range_warns(tmp_path: Path) -> None:
    bin_dir, _ = install(tmp_path, "gemini-acp", "0.62.0")
    p = probe_agent(AGENTS["gemini-acp"], {"PATH": str(bin_dir)})
    assert (p.state, p.in_recorded_range) == (ProbeState.INSTALLED, False)
    assert p.warning is not None


def test_agents_list_shows_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir, _ = install(tmp_path, "gemini-acp")
    install(tmp_path, "opencode-acp")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert main(["agents", "list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    for agent, (_, _, binary, version) in LAYOUT.items():
        row = rows[agent]
        assert (row["state"], row["version"], row["recorded_range"]) == (
            "installed",
            version,
            version,
        )
        assert (row["transport"], row["binary"]) == ("acp", binary)
        assert row["modes"] == ["read-only", "worktree-write"]
