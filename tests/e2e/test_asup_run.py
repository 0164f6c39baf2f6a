"""`asup run` end to end: the pinned real vendor CLIs, read-only, in a disposable worktree under
real bubblewrap, reaching the fake model server (on this machine's 127.0.0.1) only through the
restricted network's proxy, as a port forward. The user's checkout stays byte-for-byte the same.

The supervisor process is started with a user machine's environment, given explicitly: our CI
sets CI=true, and asup refuses to run under CI — that gate has its own tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
from helpers import (
    ASUP,
    DUMMY_KEYS,
    README,
    asup,
    cli_installed,
    enabled,
    events,
    git,
    need_cli,
    recorded,
    run_json,
    scratch_repo,
    user_env,
)

from supervisor.lab.agents.base import VENDOR_BIN
from supervisor.lab.script import Reply, Text, Thinking, ToolCall

pytestmark = pytest.mark.e2e


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = scratch_repo(tmp_path, {"README.md": README, "src/app.py": "print('hi')\n"})
    # uncommitted work of the user: travels in the prompt, never touched
    (repo / "src" / "app.py").write_text("print('hi there')\n")
    (repo / "NOTES.txt").write_text("untracked note\n")
    return repo


def snapshot(root: Path) -> dict[str, str]:
    """Every file under root (the .git directory included) → sha256 of its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() or path.is_symlink():
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            out[str(path.relative_to(root))] = hashlib.sha256(data).hexdigest()
    return out


@pytest.fixture
def enabled_env(tmp_path: Path, repo: Path) -> dict[str, str]:
    env = user_env(tmp_path, [VENDOR_BIN], DUMMY_KEYS, GITHUB_TOKEN="must-never-reach-the-child")
    return enabled(env, cwd=repo, timeout=240)


CASES = {
    "claude-cli": [
        Reply((Thinking("Find the readme."), ToolCall("Glob", {"pattern": "*.md"}))),
        Reply((Text("The README says the answer is 42."),)),
    ],
    "codex-cli": [
        Reply((ToolCall("exec_command", {"cmd": "cat README.md"}),)),
        Reply((Text("The README says the answer is 42."),)),
    ],
}
TOOL = {"claude-cli": "Glob", "codex-cli": "command_execution"}
MODEL = {"claude-cli": "claude-sonnet-4-5", "codex-cli": "gpt-5.5"}


@pytest.mark.parametrize("agent", sorted(CASES))
def test_read_only_run_through_the_restricted_network(
    agent: str, repo: Path, enabled_env: dict[str, str], tmp_path: Path
) -> None:
    need_cli(agent)
    before = snapshot(repo)
    status_before = git(repo, "status", "--porcelain=v1")
    done, evs, server = run_json(
        enabled_env,
        repo,
        agent,
        CASES[agent],
        task="What does the README say?",
        model=("--model", MODEL[agent]),
        timeout=240,
    )
    requests = list(server.requests)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert evs[0]["type"] == "run.started"
    assert evs[-1] == {
        "type": "run.finished",
        "seq": len(evs) - 1,
        "outcome": {"status": "completed", "failure_kind": None, "reason": ""},
    }
    assert [e["seq"] for e in evs] == list(range(len(evs)))
    calls = [e for e in evs if e["type"] == "tool_call.finished"]
    assert [e["ok"] for e in calls] == [True]
    started = [e["name"] for e in evs if e["type"] == "tool_call.started"]
    assert started == [TOOL[agent]]
    assert any("answer is 42" in e.get("text", "") for e in evs if e["type"] == "message")
    # the model endpoint was reached, and only through the proxy's forward
    assert [r.path for r in requests if r.method == "POST"]
    # the child saw the committed README inside the worktree, and the user's dirty work
    # only as a diff in the prompt
    first = requests[-len(CASES[agent])].body
    assert "print('hi there')" in json.dumps(first)
    # nothing of the user's changed, .git included; no worktree or branch is left behind
    assert snapshot(repo) == before
    assert git(repo, "status", "--porcelain=v1") == status_before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "branch", "--list").split() == ["*", "main"]
    leftovers = list((tmp_path / "state").rglob("checkout"))
    assert leftovers == []
    # no credential value in anything the run recorded (argv, launch.sh, events, transcript)
    stored = recorded(tmp_path)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN"):
        assert enabled_env[name].encode() not in stored, name
    assert enabled_env["GITHUB_TOKEN"].encode() not in done.stdout.encode()


def test_ci_marker_refuses_before_anything_runs(repo: Path, enabled_env: dict[str, str]) -> None:
    done = asup(
        {**enabled_env, "CI": "true"}, "run", "claude-cli", "--task", "x", cwd=repo, timeout=240
    )
    assert done.returncode == 3
    assert "CI" in done.stdout + done.stderr


