"""ACP runs with a person in the loop, end to end: `asup run` on a real pseudo-terminal (its
controlling terminal, as at a desk) puts the policy's question to the person, who answers
allow or deny; `--unattended` on the same terminal asks nobody and denies; and a run canceled
mid-turn (SIGINT while the model is still answering) sends `session/cancel`, ends `canceled`
and leaves nothing behind. Real bubblewrap, the pinned agents, the fake model server reached
only through the restricted network's forward. Skipped only when a vendor binary is absent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import helpers
import psutil
import pytest
from helpers import (
    ACP_BIN,
    ASUP,
    DUMMY_KEYS,
    GEMINI_BIN,
    OPENCODE_BIN,
    asup,
    enabled,
    events,
    git,
    on_pty,
    scratch_repo,
    transcript,
    user_env,
)

from supervisor.lab.script import Reply, Script, Text, ToolCall
from supervisor.lab.server import FakeModelServer

pytestmark = pytest.mark.e2e

BIN_DIRS = [ACP_BIN, GEMINI_BIN, OPENCODE_BIN]
BINARY = {
    "claude-acp": "claude-agent-acp",
    "codex-acp": "codex-acp",
    "gemini-acp": "gemini",
    "opencode-acp": "opencode",
}
# gemini runs the model its recipe pins; opencode gets a model name outside the GPT-5 family
# (to that family it offers apply_patch instead of write/edit)
MODEL: dict[str, tuple[str, ...]] = {
    "claude-acp": ("--model", "claude-sonnet-4-5"),
    "codex-acp": ("--model", "gpt-5.3-codex"),
    "gemini-acp": (),
    "opencode-acp": ("--model", "lab-model"),
}
AGENTS = sorted(BINARY)
TIMEOUT_S = 180.0
QUESTION = b"(y = allow once, n = deny, Enter = deny): "


def need(agent: str) -> None:
    helpers.need(BINARY[agent], *BIN_DIRS, hint="run `make vendor`")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return scratch_repo(tmp_path)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    keys = {**DUMMY_KEYS, "GEMINI_API_KEY": "dummy-gemini-key"}
    return enabled(user_env(tmp_path, BIN_DIRS, keys, TERM="dumb", GIT_CONFIG_GLOBAL=os.devnull))


def _events(out: bytes) -> list[dict[str, Any]]:
    lines = out.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    evs: list[dict[str, Any]] = []
    for line in lines:
        start = line.find('{"type"')
        if start >= 0:
            evs.append(json.loads(line[start:]))
    return evs


def _run_on_pty(
    env: dict[str, str],
    repo: Path,
    agent: str,
    replies: list[Reply],
    answer: bytes | None,
    *extra: str,
) -> tuple[int, list[dict[str, Any]], str, FakeModelServer]:
    """`asup run --json` with the pty as stdin, stdout, stderr and controlling terminal. With
    ``answer``, wait for the question and type it; else expect none."""
    with FakeModelServer(Script(list(replies))) as server:
        code, out = on_pty(
            [
                *ASUP,
                *("run", agent, "--task", "Do the thing.", "--json"),
                *("--endpoint", server.base_url, *MODEL[agent]),
                *("--max-runtime", "150", *extra),
            ],
            env=env,
            cwd=repo,
            timeout=TIMEOUT_S,
            question=None if answer is None else QUESTION,
            answer=b"" if answer is None else answer,
            controlling_terminal=True,  # the child needs its own terminal
        )
    text = out.decode("utf-8", "replace")
    return code, _events(out), text, server


def _finished(evs: list[dict[str, Any]], text: str) -> dict[str, Any]:
    assert evs, text[-3000:]
    assert evs[-1]["type"] == "run.finished", text[-3000:]
    outcome: dict[str, Any] = evs[-1]["outcome"]
    return outcome


COMMAND = "echo approved > OUT.txt"


def shell_replies(agent: str) -> list[Reply]:
    """The model asks the agent's own shell tool to run COMMAND, then says it is done."""
    call = {
        "claude-acp": ToolCall("Bash", {"command": COMMAND, "description": "Write OUT.txt"}),
        "codex-acp": ToolCall("exec_command", {"cmd": COMMAND}),
        "gemini-acp": ToolCall(
            "run_shell_command", {"command": COMMAND, "description": "Write OUT.txt"}
        ),
        "opencode-acp": ToolCall("bash", {"command": COMMAND, "description": "Write OUT.txt"}),
    }[agent]
    return [Reply((call,)), Reply((Text("Finished."),))]


# A refusal ends codex's turn ("abort" is its only rejecting option): the run is denied, exit
# 4. The other agents carry on and finish their turn.
REFUSED = {"codex-acp": ("denied", 4)}


def _decisions(evs: list[dict[str, Any]], code: str) -> list[str]:
    return [e["message"] for e in evs if e["type"] == "warning" and e.get("code") == code]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_person_allows_a_command_and_it_runs(
    agent: str, repo: Path, env: dict[str, str]
) -> None:
    need(agent)
    code, evs, text, _ = _run_on_pty(env, repo, agent, shell_replies(agent), b"y", "--write")
    assert _finished(evs, text)["status"] == "completed", text[-3000:]
    assert code == 0
    # the question named the command (codex's as the whole argv it runs: bash -lc …) and
    # showed the agent's own options
    assert f"{COMMAND}' by agent '{agent}'" in text, text[-3000:]
    assert "  1  " in text
    assert any("allowed once by the person" in m for m in _decisions(evs, "policy_allow")), evs
    # the agent, its shell and the sandbox all ended with the shutdown: no survivor to sweep
    assert not _decisions(evs, "survivor")
    assert not _decisions(evs, "survivor_left")
    staged = [e for e in evs if e["type"] == "review.staged"]
    assert len(staged) == 1, text[-3000:]
    assert not (repo / "OUT.txt").exists()  # in the worktree's change only, kept for review
    review = asup(env, "review", staged[0]["run_id"], "--json", cwd=repo)
    assert "OUT.txt" in review.stdout
    assert "approved" in review.stdout


