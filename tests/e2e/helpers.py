"""What the end-to-end tests share: a git with a fixed environment and the scratch repository
it makes, a user machine's environment for `asup` subprocesses, the skip when a vendor binary
is absent, the JSON events a run prints, a conversation with a child on a pseudo-terminal, the
ACP transcript, the veth-joined network namespace a test host lives in, and the lab scenarios'
common checks.

Imported by the test modules as ``helpers`` (pytest puts this directory on ``sys.path``);
conftest.py has its assertions rewritten like a test module's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import subprocess
import sys
import termios
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from supervisor.codecs import decode_transcript
from supervisor.lab.agents.base import VENDOR_BIN
from supervisor.lab.expect import scenario_mismatches
from supervisor.lab.recorder import RecordedRun
from supervisor.lab.scenarios import Scenario
from supervisor.lab.script import Reply, Script
from supervisor.lab.server import FakeModelServer

ROOT = Path(__file__).resolve().parents[2]
ASUP = [sys.executable, "-m", "supervisor.cli.main"]
ACP_BIN = ROOT / "vendor" / "acp" / "node_modules" / ".bin"
GEMINI_BIN = ROOT / "vendor" / "gemini" / "node_modules" / ".bin"
OPENCODE_BIN = ROOT / "vendor" / "opencode" / "node_modules" / ".bin"
DUMMY_KEYS = {"ANTHROPIC_API_KEY": "dummy-anthropic-key", "OPENAI_API_KEY": "dummy-openai-key"}
README = "# project\n\nThe answer is 42.\n"

Events = list[dict[str, Any]]


# --- git ------------------------------------------------------------------------------------------


def git(repo: Path, *args: str, path: str | None = None, timeout: float | None = None) -> str:
    """``git -C repo …`` as a user with no git config of their own; its stdout. ``path`` is the
    PATH it runs with (this process's when None)."""
    env = {
        "PATH": os.environ["PATH"] if path is None else path,
        "HOME": str(repo.parent),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "user",
        "GIT_AUTHOR_EMAIL": "user@example.invalid",
        "GIT_COMMITTER_NAME": "user",
        "GIT_COMMITTER_EMAIL": "user@example.invalid",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    ).stdout


def scratch_repo(
    root: Path, files: Mapping[str, str] | None = None, *, path: str | None = None
) -> Path:
    """``root/project``: a repository on branch main whose one commit holds ``files`` (relative
    path → text; README only when None), made with :func:`git` (``path`` as there)."""
    repo = root / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", path=path)
    for rel, text in ({"README.md": README} if files is None else files).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", ".", path=path)
    git(repo, "commit", "-q", "-m", "init", path=path)
    return repo


def git_as_t(*args: str, cwd: Path, timeout: float | None = None) -> None:
    """git in ``cwd`` with this process's environment, committing as a throwaway identity."""
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=timeout,
    )


def linked_worktree(root: Path, readme: str, *, timeout: float | None = None) -> tuple[Path, Path]:
    """``root/repo`` with ``readme`` committed as README.md, and its linked worktree
    ``root/runs/wt`` (made with :func:`git_as_t`)."""
    repo, worktree = root / "repo", root / "runs" / "wt"
    repo.mkdir()
    git_as_t("init", "-q", cwd=repo, timeout=timeout)
    (repo / "README.md").write_text(readme)
    git_as_t("add", "README.md", cwd=repo, timeout=timeout)
    git_as_t("commit", "-q", "-m", "init", cwd=repo, timeout=timeout)
    git_as_t("worktree", "add", "-q", str(worktree), cwd=repo, timeout=timeout)
    return repo, worktree


# --- the user's environment and asup --------------------------------------------------------------


def user_env(
    tmp_path: Path,
    bin_dirs: Sequence[Path],
    keys: Mapping[str, str],
    *,
    xdg: Sequence[str] = ("state", "config", "cache"),
    **extra: str,
) -> dict[str, str]:
    """A user machine's environment for `asup`, given explicitly (our CI sets CI=true, and asup
    refuses to run under CI): ``bin_dirs`` first on PATH, HOME (made) and the XDG_<X>_HOME dirs
    named in ``xdg`` under ``tmp_path``, the API ``keys``, PYTHONPATH for this checkout, and
    ``extra`` variables as they are."""
    (tmp_path / "userhome").mkdir(exist_ok=True)
    return {
        "PATH": ":".join([*map(str, bin_dirs), "/usr/local/bin:/usr/bin:/bin"]),
        "HOME": str(tmp_path / "userhome"),
        "LANG": "C.UTF-8",
        **{f"XDG_{name.upper()}_HOME": str(tmp_path / name) for name in xdg},
        **keys,
        "PYTHONPATH": str(ROOT),
        **extra,
    }


