"""The per-user directories: XDG variables from the given environment, else the platform's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from supervisor.paths import APP_NAME, cache_dir, config_dir, state_dir

DirFn = Callable[..., Path]
CASES: list[tuple[DirFn, str]] = [
    (state_dir, "XDG_STATE_HOME"),
    (config_dir, "XDG_CONFIG_HOME"),
    (cache_dir, "XDG_CACHE_HOME"),
]
XDG_VARS = [var for _, var in CASES]


@pytest.fixture(autouse=True)
def no_process_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The process has no XDG variables and a home of its own in tmp."""
    for var in XDG_VARS:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.parametrize(("fn", "var"), CASES)
def test_xdg_variable_in_env_decides(fn: DirFn, var: str, tmp_path: Path) -> None:
    assert fn({var: str(tmp_path / "x")}) == tmp_path / "x" / APP_NAME


@pytest.mark.parametrize(("fn", "var"), CASES)
def test_process_environment_is_the_default(
    fn: DirFn, var: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(var, str(tmp_path / "from-process"))
    assert fn() == tmp_path / "from-process" / APP_NAME


@pytest.mark.parametrize(("fn", "var"), CASES)
def test_given_env_wins_over_the_process_environment(
    fn: DirFn, var: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(var, str(tmp_path / "from-process"))
    assert fn({var: str(tmp_path / "given")}) == tmp_path / "given" / APP_NAME


@pytest.mark.parametrize(("fn", "var"), CASES)
@pytest.mark.parametrize("value", ["", "relative/dir", "~/tilde"])
def test_empty_or_relative_value_falls_back_to_the_platform_default(
    fn: DirFn, var: str, value: str, no_process_xdg: Path
) -> None:
    got = fn({var: value})
    assert got.is_absolute()
    assert got.name == APP_NAME
    assert got.is_relative_to(no_process_xdg)
    assert got == fn({})


def test_nothing_is_created(tmp_path: Path) -> None:
    for fn, var in CASES:
        fn({var: str(tmp_path / "x")})
    assert not (tmp_path / "x").exists()
