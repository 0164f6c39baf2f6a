"""`asup run gemini-acp|opencode-acp` end to end: the pinned gemini 0.61.0 (``gemini --acp``)
and opencode 1.18.33 (``opencode acp --pure``) as children of the supervisor's ACP client, in a
disposable worktree under real bubblewrap, reaching the fake model server on 127.0.0.1 only
through the restricted network's port forward (gemini speaks the Gemini API, opencode Chat
Completions). Skipped only when a vendor binary is absent (scripts/install-gemini.sh,
scripts/install-opencode.sh; both run by ``make vendor``).

Tool names and arguments are the agents' own: gemini ``read_file`` / ``write_file`` with
``file_path`` (relative to its workspace, the worktree), opencode ``read`` / ``write`` with an
absolute ``filePath`` (``<cwd>`` is bound by the fake server from opencode's "Working
directory:" line).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import helpers
import pytest
from helpers import (
    ASUP,
    GEMINI_BIN,
    OPENCODE_BIN,
    enabled,
    finished,
    git,
    on_pty,
    recorded,
    review_json,
    run_json,
    scratch_repo,
    texts,
    transcript,
    user_env,
)

from supervisor.cli.review import PROMPT
from supervisor.lab.script import Reply, Text, Thinking, ToolCall
from supervisor.lab.server import FakeModelServer

pytestmark = pytest.mark.e2e

BIN = {"gemini-acp": GEMINI_BIN, "opencode-acp": OPENCODE_BIN}
BINARY = {"gemini-acp": "gemini", "opencode-acp": "opencode"}
INSTALL = {"gemini-acp": "scripts/install-gemini.sh", "opencode-acp": "scripts/install-opencode.sh"}
AGENTS = sorted(BIN)
# opencode offers write/edit to most models but apply_patch instead to the GPT-5 family (its
# default here is gpt-5), so the tests name a model of their own; gemini runs its pinned one.
MODEL = {"gemini-acp": (), "opencode-acp": ("--model", "lab-model")}
KEYS = {
    "GEMINI_API_KEY": "dummy-gemini-key-e2e-7f3a",
    "OPENAI_API_KEY": "dummy-openai-key-e2e-9c1d",
}


def need(agent: str) -> None:
    helpers.need(BINARY[agent], BIN[agent], hint=f"run {INSTALL[agent]}")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return scratch_repo(tmp_path)


@pytest.fixture
def env(tmp_path: Path, repo: Path) -> dict[str, str]:
    bins = [GEMINI_BIN, OPENCODE_BIN]
    return enabled(user_env(tmp_path, bins, KEYS, GIT_CONFIG_GLOBAL=os.devnull))


def run(
    env: dict[str, str],
    repo: Path,
    agent: str,
    replies: list[Reply],
    *extra: str,
    max_runtime: int = 120,
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], FakeModelServer]:
    return run_json(
        env,
        repo,
        agent,
        replies,
        *extra,
        task="What does the README say?",
        model=MODEL[agent],
        max_runtime=max_runtime,
        timeout=max_runtime + 90,
    )


def why(done: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    return done.stdout[-4000:], done.stderr[-3000:]


def agent_requests(lines: list[dict[str, Any]]) -> list[str]:
    """Methods of the requests the agent sent us (fs/*, session/request_permission)."""
    return [
        m["message"]["method"]
        for m in lines
        if m["direction"] == "in" and "method" in m["message"] and "id" in m["message"]
    ]


def no_key_in_store(tmp_path: Path) -> None:
    stored = recorded(tmp_path)
    for value in KEYS.values():
        assert value.encode() not in stored


def main_posts(server: FakeModelServer) -> list[Any]:
    return [r for r in server.requests if r.method == "POST" and r.lane == "main"]


def read_call(agent: str) -> ToolCall:
    if agent == "gemini-acp":
        return ToolCall("read_file", {"file_path": "README.md"})
    return ToolCall("read", {"filePath": "<cwd>/README.md"})


def write_call(agent: str, path: str) -> ToolCall:
    if agent == "gemini-acp":
        return ToolCall("write_file", {"file_path": path, "content": "new file\n"})
    if not path.startswith("/"):
        path = f"<cwd>/{path}"
    return ToolCall("write", {"filePath": path, "content": "new file\n"})


@pytest.mark.parametrize("agent", AGENTS)
def test_plain_answer(agent: str, repo: Path, env: dict[str, str], tmp_path: Path) -> None:
    need(agent)
    before = git(repo, "status", "--porcelain=v1")
    replies = [
        Reply((Thinking("**Answer**\n\nShort answer."), Text("The README says the answer is 42.")))
    ]
    done, evs, server = run(env, repo, agent, replies)
    assert finished(evs) == {"status": "completed", "failure_kind": None, "reason": ""}, why(done)
    assert done.returncode == 0
    assert any("answer is 42" in t for t in texts(evs))
    session = [e for e in evs if e["type"] == "agent.session"]
    assert len(session) == 1
    assert session[0]["model"] is not None
    assert main_posts(server)
    lines = transcript(tmp_path)
    methods = [m["message"].get("method") for m in lines if m["direction"] == "out"]
    assert methods[:3] == ["initialize", "session/new", "session/prompt"]
    init = lines[0]["message"]["params"]["clientCapabilities"]
    assert init["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert not init.get("terminal")
    assert git(repo, "status", "--porcelain=v1") == before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    usage = [e for e in evs if e["type"] == "usage"]
    assert len(usage) == 1, evs
    figures = usage[0]["usage"]
    assert figures["input_tokens"] > 0
    assert figures["output_tokens"] > 0
    assert figures["cost"] is None  # neither reports a cost: missing, not 0
    if agent == "gemini-acp":
        # _meta.quota.token_count: this prompt's requests; thoughts not in output_tokens
        assert usage[0]["scope"] == "turn"
        assert figures["reasoning_tokens"] is None
    no_key_in_store(tmp_path)


@pytest.mark.parametrize("agent", AGENTS)
def test_read_a_file(agent: str, repo: Path, env: dict[str, str], tmp_path: Path) -> None:
    need(agent)
    replies = [
        Reply((Text("Let me look."), read_call(agent))),
        Reply((Text("The README says the answer is 42."),)),
    ]
    done, evs, server = run(env, repo, agent, replies)
    assert finished(evs)["status"] == "completed", why(done)
    started = [e for e in evs if e["type"] == "tool_call.started"]
    assert len(started) == 1, evs
    assert [e["ok"] for e in evs if e["type"] == "tool_call.finished"] == [True]
    # the file's content went back to the model in the tool result
    posts = main_posts(server)
    assert len(posts) == 2
    assert "The answer is 42." in json.dumps(posts[1].body)
    assert any("answer is 42" in t for t in texts(evs))
    no_key_in_store(tmp_path)


@pytest.mark.parametrize("agent", AGENTS)
def test_write_goes_through_the_client_and_is_staged_for_review(
    agent: str, repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    need(agent)
    before = git(repo, "status", "--porcelain=v1")
    replies = [Reply((write_call(agent, "NEW.md"),)), Reply((Text("Created NEW.md."),))]
    done, evs, _ = run(env, repo, agent, replies, "--write")
    assert finished(evs)["status"] == "completed", why(done)
    asked = agent_requests(transcript(tmp_path))
    assert "session/request_permission" in asked
    assert "fs/write_text_file" in asked  # the agent wrote through the supervisor
    assert [(e["path"], e["kind"]) for e in evs if e["type"] == "file.changed"] == [
        ("NEW.md", "add")
    ]
    staged = [e for e in evs if e["type"] == "review.staged"]
    assert len(staged) == 1, evs
    assert staged[0]["files"] == 1
    assert not (repo / "NEW.md").exists()  # lands only through `asup apply`
    assert git(repo, "status", "--porcelain=v1") == before
    data = review_json(env, repo, staged[0]["run_id"])
    assert data["state"] == "pending"
    assert "NEW.md" in json.dumps(data)
    no_key_in_store(tmp_path)
    # it lands only through `asup apply` at a terminal with the typed digits: one commit on a
    # new branch, the user's branch, index and files untouched
    run_id = staged[0]["run_id"]
    head = git(repo, "rev-parse", "HEAD").strip()
    code, out = on_pty(
        [*ASUP, "apply", run_id],
        env=env,
        cwd=repo,
        timeout=120,
        question=PROMPT.encode(),
        answer=staged[0]["sha256"][:12].encode(),
    )
    assert code == 0, out[-3000:]
    branch = f"external/{run_id}"
    assert git(repo, "rev-list", "--parents", "-n", "1", branch).split()[1] == head
    assert git(repo, "show", f"{branch}:NEW.md") == "new file\n"
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "status", "--porcelain=v1") == before
    assert not (repo / "NEW.md").exists()


@pytest.mark.parametrize("where", ["absolute", "dotdot"])
@pytest.mark.parametrize("agent", AGENTS)
def test_write_outside_the_worktree_is_refused(
    agent: str, where: str, repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    need(agent)
    name = f"asup-e2e-outside-{uuid.uuid4().hex[:12]}.txt"
    path = f"/tmp/{name}" if where == "absolute" else f"../{name}"
    replies = [Reply((write_call(agent, path),)), Reply((Text("I could not write it."),))]
    try:
        done, evs, _ = run(env, repo, agent, replies, "--write")
        assert finished(evs)["status"] == "completed", why(done)
        assert not Path("/tmp", name).exists()
        assert not list(tmp_path.rglob(name))
    finally:
        Path("/tmp", name).unlink(missing_ok=True)
    asked = agent_requests(transcript(tmp_path))
    assert "fs/write_text_file" not in asked
    assert not [e for e in evs if e["type"] == "file.changed"]
    assert not [e for e in evs if e["type"] == "review.staged"]
    if agent == "opencode-acp":
        # opencode asks (external_directory); the policy denies a write outside, headless
        assert "session/request_permission" in asked
        denied = [e for e in evs if e["type"] == "permission.denied"]
        assert len(denied) == 1, evs
        assert name in denied[0]["path"]
        assert any(e["type"] == "warning" and e.get("code") == "policy_deny" for e in evs)
    else:
        # gemini refuses a path outside its workspace itself, before any request to us: the
        # denial is its failed tool call naming the path
        assert "session/request_permission" not in asked
        failed = [e for e in evs if e["type"] == "tool_call.finished" and not e["ok"]]
        assert len(failed) == 1, evs
        assert name in failed[0]["output"]
        assert "not in workspace" in failed[0]["output"]


@pytest.mark.parametrize("agent", AGENTS)
def test_write_in_a_read_only_run_is_denied_headless(
    agent: str, repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    need(agent)
    replies = [Reply((write_call(agent, "NEW.md"),)), Reply((Text("I could not write it."),))]
    done, evs, _ = run(env, repo, agent, replies)
    assert finished(evs)["status"] == "completed", why(done)
    denied = [e for e in evs if e["type"] == "permission.denied"]
    assert [d["path"] for d in denied] == ["NEW.md"], evs
    assert any(
        e["type"] == "warning" and e.get("code") == "policy_deny" and "NEW.md" in e["message"]
        for e in evs
    )
    asked = agent_requests(transcript(tmp_path))
    assert "session/request_permission" in asked
    assert "fs/write_text_file" not in asked
    assert not [e for e in evs if e["type"] == "review.staged"]
    assert not (repo / "NEW.md").exists()
    # the denied call ends as a failed call, not as a stream cut (gemini never ends it)
    assert not [e for e in evs if e["type"] == "error"], evs
    assert [e["ok"] for e in evs if e["type"] == "tool_call.finished"] == [False]


def test_gemini_http_500_fails_as_server_error(
    repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    need("gemini-acp")
    done, evs, server = run(env, repo, "gemini-acp", [Reply(http_status=500, repeat=10)])
    outcome = finished(evs)
    assert (outcome["status"], outcome["failure_kind"]) == ("failed", "server_error"), why(done)
    assert done.returncode == 1
    errors = [e for e in evs if e["type"] == "error"]
    assert [e["http_status"] for e in errors] == [500]
    assert len(main_posts(server)) == 1  # general.maxAttempts = 1 in the recipe's settings
    no_key_in_store(tmp_path)


def test_opencode_http_500_is_bounded_by_max_runtime(
    repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """opencode retries a 500 with backoff and reports nothing meanwhile; the supervisor's
    budget decides: it cancels, and its own cancel is the outcome whatever stop reason
    opencode answers (end_turn)."""
    need("opencode-acp")
    done, evs, server = run(
        env, repo, "opencode-acp", [Reply(http_status=500, repeat=50)], max_runtime=15
    )
    outcome = finished(evs)
    assert outcome["status"] == "timed_out", why(done)
    assert "15" in outcome["reason"]
    assert done.returncode == 124
    assert len(main_posts(server)) >= 2  # it was retrying when the budget ran out
    methods = [m["message"].get("method") for m in transcript(tmp_path) if m["direction"] == "out"]
    assert "session/cancel" in methods
    no_key_in_store(tmp_path)


def test_opencode_http_500_fails_after_its_own_five_retries(
    repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """opencode 1.18.33 retries at most 5 times (RETRY_MAX_RETRIES, not configurable), with
    backoff 2 s × 2^n (+ up to 25 % jitter): about 62-78 s, then the prompt fails with a
    JSON-RPC error naming the 500."""
    need("opencode-acp")
    done, evs, server = run(
        env, repo, "opencode-acp", [Reply(http_status=500, repeat=50)], max_runtime=150
    )
    outcome = finished(evs)
    assert (outcome["status"], outcome["failure_kind"]) == ("failed", "server_error"), why(done)
    assert "500" in outcome["reason"]
    assert done.returncode == 1
    assert [r.status for r in main_posts(server)] == [500] * 6
    no_key_in_store(tmp_path)


def test_opencode_default_model_writes_with_apply_patch(
    repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Without --model the recipe's default (gpt-5) makes opencode offer apply_patch instead of
    write/edit; it asks the same way and writes through fs/write_text_file."""
    need("opencode-acp")
    patch = "*** Begin Patch\n*** Add File: NEW.md\n+new file\n*** End Patch\n"
    replies = [Reply((ToolCall("apply_patch", {"patchText": patch}),)), Reply((Text("Added."),))]
    done, evs, _ = run_json(
        env, repo, "opencode-acp", replies, "--write", task="Add NEW.md.", model=(), timeout=210
    )
    assert finished(evs)["status"] == "completed", why(done)
    assert [e["model"] for e in evs if e["type"] == "agent.session"] == ["asup/gpt-5"]
    assert [e["name"] for e in evs if e["type"] == "tool_call.started"] == ["apply_patch"]
    asked = agent_requests(transcript(tmp_path))
    assert asked == ["session/request_permission", "fs/write_text_file"]
    assert len([e for e in evs if e["type"] == "review.staged"]) == 1
    assert not (repo / "NEW.md").exists()
    no_key_in_store(tmp_path)


def commit(repo: Path, rel: str, text: str) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", f"add {rel}")


def test_gemini_ignores_the_worktrees_own_settings(
    repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A repository's .gemini/settings.json would override the recipe's user settings (it did
    with folder trust off); with folder trust on and the worktree untrusted it is not read."""
    need("gemini-acp")
    loose = {"model": {"name": "gemini-2.5-flash"}, "general": {"maxAttempts": 5}}
    commit(repo, ".gemini/settings.json", json.dumps(loose))
    done, evs, server = run(env, repo, "gemini-acp", [Reply((Text("hi"),))])
    assert finished(evs)["status"] == "completed", why(done)
    assert [e["model"] for e in evs if e["type"] == "agent.session"] == ["gemini-2.5-pro"]
    assert [r.path for r in main_posts(server)] == [
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
    ]


def test_opencode_ignores_the_worktrees_own_config(
    repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A repository's opencode.json is merged over OPENCODE_CONFIG unless
    OPENCODE_DISABLE_PROJECT_CONFIG is set: one that allows every edit must not stop the
    permission request."""
    need("opencode-acp")
    commit(repo, "opencode.json", json.dumps({"permission": {"edit": "allow", "bash": "allow"}}))
    replies = [Reply((write_call("opencode-acp", "NEW.md"),)), Reply((Text("done"),))]
    done, evs, _ = run(env, repo, "opencode-acp", replies)
    assert finished(evs)["status"] == "completed", why(done)
    asked = agent_requests(transcript(tmp_path))
    assert "session/request_permission" in asked
    assert "fs/write_text_file" not in asked
    assert [d["path"] for d in evs if d["type"] == "permission.denied"] == ["NEW.md"]
