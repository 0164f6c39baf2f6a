"""The user's config: ``<config_dir>/config.toml``, read with tomllib, written atomically.

::

    enabled = true                      # off until `asup config enable`
    endpoint = "http://127.0.0.1:8080"  # the model API the agents are pointed at (optional)
    blocked_agents = ["codex-cli"]      # agents asup refuses to start
    default_network = "restricted"      # none | open | restricted (else the profile's own)

    [[policy.rules]]                    # permission rules for ACP agents (docs/policy.md)
    risk = "shell"
    pattern = "git status"
    decision = "allow"

A missing file is the default config (everything off). A file that is not valid TOML, names a
key asup does not know or gives a key a value of the wrong type raises :class:`ConfigError`
naming the file and the line; asup never guesses what a broken file meant.

asup writes the file itself only for ``asup config enable`` / ``disable``: the whole file is
rendered by the small writer below (the keys are booleans, strings, a list of strings, a
name and the policy rules as an array of tables; a TOML library would add a dependency for
nothing) to a temporary file in the same
directory, flushed to disk and renamed over the old one, so a reader sees the old file or the
new one and never half of one. Comments in the file are not kept by such a write.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError, field_validator

from supervisor import paths
from supervisor.errors import ConfigError
from supervisor.policy import Policy, policy_from_config
from supervisor.sandbox.profile import NetworkMode

__all__ = [
    "CONFIG_NAME",
    "Config",
    "config_path",
    "disable",
    "enable",
    "load_config",
    "render_config",
    "save_config",
]

CONFIG_NAME = "config.toml"


class Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Strict scalars: TOML has real booleans and strings, so "yes" is an error, not True.
    enabled: StrictBool = False
    endpoint: StrictStr | None = None
    blocked_agents: tuple[StrictStr, ...] = ()
    default_network: NetworkMode | None = None
    # The user's layer of the permission policy (between the defaults and a run's options).
    policy: Policy = Policy()

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^/\s]+", value):
            raise ValueError("must be an http:// or https:// URL")
        return value


def config_path(config_dir: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The config file in ``config_dir`` (default: the XDG config directory under ``env``)."""
    return (paths.config_dir(env) if config_dir is None else config_dir) / CONFIG_NAME


def _error_line(text: str, message: str) -> int:
    found = re.search(r"at line (\d+)", message)
    if found:
        return int(found.group(1))
    return max(1, len(text.rstrip("\n").split("\n")))  # "at end of document"


def _key_line(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


def _table_line(text: str, table: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if re.match(rf"\s*\[\[?\s*{re.escape(table)}[.\]\s]", line) or re.match(
            rf"\s*{re.escape(table)}\s*[.=]", line
        ):
            return number
    return None


def load_config(path: Path) -> Config:
    """Read and check the config file; a missing file gives the defaults."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read the config file {path} ({exc}); make it a readable UTF-8 file or "
            "remove it"
        ) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = re.sub(r"\s*\((at line \d+, column \d+|at end of document)\)$", "", str(exc))
        raise ConfigError(
            f"{path}, line {_error_line(text, str(exc))}: not valid TOML ({message}); fix that "
            "line or remove the file"
        ) from exc
    try:
        layer = policy_from_config(data)
    except ConfigError as exc:
        line = _table_line(text, "policy")
        where = f"{path}, line {line}" if line is not None else str(path)
        raise ConfigError(f"{where}: {exc}") from exc
    data.pop("policy", None)
    try:
        return Config.model_validate({**data, "policy": layer})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        key = ".".join(str(part) for part in loc)
        line = _key_line(text, str(loc[0])) if loc else None
        where = f"{path}, line {line}" if line is not None else str(path)
        if first["type"] == "extra_forbidden":
            known = ", ".join(Config.model_fields)
            problem = f"{key} is not a setting asup knows; remove it (the settings are {known})"
        else:
            problem = f"{key}: {first['msg'].removeprefix('Value error, ')}; fix that line"
        raise ConfigError(f"{where}: {problem}") from exc


def _toml_string(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # also NetworkMode, a StrEnum
        return _toml_string(str(value))
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML rendering for {type(value).__name__}")


def render_config(config: Config) -> str:
    """The file text for ``config``: every key that is not None, in field order, then each
    policy rule as a ``[[policy.rules]]`` table (tables come after the plain keys in TOML)."""
    lines = ["# asup user config; `asup config enable` / `disable` rewrite this file."]
    for name in Config.model_fields:
        value = getattr(config, name)
        if name != "policy" and value is not None:
            lines.append(f"{name} = {_toml_value(value)}")
    for rule in config.policy.rules:
        lines += [
            "",
            "[[policy.rules]]",
            f"risk = {_toml_string(str(rule.risk))}",
            f"pattern = {_toml_string(rule.pattern)}",
            f"decision = {_toml_string(str(rule.decision))}",
        ]
        if rule.hard:
            lines.append("hard = true")
    return "\n".join(lines) + "\n"


def save_config(path: Path, config: Config) -> None:
    """Write ``config`` to ``path`` atomically: a temporary file beside it, fsync, rename."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(render_config(config))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the config file {path} ({exc.strerror or exc}); make its directory "
            "writable"
        ) from exc


def _set_enabled(path: Path, enabled: bool) -> Config:
    config = load_config(path).model_copy(update={"enabled": enabled})
    save_config(path, config)
    return config


def enable(path: Path) -> Config:
    """Turn asup on for this user (``enabled = true``); the other settings are kept."""
    return _set_enabled(path, True)


def disable(path: Path) -> Config:
    """Turn asup off for this user (``enabled = false``); the other settings are kept."""
    return _set_enabled(path, False)
