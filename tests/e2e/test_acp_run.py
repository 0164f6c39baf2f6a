"""`asup run` end to end over ACP: the pinned claude-agent-acp and codex-acp as children of the
supervisor's ACP client, in a disposable worktree under real bubblewrap, reaching the fake
model server only through the restricted network's port forward. Skipped only when the vendor
binary is absent (scripts/install-acp-vendors.sh).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import helpers
import pytest
from helpers import (
    ACP_BIN,
    DUMMY_KEYS,
    enabled,
    finished,
    git,
    recorded,
    review_json,
    run_json,
    scratch_repo,
    texts,
    transcript,
    user_env,
)

from supervisor.lab.script import Reply, Text, Thinking, ToolCall
from supervisor.lab.server import FakeModelServer

pytestmark = pytest.mark.e2e

BINARY = {"claude-acp": "claude-agent-acp", "codex-acp": "codex-acp"}
MODEL = {"claude-acp": "claude-sonnet-4-5", "codex-acp": "gpt-5.3-codex"}


def need(agent: str) -> None:
    helpers.need(BINARY[agent], ACP_BIN, hint="run scripts/install-acp-vendors.sh")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return scratch_repo(tmp_path)


@pytest.fixture
def env(tmp_path: Path, repo: Path) -> dict[str, str]:
    return enabled(user_env(tmp_path, [ACP_BIN], DUMMY_KEYS, GIT_CONFIG_GLOBAL=os.devnull))


def run(
    env: dict[str, str], repo: Path, agent: str, replies: list[Reply], *extra: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], FakeModelServer]:
    return run_json(
        env,
        repo,
        agent,
        replies,
        *extra,
        task="What does the README say?",
        model=("--model", MODEL[agent]),
        timeout=240,
    )


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
    stored = recorded(tmp_path)
    assert env["ANTHROPIC_API_KEY"].encode() not in stored
    assert env["OPENAI_API_KEY"].encode() not in stored


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
    data = review_json(env, repo, staged[0]["run_id"])
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


def test_codex_read(repo: Path, env: dict[str, str]) -> None:
    """codex-acp has no read tool: it reads with `cat` through exec_command (known safe, not
    asked), reported as a tool call of kind read."""
    need("codex-acp")
    replies = [
        Reply((ToolCall("exec_command", {"cmd": "cat README.md"}),)),
        Reply((Text("The README says the answer is 42."),)),
    ]
    done, evs, server = run(env, repo, "codex-acp", replies)
    assert finished(evs)["status"] == "completed", (done.stdout[-3000:], done.stderr[-3000:])
    calls = [e for e in evs if e["type"] == "tool_call.finished"]
    assert [c["ok"] for c in calls] == [True]
    assert not [e for e in evs if e["type"] == "permission.denied"]
    # the file's content went back to the model in the tool result
    assert "The answer is 42." in json.dumps(server.requests[-1].body)
    assert any("answer is 42" in t for t in texts(evs))


OUTSIDE_REPLIES = {
    "claude-acp": lambda target: ToolCall("Write", {"file_path": target, "content": "escaped\n"}),
    "codex-acp": lambda target: ToolCall(
        "apply_patch",
        f"*** Begin Patch\n*** Add File: {target}\n+escaped\n*** End Patch\n",
        kind="custom",
    ),
}


@pytest.mark.parametrize("agent", ["claude-acp", "codex-acp"])
def test_a_write_outside_the_worktree_is_refused(
    agent: str, repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    need(agent)
    target = tmp_path / "outside" / "ESCAPED.md"
    target.parent.mkdir()
    replies = [Reply((OUTSIDE_REPLIES[agent](str(target)),)), Reply((Text("Done."),))]
    done, evs, _ = run(env, repo, agent, replies, "--write")
    outcome = finished(evs)
    # codex's only way to refuse is to end its turn: denied; claude carries on
    expected = "denied" if agent == "codex-acp" else "completed"
    assert outcome["status"] == expected, (done.stdout[-3000:], done.stderr[-3000:])
    assert not target.exists()
    denied = [e for e in evs if e["type"] == "permission.denied"]
    assert denied, evs
    decisions = [e["message"] for e in evs if e.get("code") == "policy_deny"]
    assert any(str(target) in m for m in decisions), decisions
    assert not [e for e in evs if e["type"] == "review.staged"]
    assert not [e for e in evs if e.get("code") in ("survivor", "survivor_left")]
