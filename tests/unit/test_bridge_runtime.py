"""What the in-sandbox bridge needs mounted must never expose the home directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from supervisor.errors import SandboxUnavailable
from supervisor.sandbox.bridge import BridgeRuntime


def test_a_python_installed_over_the_home_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "py").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sys, "base_prefix", str(home))
    with pytest.raises(SandboxUnavailable, match="holds the home directory"):
        BridgeRuntime.current()


def test_a_python_below_the_home_is_mounted_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    prefix = home / ".pyenv" / "versions" / "3.11"
    prefix.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sys, "base_prefix", str(prefix))
    runtime = BridgeRuntime.current()
    assert str(prefix) in runtime.paths
    assert str(home) not in runtime.paths
