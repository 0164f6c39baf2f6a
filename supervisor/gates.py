"""The gates a run must pass before anything starts, in this order:

1. **CI** — hard off when the ``CI`` variable is set to anything but ``""``, ``false`` or ``0``
   (any case). Checked before the config is read, so a broken config cannot matter in CI and
   no config can turn asup on there.
2. **Remote session** — off when the session came in over SSH: ``SSH_CONNECTION``,
   ``SSH_CLIENT`` or ``SSH_TTY`` is set (sshd sets them for the session it starts and they are
   inherited, through tmux or screen too). asup is a tool for the person at the machine, who
   sees the agent and can stop it; a run over a remote transport has no such person. A session
   is taken as local when none of them is set: the gate looks only at the environment, so it
   stays a pure function that tests can pin.
3. **Enabled** — off until the user turns it on (``asup config enable``).
4. **Agent block-list** — the agent is not in ``blocked_agents``.

Each refusal is its own :class:`~supervisor.errors.GateClosed` subclass with a stable ``code``
and a sentence naming the cause and the fix. The gate functions are pure over the environment
mapping and the config they are given; :func:`check_run_gates` reads the config file (only
after the environment gates passed).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from supervisor.config import Config, config_path, load_config
from supervisor.errors import GateClosed

__all__ = [
    "REMOTE_VARIABLES",
    "AgentBlocked",
    "CiGateClosed",
    "NotEnabled",
    "RemoteSession",
    "check_config_gates",
    "check_env_gates",
    "check_run_gates",
]

REMOTE_VARIABLES = ("SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY")
_CI_OFF_VALUES = frozenset({"", "false", "0"})


class CiGateClosed(GateClosed):
    code = "gate_ci"


class RemoteSession(GateClosed):
    code = "gate_remote"


class NotEnabled(GateClosed):
    code = "gate_not_enabled"


class AgentBlocked(GateClosed):
    code = "gate_agent_blocked"


def check_env_gates(env: Mapping[str, str]) -> None:
    """Gates 1 and 2: CI, then a remote session. Pure over ``env``."""
    ci = env.get("CI")
    if ci is not None and ci.strip().lower() not in _CI_OFF_VALUES:
        raise CiGateClosed(
            f"asup does not run in CI (the CI variable is {ci!r}); run it on your own machine, "
            "or set CI=false if this shell is not a CI job"
        )
    for name in REMOTE_VARIABLES:
        if env.get(name):
            raise RemoteSession(
                f"asup does not start runs over a remote session ({name} is set); run it from "
                "a terminal on this machine"
            )


def check_config_gates(config: Config, agent: str, *, config_file: Path | str) -> None:
    """Gates 3 and 4: enabled, then the block-list. Pure over ``config``; ``config_file`` is
    only named in the sentences."""
    if not config.enabled:
        raise NotEnabled(
            f"asup is off for this user until it is turned on; run `asup config enable` "
            f"(it sets enabled = true in {config_file})"
        )
    if agent in config.blocked_agents:
        raise AgentBlocked(
            f"the agent {agent} is blocked by blocked_agents in {config_file}; remove it from "
            "that list or choose another agent"
        )


def check_run_gates(env: Mapping[str, str], agent: str, *, config_file: Path | None = None) -> None:
    """All four gates in order, reading the config file (default: ``config.toml`` in the XDG
    config directory of ``env``) only after the environment gates passed."""
    check_env_gates(env)
    path = config_path(env=env) if config_file is None else config_file
    check_config_gates(load_config(path), agent, config_file=path)