def asup(
    env: Mapping[str, str],
    *args: str,
    cwd: Path | None = None,
    timeout: float | None = None,
    stdin: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """``asup ARGS…`` (this checkout's, on this interpreter) to its end; text output."""
    return subprocess.run(
        [*ASUP, *args],
        env=dict(env),
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def enabled(
    env: dict[str, str], *, cwd: Path | None = None, timeout: float | None = None
) -> dict[str, str]:
    """``env`` after `asup config enable` succeeded in it."""
    done = asup(env, "config", "enable", cwd=cwd, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return env


def events(out: str) -> Events:
    """The JSON event lines of `asup … --json` on a pipe."""
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_json(
    env: Mapping[str, str],
    repo: Path,
    agent: str,
    replies: Sequence[Reply],
    *extra: str,
    task: str,
    model: Sequence[str],
    timeout: float,
    max_runtime: int = 120,
) -> tuple[subprocess.CompletedProcess[str], Events, FakeModelServer]:
    """`asup run AGENT --json` in ``repo`` against a fake model server playing ``replies``;
    ``model`` is the model's options (``--model NAME``, or none), ``extra`` more options."""
    with FakeModelServer(Script(list(replies))) as server:
        done = asup(
            env,
            *("run", agent, "--task", task, "--json"),
            *("--endpoint", server.base_url, *model),
            *("--max-runtime", str(max_runtime), *extra),
            cwd=repo,
            timeout=timeout,
        )
    return done, events(done.stdout), server


def finished(evs: Events) -> dict[str, Any]:
    """The outcome of a run whose events end with run.finished and are numbered in order."""
    assert evs, "no events"
    assert evs[-1]["type"] == "run.finished", evs[-5:]
    assert [e["seq"] for e in evs] == list(range(len(evs)))
    outcome: dict[str, Any] = evs[-1]["outcome"]
    return outcome


def texts(evs: Events) -> list[str]:
    """The agent's messages, thoughts left out."""
    return [e["text"] for e in evs if e["type"] == "message" and not e.get("thought")]


def transcript(tmp_path: Path) -> Events:
    """The one ACP transcript (stdout.jsonl) in the state dir ``tmp_path/state``."""
    files = list((tmp_path / "state").rglob("stdout.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def recorded(tmp_path: Path) -> bytes:
    """Every byte asup stored under the state dir ``tmp_path/state``."""
    return b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())


def review_json(env: Mapping[str, str], repo: Path, run_id: str) -> dict[str, Any]:
    """`asup review RUN_ID --json`, which must succeed."""
    done = asup(env, "review", run_id, "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


# --- vendor binaries ------------------------------------------------------------------------------


def installed(binary: str, *dirs: Path) -> bool:
    return any((d / binary).exists() for d in dirs)


def need(binary: str, *dirs: Path, hint: str) -> None:
    """Skip the test unless ``binary`` is in one of ``dirs``; ``hint`` says how to install it."""
    if not installed(binary, *dirs):
        pytest.skip(f"{binary} is not installed under {':'.join(map(str, dirs))} ({hint})")


def cli_installed(agent: str) -> bool:
    """Whether the vendor CLI of ``agent`` (claude-cli, codex-cli) is under VENDOR_BIN."""
    return installed(agent.split("-", 1)[0], VENDOR_BIN)


def need_cli(agent: str) -> None:
    need(agent.split("-", 1)[0], VENDOR_BIN, hint="run make vendor")


# --- a pseudo-terminal ----------------------------------------------------------------------------


def read_until(
    fd: int, needle: bytes, out: bytearray, deadline: float, *, strict: bool = True
) -> bool:
    """Read the pty's master into ``out`` until ``needle`` came (True) or the child closed every
    slave end (False). Past ``deadline`` a strict read fails the test; another returns False."""
    while needle not in out:
        left = deadline - time.monotonic()
        if left <= 0:
            assert not strict, f"no {needle!r} by the deadline; got {bytes(out)[-3000:]!r}"
            return False
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every slave end is closed
            return False
        if not chunk:
            return False
        out.extend(chunk)
    return True


def _take_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty on stdin."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def on_pty(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float,
    question: bytes | None = None,
    answer: bytes = b"",
    controlling_terminal: bool = False,
    strict: bool = True,
) -> tuple[int, bytes]:
    """Run ``argv`` with a new pty as its stdin, stdout and stderr, in a new session (with the
    pty as its controlling terminal when ``controlling_terminal``); with ``question``, wait for
    it and type ``answer`` and Enter. Read until the child closed the pty; its exit status and
    all it wrote. Strict: the question must come, all within ``timeout`` (see
    :func:`read_until`); else the answer is typed only when asked."""
    master, slave = os.openpty()
    session: dict[str, Any] = (
        {"preexec_fn": _take_terminal} if controlling_terminal else {"start_new_session": True}
    )
    proc = subprocess.Popen(
        list(argv), stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=dict(env), **session
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        if question is not None:
            asked = read_until(master, question, out, deadline, strict=strict)
            assert asked or not strict, bytes(out)[-3000:]
            if asked:
                os.write(master, answer + b"\n")
        read_until(master, b"\x00never", out, deadline, strict=strict)
        code = proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, bytes(out)


# --- a test host in its own network namespace -----------------------------------------------------


def ip(*args: str, timeout: float) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=timeout)


@contextlib.contextmanager
def veth_netns(
    netns: str, host_if: str, ns_if: str, host_addr: str, ns_addr: str, *, timeout: float
) -> Iterator[None]:
    """The network namespace ``netns`` joined to the host by a veth pair (``host_if`` here with
    ``host_addr``/30, ``ns_if`` there with ``ns_addr``/30), its loopback up; both gone after."""
    try:
        ip("netns", "add", netns, timeout=timeout)
        ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if, timeout=timeout)
        ip("link", "set", ns_if, "netns", netns, timeout=timeout)
        ip("addr", "add", f"{host_addr}/30", "dev", host_if, timeout=timeout)
        ip("link", "set", host_if, "up", timeout=timeout)
        ip("-n", netns, "addr", "add", f"{ns_addr}/30", "dev", ns_if, timeout=timeout)
        ip("-n", netns, "link", "set", ns_if, "up", timeout=timeout)
        ip("-n", netns, "link", "set", "lo", "up", timeout=timeout)
        yield
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            ip("netns", "del", netns, timeout=timeout)
        with contextlib.suppress(subprocess.CalledProcessError):
            ip("link", "del", host_if, timeout=timeout)


# --- the lab scenarios ----------------------------------------------------------------------------


def bind(text: str, run: RecordedRun, workdirs: Sequence[str] = ("outside", "home")) -> str:
    """A scenario's path with its placeholders bound: ``<repo>`` to the run's repository, and
    ``<name>`` to the run's workdir/name for each of ``workdirs``."""
    subs = {"<repo>": run.repo, **{f"<{name}>": run.workdir / name for name in workdirs}}
    for key, sub in subs.items():
        text = text.replace(key, str(sub))
    return text


def check_steps(scenario: Scenario, run: RecordedRun) -> None:
    """No step timed out, and each step that names an exit code ended with it."""
    for step, meta in zip(scenario.steps, run.meta["steps"], strict=True):
        assert not meta["timed_out"]
        if step.exit_code is not None:
            assert meta["exit_code"] == step.exit_code


def check_files(
    scenario: Scenario, run: RecordedRun, workdirs: Sequence[str] = ("outside", "home")
) -> None:
    """The files changed are the expected ones, and the paths that must stay absent are
    (bound with :func:`bind` and ``workdirs``)."""
    changed = {c["path"]: c["kind"] for c in run.meta["files_changed"]}
    assert changed == dict(scenario.expect.files)
    for path in scenario.expect.absent_paths:
        assert not Path(bind(path, run, workdirs)).exists(), path


def check_decoded(agent: str, run: RecordedRun) -> None:
    """Every step's stdout through the codec meets the scenario's expectations."""
    decoded = [
        decode_transcript(agent, out, exit_code=meta["exit_code"], stderr_tail=meta["stderr_tail"])
        for out, meta in zip(run.step_stdouts, run.meta["steps"], strict=True)
    ]
    assert scenario_mismatches(run.meta["expect"], decoded) == []
