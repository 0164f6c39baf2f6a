"""Is an agent's CLI installed, and which version? From ``--version`` and its exit code only.

asup never opens a vendor's credential store, not even to see whether a login exists: a probe
runs ``<binary> --version`` with a minimal environment (PATH, a throwaway HOME, locale — no
credential of any kind) and reads what it prints. Whether the user is logged in is unknown to
asup, and every listing says so.

Running ``--version`` costs a Node.js start (45–110 ms) on every run, so a found version can be
kept in a small cache file (``cache``: ``<cache dir>/probes.json``), keyed by the binary's
identity — its resolved path, device, inode, size and modification time in nanoseconds. Any
reinstall or upgrade changes the key, so a stale entry is never read; only ``installed``
results are kept (a broken probe is tried again next time). A cache that cannot be read or
written is ignored: the probe runs as if there were none.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from supervisor.registry import AgentSpec, parse_version

__all__ = ["LOGIN_NOTE", "PROBE_CACHE", "Probe", "ProbeState", "probe_agent"]

LOGIN_NOTE = "login not verified — asup cannot know"
PROBE_TIMEOUT_S = 15.0
PROBE_CACHE = "probes.json"  # in the user's cache dir (supervisor.paths.cache_dir)


class ProbeState(StrEnum):
    INSTALLED = "installed"
    NOT_INSTALLED = "not installed"
    BROKEN = "broken"  # found, but --version failed or printed something unreadable
    NOT_PROBED = "not probed"


@dataclass(frozen=True, slots=True)
class Probe:
    agent: str
    state: ProbeState
    binary_path: str | None = None
    version: str | None = None
    in_recorded_range: bool | None = None
    detail: str | None = None

    @property
    def warning(self) -> str | None:
        if self.state is ProbeState.INSTALLED and self.in_recorded_range is False:
            return (
                f"version {self.version} is outside the range asup's fixtures were recorded "
                "against; its stream may have changed (unknown lines will show it)"
            )
        return None


def _probe_env(host_env: Mapping[str, str], home: str) -> dict[str, str]:
    env = {"PATH": host_env.get("PATH", os.defpath), "HOME": home, "TMPDIR": home}
    for name in ("LANG", "LC_ALL", "TERM"):
        if name in host_env:
            env[name] = host_env[name]
    return env


def _probe_npm_package(agent: AgentSpec, path: str) -> Probe:
    """The version in the npm package that holds the resolved binary (the nearest
    ``package.json`` above it with a version): for agents without a ``--version``."""
    real = Path(os.path.realpath(path))
    for parent in real.parents:
        manifest = parent / "package.json"
        if not manifest.is_file():
            continue
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        version = data.get("version") if isinstance(data, dict) else None
        if isinstance(version, str):
            parsed = agent.parse_version_output(version)
            if parsed is None:
                break
            return Probe(
                agent.id, ProbeState.INSTALLED, path, parsed, agent.recorded_range.contains(parsed)
            )
        if parent.name == "node_modules":
            break
    return Probe(
        agent.id,
        ProbeState.BROKEN,
        path,
        detail=f"cannot read the version of {agent.binary}: no npm package.json above {real}",
    )


def _identity(path: str) -> str | None:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}|{st.st_dev}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}"


def _cache_read(cache: Path, key: str) -> str | None:
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _cache_write(cache: Path, key: str, version: str) -> None:
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}  # missing or unreadable: start it afresh
    if not isinstance(data, dict):
        data = {}
    try:
        # keep one entry a binary path: an upgraded binary replaces its old entry
        path = key.split("|", 1)[0]
        data = {k: v for k, v in data.items() if k.split("|", 1)[0] != path}
        data[key] = version
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        os.replace(tmp, cache)
    except (OSError, ValueError):
        return


def probe_agent(
    agent: AgentSpec,
    host_env: Mapping[str, str],
    *,
    probe: bool = True,
    cache: Path | None = None,
) -> Probe:
    path = shutil.which(agent.binary, path=host_env.get("PATH", os.defpath))
    if path is None:
        return Probe(agent.id, ProbeState.NOT_INSTALLED, detail=f"{agent.binary} is not on PATH")
    if agent.transport == "acp":
        # ACP agents have no --version (claude-agent-acp starts serving, codex-acp exits 2):
        # their npm package says which version is installed, and nothing is run.
        return _probe_npm_package(agent, path)
    if not probe:
        return Probe(agent.id, ProbeState.NOT_PROBED, binary_path=path)
    key = _identity(path) if cache is not None else None
    if cache is not None and key is not None:
        cached = _cache_read(cache, key)
        if cached is not None and parse_version(cached) is not None:
            return Probe(
                agent.id, ProbeState.INSTALLED, path, cached, agent.recorded_range.contains(cached)
            )
    result = _run_version(agent, path, host_env)
    if cache is not None and key is not None and result.version is not None:
        _cache_write(cache, key, result.version)
    return result


def _run_version(agent: AgentSpec, path: str, host_env: Mapping[str, str]) -> Probe:
    with tempfile.TemporaryDirectory(prefix="asup-probe-") as home:
        try:
            proc = subprocess.run(
                [path, *agent.version_args],
                env=_probe_env(host_env, home),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return Probe(
                agent.id,
                ProbeState.BROKEN,
                path,
                detail=f"`{agent.binary} --version` did not answer in {PROBE_TIMEOUT_S:.0f} s",
            )
        except OSError as exc:
            return Probe(agent.id, ProbeState.BROKEN, path, detail=f"cannot run {path}: {exc}")
    output = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return Probe(
            agent.id,
            ProbeState.BROKEN,
            path,
            detail=f"`{agent.binary} --version` exited {proc.returncode}: {tail[0]}".rstrip(": "),
        )
    version = agent.parse_version_output(output)
    if version is None:
        return Probe(
            agent.id,
            ProbeState.BROKEN,
            path,
            detail=f"cannot read a version in {output.strip()[:80]!r}",
        )
    return Probe(
        agent.id,
        ProbeState.INSTALLED,
        path,
        version,
        agent.recorded_range.contains(version),
    )