@pytest.mark.parametrize("agent", AGENTS)
def test_the_person_denies_a_command_and_it_never_runs(
    agent: str, repo: Path, env: dict[str, str]
) -> None:
    need(agent)
    code, evs, text, _ = _run_on_pty(env, repo, agent, shell_replies(agent), b"n", "--write")
    status, exit_code = REFUSED.get(agent, ("completed", 0))
    assert (_finished(evs, text)["status"], code) == (status, exit_code), text[-3000:]
    assert any("denied by the person" in m for m in _decisions(evs, "policy_deny")), evs
    assert [e for e in evs if e["type"] == "permission.denied"], evs
    assert not [e for e in evs if e["type"] == "review.staged"]  # nothing changed


@pytest.mark.parametrize("agent", AGENTS)
def test_unattended_on_a_terminal_asks_nobody_and_denies(
    agent: str, repo: Path, env: dict[str, str]
) -> None:
    need(agent)
    code, evs, text, _ = _run_on_pty(
        env, repo, agent, shell_replies(agent), None, "--write", "--unattended"
    )
    status, exit_code = REFUSED.get(agent, ("completed", 0))
    assert (_finished(evs, text)["status"], code) == (status, exit_code), text[-3000:]
    assert QUESTION not in text.encode()
    assert any("no one can answer" in m for m in _decisions(evs, "policy_deny")), evs
    assert not [e for e in evs if e["type"] == "review.staged"]


def test_a_run_option_allows_without_asking(repo: Path, env: dict[str, str]) -> None:
    need("claude-acp")
    code, evs, text, _ = _run_on_pty(
        env,
        repo,
        "claude-acp",
        shell_replies("claude-acp"),
        None,
        "--write",
        "--allow",
        "shell:echo *",
    )
    assert _finished(evs, text)["status"] == "completed", text[-3000:]
    assert code == 0
    assert QUESTION not in text.encode()
    assert len([e for e in evs if e["type"] == "review.staged"]) == 1, text[-3000:]


# -- cancel mid-turn --------------------------------------------------------------------------


def _run_processes(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(marker in part for part in cmdline):
            found.append(proc)
    return found


@pytest.mark.parametrize("agent", AGENTS)
def test_cancel_mid_turn(agent: str, repo: Path, env: dict[str, str], tmp_path: Path) -> None:
    need(agent)
    held = Reply((Text("Working on it, this takes a while. " * 5),), hold_after_events=3)
    with FakeModelServer(Script([held])) as server:
        proc = subprocess.Popen(
            [
                *ASUP,
                *("run", agent, "--task", "Think for a long time.", "--json"),
                *("--endpoint", server.base_url, *MODEL[agent]),
                *("--max-runtime", "150"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=repo,
            env=env,
            text=True,
        )
        deadline = time.monotonic() + 90
        while not any(r.fault and r.fault.startswith("hold") for r in server.requests):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the agent never reached the model"
            time.sleep(0.1)
        time.sleep(1.0)  # the agent is mid-turn: the model's answer is half sent
        state = tmp_path / "state"
        worktrees = [p for p in state.rglob("worktrees/*") if p.is_dir()] if state.exists() else []
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-3000:]
    evs = events(stdout)
    outcome = evs[-1]["outcome"]
    assert outcome["status"] == "canceled", (evs[-5:], stderr[-3000:])
    sent = transcript(tmp_path)
    methods = [m["message"].get("method") for m in sent if m["direction"] == "out"]
    assert "session/cancel" in methods, methods
    # nothing is left: no process of the run, no worktree
    time.sleep(0.5)
    for wt in worktrees:
        assert not wt.exists()
        assert not _run_processes(str(wt)), [p.info for p in _run_processes(str(wt))]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_opencode_retrying_a_failing_model_api_is_ended_by_the_idle_budget(
    repo: Path, env: dict[str, str]
) -> None:
    """opencode answers an HTTP 500 by retrying with growing backoff (2, 4, 8, 16, 32 s) and
    says nothing over ACP meanwhile; a silence budget shorter than its waits decides the run."""
    need("opencode-acp")
    with FakeModelServer(Script([Reply(http_status=500, repeat=1000)])) as server:
        started = time.monotonic()
        done = asup(
            env,
            *("run", "opencode-acp", "--task", "Say hello.", "--json"),
            *("--endpoint", server.base_url, *MODEL["opencode-acp"]),
            *("--max-runtime", "300", "--max-idle", "10"),
            cwd=repo,
            stdin=subprocess.DEVNULL,
            timeout=240,
        )
        elapsed = time.monotonic() - started
        failed = [r for r in server.requests if r.status == 500]
    evs = events(done.stdout)
    outcome = evs[-1]["outcome"]
    assert outcome["status"] == "timed_out", (evs[-5:], done.stderr[-2000:])
    assert "(--max-idle)" in outcome["reason"]
    assert done.returncode == 124
    assert failed  # it did reach the model and got its 500s
    assert elapsed < 120  # not the 300 s runtime budget