class HangingServer:
    """A model endpoint on 127.0.0.1 that accepts connections and never answers: the child
    waits on it, so the test can stop the supervisor mid-run."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted = 0
        self.conns: list[socket.socket] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self.conns.append(conn)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


def start_run(env: dict[str, str], repo: Path, endpoint: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ASUP, "run", "claude-cli", "--task", "wait", "--endpoint", endpoint, "--json"],
        env=env,
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_child(sup: subprocess.Popen[str], server: HangingServer) -> list[psutil.Process]:
    """Wait until the vendor CLI is up and talking to the endpoint; the run's processes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sup.poll() is not None:
            raise AssertionError(f"asup ended early: {sup.communicate()}")
        if server.accepted:
            return psutil.Process(sup.pid).children(recursive=True)
        time.sleep(0.1)
    raise AssertionError("the child never reached the model endpoint")


def gone(procs: list[psutil.Process], within: float = 10.0) -> list[psutil.Process]:
    """The processes still alive after ``within`` seconds."""
    _, alive = psutil.wait_procs(procs, timeout=within)
    return alive


@pytest.mark.skipif(not cli_installed("claude-cli"), reason="claude is not installed")
def test_kill_9_of_the_supervisor_leaves_nothing_and_the_run_shows_interrupted(
    repo: Path, enabled_env: dict[str, str], tmp_path: Path
) -> None:
    server = HangingServer()
    try:
        sup = start_run(enabled_env, repo, server.url)
        procs = wait_for_child(sup, server)
        assert any("claude" in " ".join(p.cmdline()) for p in procs)
        os.kill(sup.pid, signal.SIGKILL)
        sup.communicate(timeout=10)
        assert gone(procs) == [], "processes of the run survived the supervisor"
    finally:
        server.close()
    worktrees = tmp_path / "state" / "agent-supervisor" / "worktrees"
    assert [p.name for p in worktrees.iterdir()]  # left behind by the crash, until …
    listed = asup(enabled_env, "runs", "list", "--json", cwd=repo, timeout=240)  # … any command
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [(r["state"], r["outcome"]) for r in runs] == [("interrupted", None)]
    assert "interrupted" in listed.stderr
    assert list(worktrees.iterdir()) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "branch", "--list").split() == ["*", "main"]
    shown = asup(enabled_env, "runs", "show", runs[0]["id"], cwd=repo, timeout=240)
    assert "unknown" in shown.stdout


@pytest.mark.skipif(not cli_installed("claude-cli"), reason="claude is not installed")
def test_sigterm_cancels_cleanly(repo: Path, enabled_env: dict[str, str], tmp_path: Path) -> None:
    before = snapshot(repo)
    server = HangingServer()
    try:
        sup = start_run(enabled_env, repo, server.url)
        procs = wait_for_child(sup, server)
        sup.send_signal(signal.SIGTERM)
        out, err = sup.communicate(timeout=60)
        assert gone(procs) == []
    finally:
        server.close()
    assert sup.returncode == 130, err
    evs = events(out)
    assert evs[-1]["type"] == "run.finished"
    assert evs[-1]["outcome"]["status"] == "canceled"
    assert list((tmp_path / "state" / "agent-supervisor" / "worktrees").iterdir()) == []
    assert snapshot(repo) == before


PLANTED = "ghp_" + "Zq8Lm3Nx7Vb2Kc9Wd4Rt6Yp1Hs5Gf0Ja3Eu8"  # GitHub-token shaped, not a real one


def test_a_secret_in_the_users_uncommitted_work_never_reaches_the_model(
    repo: Path, enabled_env: dict[str, str], tmp_path: Path
) -> None:
    need_cli("claude-cli")
    (repo / ".env.local").write_text(f"GITHUB_TOKEN={PLANTED}\nDEBUG=1\n")  # untracked
    done, evs, server = run_json(
        enabled_env,
        repo,
        "claude-cli",
        [Reply((Text("Noted."),))],
        task="Summarise my changes.",
        model=("--model", MODEL["claude-cli"]),
        timeout=240,
    )
    bodies = json.dumps([r.body for r in server.requests])
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert PLANTED not in bodies
    assert "+GITHUB_TOKEN=[REDACTED:" in bodies  # the line itself still travels, redacted
    assert "print('hi there')" in bodies  # the rest of the diff is whole
    warned = [e for e in evs if e["type"] == "warning" and e.get("code") == "prompt_redacted"]
    assert len(warned) == 1, evs
    assert ".env.local" in warned[0]["message"]
    assert PLANTED not in done.stdout
    assert PLANTED.encode() not in recorded(tmp_path)
