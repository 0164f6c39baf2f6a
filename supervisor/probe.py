"""Is an agent's CLI installed, and which version? From ``--version`` and its exit code only.

asup never opens a vendor's credential store, not even to see whether a login exists: a probe
runs ``<binary> --version`` with a minimal environment (PATH, a throwaway HOME, locale — no
credential of any kind) and reads what it prints. Whether the user is logged in is unknown to
asup, and every listing says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from supervisor.registry import AgentSpec

__all__ = ["LOGIN_NOTE", "Probe", "ProbeState", "probe_agent"]

LOGIN_NOTE = "login not verified — asup cannot know"
PROBE_TIMEOUT_S = 15.0


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


def probe_agent(agent: AgentSpec, host_env: Mapping[str, str], *, probe: bool = True) -> Probe:
    path = shutil.which(agent.binary, path=host_env.get("PATH", os.defpath))
    if path is None:
        return Probe(agent.id, ProbeState.NOT_INSTALLED, detail=f"{agent.binary} is not on PATH")
    if not probe:
        return Probe(agent.id, ProbeState.NOT_PROBED, binary_path=path)
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
