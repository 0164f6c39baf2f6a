"""The agent-specific half of the lab: how to run one vendor CLI against the fake model server.

The recorder (:mod:`supervisor.lab.recorder`) does everything that is the same for every agent:
it makes a work directory with a scratch git repo, a per-run HOME and an ``outside`` directory,
spawns :mod:`supervisor.lab.netns_child` inside a fresh network namespace (only ``lo`` exists),
and that child starts :class:`~supervisor.lab.server.FakeModelServer` on 127.0.0.1 for each step
and runs the CLI with stdin ``/dev/null``, cwd = the repo, and a timeout. What differs per agent
sits behind :class:`AgentLab`; the child calls it in this order, for each step of a scenario::

    lab = get_lab(agent_id)                      # once; runs inside the netns
    version = lab.version()                      # `<binary> --version`, parsed via the registry
    lab.prepare_home(ctx)                        # write config files under ctx.home (idempotent:
                                                 #   called again before every step, new base_url)
    session = lab.new_session_id()               # for a step with session="new" (or None)
    argv = lab.argv(step, ctx, session_id=...)   # session_id: the new id, the id to resume, None
    env = lab.env(ctx)                           # the COMPLETE child env (an allowlist)
    ... run argv with env ...
    kept = session or lab.session_id_from_stdout(stdout)   # after a "new" step

Rules for an implementation:

- Build the env from nothing: :func:`base_env` (PATH, HOME, LANG, USER, LOGNAME, TMPDIR) plus
  the agent's own variables plus ``ctx.scenario.env``. Never pass host credentials; a dummy key
  only. Never read the vendor's real credential store: everything lives under ``ctx.home``.
- Point the CLI at ``ctx.base_url`` only (``http://127.0.0.1:<port>``, no path). The server
  routes ``POST`` paths through :data:`supervisor.lab.server.WIRES`; ``wire_paths`` names the
  ones this agent uses (documentation and a sanity check).
- ``binary()`` returns the pinned binary under ``vendor/node_modules/.bin``; ``installed()``
  says whether it exists (e2e tests skip only on that).
- ``ctx.workdir`` (and so repo/home/outside) may sit under /tmp (pytest's ``tmp_path``): an agent
  that refuses to keep state under a temporary dir must choose its state dir elsewhere itself.

Register an implementation in :data:`supervisor.lab.agents.LABS` (agent id → ``module:Class``).
"""

from __future__ import annotations

import abc
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from supervisor.lab.scenarios import Scenario, Step
from supervisor.registry import get_agent

__all__ = ["VENDOR_BIN", "AgentLab", "RunContext", "VersionUnknownError", "base_env"]

VENDOR_BIN = Path(__file__).resolve().parents[3] / "vendor" / "node_modules" / ".bin"


@dataclass(frozen=True, slots=True)
class RunContext:
    """Where one scenario run happens. ``base_url`` is the fake server of the current step."""

    scenario: Scenario
    workdir: Path
    repo: Path
    home: Path
    outside: Path
    base_url: str

    @property
    def tmpdir(self) -> Path:
        return self.workdir / "tmp"

    def placeholders(self) -> dict[str, str]:
        """Placeholder → real path, longest path first (so nested paths are replaced right)."""
        pairs = {
            "<repo>": str(self.repo),
            "<outside>": str(self.outside),
            "<home>": str(self.home),
            "<tmp>": str(self.tmpdir),
            "<workdir>": str(self.workdir),
        }
        return dict(sorted(pairs.items(), key=lambda kv: -len(kv[1])))


class VersionUnknownError(RuntimeError):
    pass


def base_env(ctx: RunContext) -> dict[str, str]:
    """The variables every child gets: a PATH that finds node and git, and per-run dirs."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(ctx.home),
        "LANG": "C.UTF-8",
        "USER": "lab",
        "LOGNAME": "lab",
        "TMPDIR": str(ctx.tmpdir),
    }


class AgentLab(abc.ABC):
    """How to run one vendor CLI headless against the fake model server."""

    agent_id: ClassVar[str]
    binary_name: ClassVar[str]
    wire_paths: ClassVar[tuple[str, ...]]

    def binary(self) -> Path:
        return VENDOR_BIN / self.binary_name

    def installed(self) -> bool:
        return self.binary().exists()

    def version(self) -> str:
        """The vendor version from ``--version``, parsed with the registry's regex."""
        spec = get_agent(self.agent_id)
        out = subprocess.run(
            [str(self.binary()), *spec.version_args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        version = spec.parse_version_output(out.stdout)
        if version is None:
            raise VersionUnknownError(
                f"{self.binary()} --version printed {out.stdout.strip()!r}: no version found"
            )
        return version

    @abc.abstractmethod
    def prepare_home(self, ctx: RunContext) -> None:
        """Write the config files the CLI needs under ``ctx.home`` (before every step)."""

    @abc.abstractmethod
    def env(self, ctx: RunContext) -> dict[str, str]:
        """The complete environment of the child (start from :func:`base_env`)."""

    @abc.abstractmethod
    def argv(self, step: Step, ctx: RunContext, *, session_id: str | None) -> list[str]:
        """The full argv (binary first) for one step."""

    def new_session_id(self) -> str | None:
        """An id to start a ``session="new"`` step with, if the CLI accepts one up front."""
        return None

    @abc.abstractmethod
    def session_id_from_stdout(self, stdout: bytes) -> str | None:
        """The session / thread id a run reported (to resume it in a later step)."""
