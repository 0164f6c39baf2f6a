"""`asup run` end to end over ACP: the pinned claude-agent-acp and codex-acp as children of the
supervisor's ACP client, in a disposable worktree under real bubblewrap, reaching the fake
model server only through the restricted network's port forward. Skipped only when the vendor
binary is absent (scripts/install-acp-vendors.sh).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from supervisor.lab.script import Reply, Script, Text, Thinking, ToolCall
from supervisor.lab.server import FakeModelServer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ACP_BIN = ROOT / "vendor" / "acp" / "node_modules" / ".bin"
ASUP = [sys.executable, "-m", "supervisor.cli.main"]
BINARY = {"claude-acp": "claude-agent-acp", "codex-acp": "codex-acp"}
MODEL = {"claude-acp": "claude-sonnet-4-5", "codex-acp": "gpt-5.3-codex"}


def git(repo: Path, *args: str) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "user",
        "GIT_AUTHOR_EMAIL": "user@example.invalid",
        "GIT_COMMITTER_NAME": "user",
        "GIT_COMMITTER_EMAIL": "user@example.invalid",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    ).stdout


def need(agent: str) -> None:
    if not (ACP_BIN / BINARY[agent]).exists():
        pytest.skip(f"{BINARY[agent]} is not installed (run scripts/install-acp-vendors.sh)")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# project\n\nThe answer is 42.\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return repo


@pytest.fixture
def env(tmp_path: Path, repo: Path) -> dict[str, str]:
    (tmp_path / "userhome").mkdir()
    env = {
        "PATH": f"{ACP_BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path / "userhome"),
        "LANG": "C.UTF-8",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "ANTHROPIC_API_KEY": "dummy-anthropic-key",
        "OPENAI_API_KEY": "dummy-openai-key",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run([*ASUP, "config", "enable"], env=env, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    return env


def run(
    env: dict[str, str], repo: Path, agent: str, replies: list[Reply], *extra: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], FakeModelServer]:
    with FakeModelServer(Script(list(replies))) as server:
        done = subprocess.run(
            [
                *ASUP,
                *("run", agent, "--task", "What does the README say?", "--json"),
                *("--endpoint", server.base_url, "--model", MODEL[agent]),
                *("--max-runtime", "120", *extra),
            ],
            env=env,
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    evs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, evs, server


def finished(evs: list[dict[str, Any]]) -> dict[str, Any]:
    assert evs[-1]["type"] == "run.finished", evs[-5:]
    assert [e["seq"] for e in evs] == list(range(len(evs)))
    outcome: dict[str, Any] = evs[-1]["outcome"]
    return outcome


def texts(evs: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in evs if e["type"] == "message" and not e.get("thought")]


def transcript(tmp_path: Path) -> list[dict[str, Any]]:
    files = list((tmp_path / "state").rglob("stdout.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


@pytest.mark.parametrize("agent", ["claude-acp", "codex-acp"])
def test_plain_answer(agent: str, repo: Path, env: dict[str, str], tmp_path: Path) -> None:
    need(agent)
    before = git(repo, "status", "--porcelain=v1")
    replies = [Reply((Thinking("Short answer."), Text("The README says the answer is 42.")))]
    done, evs, server = run(env, repo, agent, replies)
    assert finished(evs) == {"status": "completed", "failure_kind": None, "reason": ""}, (
        done.stdout[-3000:],
        done.stderr[-3000:],
    )
    assert done.returncode == 0
    assert any("answer is 42" in t for t in texts(evs))
    assert [r for r in server.requests if r.method == "POST"]
    lines = transcript(tmp_path)
    methods = [m["message"].get("method") for m in lines if m["direction"] == "out"]
    assert methods[:3] == ["initialize", "session/new", "session/prompt"]
    init = lines[0]["message"]["params"]["clientCapabilities"]
    assert init["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert not init.get("terminal")  # absent means false: no terminal/* served
    assert git(repo, "status", "--porcelain=v1") == before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    recorded = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())
    assert env["ANTHROPIC_API_KEY"].encode() not in recorded
    assert env["OPENAI_API_KEY"].encode() not in recorded


def test_claude_read_tool_call(repo: Path, env: dict[str, str]) -> None:
    need("claude-acp")
    replies = [
        Reply((Text("Let me look."), ToolCall("Read", {"file_path": "<cwd>/README.md"}))),
        Reply((Text("The README says the answer is 42."),)),
    ]
    done, evs, _ = run(env, repo, "claude-acp", replies)
    assert finished(evs)["status"] == "completed", (done.stdout[-3000:], done.stderr[-3000:])
    started = [e["name"] for e in evs if e["type"] == "tool_call.started"]
    assert started == ["Read"]
    assert [e["ok"] for e in evs if e["type"] == "tool_call.finished"] == [True]
    assert any("answer is 42" in t for t in texts(evs))


def test_claude_write_is_staged_for_review(repo: Path, env: dict[str, str]) -> None:
    need("claude-acp")
    before = git(repo, "status", "--porcelain=v1")
    replies = [
        Reply((ToolCall("Write", {"file_path": "<cwd>/NEW.md", "content": "new file\n"}),)),
        Reply((Text("Created NEW.md."),)),
    ]
    done, evs, _ = run(env, repo, "claude-acp", replies, "--write")
    assert finished(evs)["status"] == "completed", (done.stdout[-3000:], done.stderr[-3000:])
    staged = [e for e in evs if e["type"] == "review.staged"]
    assert len(staged) == 1, evs
    assert staged[0]["files"] == 1
    assert not (repo / "NEW.md").exists()  # lands only through `asup apply`
    assert git(repo, "status", "--porcelain=v1") == before
    review = subprocess.run(
        [*ASUP, "review", staged[0]["run_id"], "--json"],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert review.returncode == 0, review.stderr
    data = json.loads(review.stdout)
    assert data["state"] == "pending"
    assert "NEW.md" in json.dumps(data)


def test_claude_write_in_a_read_only_run_is_denied_headless(
    repo: Path, env: dict[str, str]
) -> None:
    need("claude-acp")
    replies = [
        Reply((ToolCall("Write", {"file_path": "<cwd>/NEW.md", "content": "new file\n"}),)),
        Reply((Text("I could not write it."),)),
    ]
    done, evs, _ = run(env, repo, "claude-acp", replies)
    assert finished(evs)["status"] == "completed", (done.stdout[-3000:], done.stderr[-3000:])
    denied = [e for e in evs if e["type"] == "permission.denied"]
    assert [d["path"] for d in denied] == ["NEW.md"], evs
    assert any(
        e["type"] == "warning" and e.get("code") == "policy_deny" and "NEW.md" in e["message"]
        for e in evs
    )
    assert not [e for e in evs if e["type"] == "review.staged"]


def test_claude_http_500_fails_as_server_error(repo: Path, env: dict[str, str]) -> None:
    need("claude-acp")
    env = {**env, "CLAUDE_CODE_MAX_RETRIES": "1"}
    done, evs, _ = run(env, repo, "claude-acp", [Reply(http_status=500, repeat=10)])
    outcome = finished(evs)
    assert (outcome["status"], outcome["failure_kind"]) == ("failed", "server_error"), (
        done.stdout[-3000:],
        done.stderr[-3000:],
    )
    assert done.returncode == 1


PATCH = "*** Begin Patch\n*** Add File: NEW.md\n+new file\n*** End Patch\n"


def test_codex_apply_patch_is_staged_for_review(repo: Path, env: dict[str, str]) -> None:
    need("codex-acp")
    replies = [
        Reply((ToolCall("apply_patch", PATCH, kind="custom"),)),
        Reply((Text("Added NEW.md."),)),
    ]
    done, evs, _ = run(env, repo, "codex-acp", replies, "--write")
    assert finished(evs)["status"] == "completed", (done.stdout[-3000:], done.stderr[-3000:])
    staged = [e for e in evs if e["type"] == "review.staged"]
    assert len(staged) == 1, evs
    assert not (repo / "NEW.md").exists()


def test_codex_http_500_fails(repo: Path, env: dict[str, str]) -> None:
    need("codex-acp")
    done, evs, _ = run(env, repo, "codex-acp", [Reply(http_status=500, repeat=10)])
    outcome = finished(evs)
    assert (outcome["status"], outcome["failure_kind"]) == ("failed", "server_error"), (
        done.stdout[-3000:],
        done.stderr[-3000:],
    )
    assert done.returncode == 1
