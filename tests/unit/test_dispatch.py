"""dispatch_run without bubblewrap: the launcher refusals and the ASUP_ALLOW_UNSANDBOXED hatch.

The agent is a stand-in script that answers ``--version`` like claude 2.1.197 and prints a
transcript the real claude recorded (fixtures/external); everything else is real: the
worktree, the store, the codec, the supervised process.
"""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import anyio
import pytest

from supervisor.dispatch import RunRequest, dispatch_run
from supervisor.errors import Refusal, SandboxUnavailable
from supervisor.events import OutcomeStatus, RunEvent, WarningRaised
from supervisor.registry import Mode
from supervisor.sandbox.profile import NetworkMode
from supervisor.store import RunStore

FIXTURE = (
    Path(__file__).resolve().parents[2] / "fixtures/external/claude-cli/2.1.197/plain_text.jsonl"
)


def script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, object]:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for args in (
        ["init", "-q"],
        ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "i"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], env=env, check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(
        bin_dir / "claude",
        'if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi\n'
        f"exec /bin/cat {FIXTURE}",
    )
    host_env = {
        "PATH": str(bin_dir),  # no bwrap on it
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ANTHROPIC_API_KEY": "dummy",
    }
    return {"repo": repo, "bin": bin_dir, "env": host_env, "state": tmp_path / "state"}


def run(world: dict[str, object], **kwargs: object) -> tuple[object, list[RunEvent]]:
    events: list[RunEvent] = []
    request = RunRequest(agent="claude-cli", task="say hi", repo=world["repo"], **kwargs)  # type: ignore[arg-type]
    env = world["env"]
    assert isinstance(env, dict)

    async def go() -> object:
        return await dispatch_run(request, host_env=env, on_event=events.append)

    return anyio.run(go), events


def only_run(world: dict[str, object]) -> object:
    state = world["state"]
    assert isinstance(state, Path)
    with RunStore(state / "agent-supervisor") as store:
        runs = store.list()
    assert len(runs) == 1
    return runs[0]


def test_missing_launcher_refuses_and_names_the_fix(world: dict[str, object]) -> None:
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        run(world)
    record = only_run(world)
    assert record.outcome is OutcomeStatus.REFUSED  # type: ignore[attr-defined]
    worktrees = world["state"] / "agent-supervisor" / "worktrees"  # type: ignore[operator]
    assert list(worktrees.iterdir()) == []


def test_hatch_never_reaches_a_restricted_or_none_network(world: dict[str, object]) -> None:
    world["env"] = {**world["env"], "ASUP_ALLOW_UNSANDBOXED": "1"}  # type: ignore[dict-item]
    for network in (None, NetworkMode.NONE):
        with pytest.raises(Refusal) as info:
            run(world, network=network)
        assert info.value.code == "unsandboxed_network"
        assert "never gets a wider network" in str(info.value)


def test_hatch_runs_an_open_network_run_unsandboxed_and_says_so(
    world: dict[str, object],
) -> None:
    world["env"] = {**world["env"], "ASUP_ALLOW_UNSANDBOXED": "1"}  # type: ignore[dict-item]
    report, events = run(world, network=NetworkMode.OPEN)
    assert report.outcome.status is OutcomeStatus.COMPLETED  # type: ignore[attr-defined]
    warnings = [e for e in events if isinstance(e, WarningRaised)]
    assert [w.code for w in warnings] == ["unsandboxed"]
    assert "WITHOUT a sandbox" in warnings[0].message
    assert report.argv[0].endswith("/claude")  # type: ignore[attr-defined]


def test_a_launcher_that_cannot_create_namespaces_is_refused(world: dict[str, object]) -> None:
    bin_dir = world["bin"]
    assert isinstance(bin_dir, Path)
    script(bin_dir / "bwrap", 'echo "bwrap: No permissions to creating new namespace" >&2; exit 1')
    with pytest.raises(SandboxUnavailable, match="No permissions to creating new namespace"):
        run(world)
    # the hatch does not cover a launcher that is there but cannot start
    world["env"] = {**world["env"], "ASUP_ALLOW_UNSANDBOXED": "1"}  # type: ignore[dict-item]
    with pytest.raises(SandboxUnavailable, match="user namespaces"):
        run(world, network=NetworkMode.OPEN)


def test_codex_write_run_needs_a_verified_version(world: dict[str, object]) -> None:
    bin_dir = world["bin"]
    assert isinstance(bin_dir, Path)
    script(bin_dir / "codex", 'echo "codex-cli 0.999.0"')
    events: list[RunEvent] = []
    request = RunRequest(
        agent="codex-cli",
        task="t",
        repo=world["repo"],  # type: ignore[arg-type]
        mode=Mode.WORKTREE_WRITE,
    )
    env = world["env"]
    assert isinstance(env, dict)

    async def go() -> object:
        return await dispatch_run(request, host_env=env, on_event=events.append)

    with pytest.raises(Refusal) as info:
        anyio.run(go)
    assert info.value.code == "write_version_unverified"
    assert "0.999.0 is outside the versions asup verified" in str(info.value)
    assert events == []  # refused before anything was recorded or started
