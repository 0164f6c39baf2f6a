"""The user config (read, checked, written atomically) and the gates, in their order."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import supervisor.config as config_module
from supervisor.config import (
    Config,
    config_path,
    disable,
    enable,
    load_config,
    render_config,
    save_config,
)
from supervisor.errors import ConfigError, GateClosed, Refusal
from supervisor.gates import (
    AgentBlocked,
    CiGateClosed,
    NotEnabled,
    RemoteSession,
    check_config_gates,
    check_env_gates,
    check_run_gates,
)
from supervisor.sandbox.profile import NetworkMode

LOCAL: dict[str, str] = {"HOME": "/home/dev", "PATH": "/usr/bin"}  # no CI, no SSH


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- config -------------------------------------------------------------------------------------


def test_a_missing_file_is_the_default_config(tmp_path: Path) -> None:
    assert load_config(tmp_path / "config.toml") == Config()
    assert Config().enabled is False


def test_enable_and_disable_keep_the_other_settings(tmp_path: Path) -> None:
    path = write(
        tmp_path / "cfg" / "config.toml",
        'endpoint = "http://127.0.0.1:8080"\nblocked_agents = ["codex-cli"]\n'
        'default_network = "restricted"\n',
    )
    on = enable(path)
    assert on == Config(
        enabled=True,
        endpoint="http://127.0.0.1:8080",
        blocked_agents=("codex-cli",),
        default_network=NetworkMode.RESTRICTED,
    )
    assert load_config(path) == on
    assert "enabled = true\n" in path.read_text()
    off = disable(path)
    assert off == on.model_copy(update={"enabled": False})
    assert load_config(path) == off


def test_enable_creates_the_file_and_its_directory(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "config.toml"
    assert enable(path).enabled
    assert tomllib.loads(path.read_text()) == {"enabled": True, "blocked_agents": []}


def test_config_path_follows_xdg_config_home(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert config_path(env=env) == tmp_path / "agent-supervisor" / "config.toml"
    assert config_path(tmp_path / "elsewhere") == tmp_path / "elsewhere" / "config.toml"


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("enabled = true\nendpoint = = 'x'\n", 2, "not valid TOML (Invalid value)"),
        ("enabled = true\n\nendpoint = 'unterminated\n", 3, "not valid TOML"),
        ("enabled = true\nenabled = false\n", 2, "not valid TOML"),
        ("enabled = true\ncolour = 'blue'\n", 2, "colour is not a setting asup knows"),
        ('\n\nenabled = "yes"\n', 3, "enabled: Input should be a valid boolean"),
        ("default_network = 'wide'\n", 1, "default_network: Input should be 'none', 'open'"),
        ("endpoint = 'ftp://host'\n", 1, "endpoint: must be an http:// or https:// URL"),
        ("blocked_agents = 'codex-cli'\n", 1, "blocked_agents: Input should be a valid tuple"),
    ],
)
def test_a_broken_file_names_the_file_and_line(
    tmp_path: Path, text: str, line: int, what: str
) -> None:
    path = write(tmp_path / "config.toml", text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{path}, line {line}: {what}"), message
    assert message.count(";") == 1  # one sentence: the problem; the fix


def test_enable_refuses_to_rewrite_a_broken_file(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "enabled = \n")
    with pytest.raises(ConfigError, match="line 1"):
        enable(path)
    assert path.read_text() == "enabled = \n"


def test_render_round_trips_through_tomllib(tmp_path: Path) -> None:
    config = Config(
        enabled=True,
        endpoint='http://h/"quoted"\\back\tslash\x01\x7fé',
        blocked_agents=("a", "b\nc"),
        default_network=NetworkMode.NONE,
    )
    path = tmp_path / "config.toml"
    save_config(path, config)
    assert load_config(path) == config
    assert render_config(Config()) == (
        "# asup user config; `asup config enable` / `disable` rewrite this file.\n"
        "enabled = false\n"
        "blocked_agents = []\n"
    )


@given(st.text())
def test_any_string_survives_the_writer(value: str) -> None:
    assert tomllib.loads(f"k = {config_module._toml_string(value)}") == {"k": value}


def test_the_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "config.toml", "enabled = false\n")
    seen_during_write: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        seen_during_write.append(path.read_text())  # the old file is whole until the rename
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    enable(path)
    assert seen_during_write[0] == "enabled = false\n"
    assert load_config(path).enabled
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]  # no temp file left


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "config.toml", "enabled = false\n")

    def replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(ConfigError, match=r"cannot write the config file .*No space left"):
        enable(path)
    assert path.read_text() == "enabled = false\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


# -- gates --------------------------------------------------------------------------------------


def enabled_config(tmp_path: Path, extra: str = "") -> Path:
    return write(tmp_path / "config.toml", "enabled = true\n" + extra)


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE", "on"])
def test_ci_is_hard_off(tmp_path: Path, value: str) -> None:
    path = enabled_config(tmp_path)
    with pytest.raises(CiGateClosed) as err:
        check_run_gates({**LOCAL, "CI": value}, "claude-cli", config_file=path)
    assert str(err.value) == (
        f"asup does not run in CI (the CI variable is {value!r}); run it on your own machine, "
        "or set CI=false if this shell is not a CI job"
    )
    assert err.value.code == "gate_ci"


@pytest.mark.parametrize("value", ["", "false", "0", "False", " FALSE "])
def test_ci_values_that_mean_not_ci(tmp_path: Path, value: str) -> None:
    check_run_gates({**LOCAL, "CI": value}, "claude-cli", config_file=enabled_config(tmp_path))


def test_ci_refuses_before_the_config_is_read(tmp_path: Path) -> None:
    broken = write(tmp_path / "config.toml", "enabled = = true\n")
    with pytest.raises(ConfigError):  # the file really is broken …
        check_run_gates(LOCAL, "claude-cli", config_file=broken)
    with pytest.raises(CiGateClosed):  # … and CI never gets to read it
        check_run_gates({**LOCAL, "CI": "true"}, "claude-cli", config_file=broken)
    with pytest.raises(RemoteSession):  # nor does a remote session
        check_run_gates({**LOCAL, "SSH_TTY": "/dev/pts/3"}, "claude-cli", config_file=broken)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SSH_CONNECTION", "10.0.0.2 50122 10.0.0.1 22"),
        ("SSH_CLIENT", "10.0.0.2 50122 22"),
        ("SSH_TTY", "/dev/pts/3"),
    ],
)
def test_a_remote_session_is_refused(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(RemoteSession) as err:
        check_run_gates({**LOCAL, name: value}, "claude-cli", config_file=enabled_config(tmp_path))
    assert str(err.value) == (
        f"asup does not start runs over a remote session ({name} is set); run it from a "
        "terminal on this machine"
    )
    assert err.value.code == "gate_remote"


def test_ci_is_checked_before_the_remote_session() -> None:
    with pytest.raises(CiGateClosed):
        check_env_gates({"CI": "true", "SSH_CONNECTION": "10.0.0.2 50122 10.0.0.1 22"})
    check_env_gates({"SSH_CONNECTION": ""})  # set but empty: not a session sshd started


def test_not_enabled_says_how_to_enable(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    for config_file in (path, write(path, "enabled = false\n")):
        with pytest.raises(NotEnabled) as err:
            check_run_gates(LOCAL, "claude-cli", config_file=config_file)
        assert str(err.value) == (
            "asup is off for this user until it is turned on; run `asup config enable` "
            f"(it sets enabled = true in {path})"
        )
        assert err.value.code == "gate_not_enabled"


def test_a_blocked_agent_is_refused_and_the_others_pass(tmp_path: Path) -> None:
    path = enabled_config(tmp_path, 'blocked_agents = ["codex-cli"]\n')
    with pytest.raises(AgentBlocked) as err:
        check_run_gates(LOCAL, "codex-cli", config_file=path)
    assert str(err.value) == (
        f"the agent codex-cli is blocked by blocked_agents in {path}; remove it from that "
        "list or choose another agent"
    )
    assert err.value.code == "gate_agent_blocked"
    check_run_gates(LOCAL, "claude-cli", config_file=path)


def test_not_enabled_is_checked_before_the_block_list() -> None:
    config = Config(enabled=False, blocked_agents=("codex-cli",))
    with pytest.raises(NotEnabled):
        check_config_gates(config, "codex-cli", config_file="config.toml")


def test_the_default_config_file_comes_from_the_env(tmp_path: Path) -> None:
    env = {**LOCAL, "XDG_CONFIG_HOME": str(tmp_path)}
    with pytest.raises(NotEnabled, match=re.escape(str(config_path(env=env)))):
        check_run_gates(env, "claude-cli")
    enable(config_path(env=env))
    check_run_gates(env, "claude-cli")


def test_every_gate_is_a_refusal_with_its_own_code() -> None:
    gates = (CiGateClosed, RemoteSession, NotEnabled, AgentBlocked)
    assert all(issubclass(g, GateClosed) and issubclass(g, Refusal) for g in gates)
    assert len({g.code for g in gates} | {GateClosed.code}) == 5
