"""Where agent-supervisor keeps its files: the per-user state, config and cache directories.

Each function reads one XDG variable from ``env`` (default: the process environment). An
absolute value wins on every platform, so a user or a test can move the directory anywhere::

    XDG_STATE_HOME=/tmp/s  →  state_dir()  == /tmp/s/agent-supervisor
    XDG_CONFIG_HOME=/tmp/c →  config_dir() == /tmp/c/agent-supervisor
    XDG_CACHE_HOME=/tmp/k  →  cache_dir()  == /tmp/k/agent-supervisor

An empty or relative value is ignored, as the XDG Base Directory specification asks. Without a
usable value the platform's default comes from platformdirs (``~/.local/state/agent-supervisor``
on Linux, ``~/Library/Application Support/agent-supervisor`` on macOS). platformdirs reads the
process environment itself (``HOME``, and on Linux and macOS the same XDG variable), so the
default follows the process, not ``env``.

Nothing here creates a directory; the code that writes into one creates it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import platformdirs

__all__ = ["APP_NAME", "cache_dir", "config_dir", "state_dir"]

APP_NAME = "agent-supervisor"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Runs, worktrees and the run store: ``$XDG_STATE_HOME/agent-supervisor``."""
    return _user_dir(env, "XDG_STATE_HOME", platformdirs.user_state_path)


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """Configuration and sandbox profiles of the user: ``$XDG_CONFIG_HOME/agent-supervisor``."""
    return _user_dir(env, "XDG_CONFIG_HOME", platformdirs.user_config_path)


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Files that can be rebuilt at any time: ``$XDG_CACHE_HOME/agent-supervisor``."""
    return _user_dir(env, "XDG_CACHE_HOME", platformdirs.user_cache_path)


def _user_dir(
    env: Mapping[str, str] | None, variable: str, platform_default: Callable[..., Path]
) -> Path:
    value = (os.environ if env is None else env).get(variable, "")
    if os.path.isabs(value):
        return Path(value) / APP_NAME
    return platform_default(APP_NAME, appauthor=False)
