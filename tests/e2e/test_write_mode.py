"""`asup run --write` end to end with the real claude and codex, then `asup review` and
`asup apply` through a real pseudo-terminal: the change lands as exactly one commit on a new
branch `external/<run-id>` cut from the recorded base, and nothing of the user's changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import helpers
import pygit2
import pytest
from helpers import (
    ASUP,
    DUMMY_KEYS,
    enabled,
    need_cli,
    on_pty,
    review_json,
    run_json,
    scratch_repo,
    user_env,
)

from supervisor.cli.review import PROMPT
from supervisor.lab.agents.base import VENDOR_BIN
from supervisor.lab.script import Reply, Text, ToolCall

pytestmark = pytest.mark.e2e

TIMEOUT_S = 60.0
FAKE_KEY = "AKIA4Q7XN2KZ8W3JT5RB"  # an AWS-shaped access key id, made up for this test

PATCH = (
    "*** Begin Patch\n*** Add File: NEW.md\n+new file\n"
    "*** Update File: README.md\n@@\n-The answer is 42.\n+The answer is 43.\n*** End Patch\n"
)
WRITES: dict[str, list[Reply]] = {
    "claude-cli": [
        Reply((ToolCall("Write", {"file_path": "<cwd>/NEW.md", "content": "new file\n"}),)),
        Reply((ToolCall("Read", {"file_path": "<cwd>/README.md"}),)),
        Reply(
            (
                ToolCall(
                    "Edit",
                    {
                        "file_path": "<cwd>/README.md",
                        "old_string": "The answer is 42.",
                        "new_string": "The answer is 43.",
                    },
                ),
            )
        ),
        Reply((Text("Added NEW.md and changed the answer."),)),
    ],
    "codex-cli": [
        Reply((ToolCall("apply_patch", PATCH, kind="custom"),)),
        Reply((Text("Added NEW.md and changed the answer."),)),
    ],
}
SECRET_WRITE: dict[str, list[Reply]] = {
    "claude-cli": [
        Reply(
            (
                ToolCall(
                    "Write",
                    {"file_path": "<cwd>/settings.py", "content": f'AWS_KEY = "{FAKE_KEY}"\n'},
                ),
            )
        ),
        Reply((Text("Wrote the settings."),)),
    ],
    "codex-cli": [
        Reply(
            (
                ToolCall(
                    "apply_patch",
                    "*** Begin Patch\n*** Add File: settings.py\n"
                    f'+AWS_KEY = "{FAKE_KEY}"\n*** End Patch\n',
                    kind="custom",
                ),
            )
        ),
        Reply((Text("Wrote the settings."),)),
    ],
}
MODEL = {"claude-cli": "claude-sonnet-4-5", "codex-cli": "gpt-5.5"}


GIT_PATH = "/usr/bin:/bin"  # the PATH this module's git runs with


def git(repo: Path, *args: str) -> str:
    return helpers.git(repo, *args, path=GIT_PATH)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = scratch_repo(tmp_path, path=GIT_PATH)
    (repo / "WIP.txt").write_text("the user's uncommitted work\n")  # dirty, untracked
    return repo


@pytest.fixture
def env(tmp_path: Path, repo: Path) -> dict[str, str]:
    env = user_env(
        tmp_path, [VENDOR_BIN], DUMMY_KEYS, xdg=("state", "config"), GIT_CONFIG_GLOBAL=os.devnull
    )
    return enabled(env)


def user_state(repo: Path) -> dict[str, Any]:
    """Everything of the user's a landing must not touch: HEAD, the current branch, the index
    and every working-tree file's bytes."""
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "index": (repo / ".git" / "index").read_bytes(),
        "status": git(repo, "status", "--porcelain=v1"),
        "files": files,
    }


def run_write(env: dict[str, str], repo: Path, agent: str, replies: list[Reply]) -> str:
    done, events, _ = run_json(
        env,
        repo,
        agent,
        replies,
        "--write",
        task="change it",
        model=("--model", MODEL[agent]),
        timeout=240,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    staged = [e for e in events if e["type"] == "review.staged"]
    assert len(staged) == 1, events
    run_id: str = staged[0]["run_id"]
    return run_id


def apply_on_pty(env: dict[str, str], repo: Path, run_id: str, typed: str, *extra: str) -> str:
    """`asup apply` on a pty; the digits are typed only when it asks for them."""
    code, out = on_pty(
        [*ASUP, "apply", run_id, *extra],
        env=env,
        cwd=repo,
        timeout=TIMEOUT_S,
        question=PROMPT.encode(),
        answer=typed.encode(),
        strict=False,
    )
    return f"exit={code}\n" + out.decode("utf-8", "replace")


@pytest.mark.parametrize("agent", sorted(WRITES))
def test_write_review_apply_lands_one_commit_on_a_new_branch(
    agent: str, repo: Path, env: dict[str, str]
) -> None:
    need_cli(agent)
    base = git(repo, "rev-parse", "HEAD").strip()
    before = user_state(repo)
    run_id = run_write(env, repo, agent, WRITES[agent])
    assert user_state(repo) == before  # the run itself touched nothing of the user's
    review = review_json(env, repo, run_id)
    digest: str = review["patch_sha256"]
    assert review["state"] == "pending"
    assert review["flagged"] is False

    wrong = apply_on_pty(env, repo, run_id, "0" * 12)
    assert "exit=1" in wrong
    assert git(repo, "branch", "--list", f"external/{run_id}") == ""

    out = apply_on_pty(env, repo, run_id, digest[:12])
    assert "exit=0" in out, out
    branch = f"external/{run_id}"
    r = pygit2.Repository(str(repo))
    commit = r.revparse_single(branch)
    assert isinstance(commit, pygit2.Commit)
    assert [str(p) for p in commit.parent_ids] == [base]
    changed = {(d.status_char(), d.new_file.path) for d in r.diff(commit.parents[0], commit).deltas}
    assert changed == {("A", "NEW.md"), ("M", "README.md")}
    tree = commit.tree
    assert r[tree["NEW.md"].id].data == b"new file\n"  # type: ignore[attr-defined]
    assert b"The answer is 43." in r[tree["README.md"].id].data  # type: ignore[attr-defined]
    assert "WIP.txt" not in [e.name for e in tree]  # the user's uncommitted work stays theirs
    assert user_state(repo) == before  # branch, index and files untouched; nothing pushed
    again = apply_on_pty(env, repo, run_id, digest[:12])
    assert "exit=1" in again
    assert "already" in again


@pytest.mark.parametrize("agent", sorted(SECRET_WRITE))
def test_a_planted_key_is_flagged_and_needs_allow_flagged(
    agent: str, repo: Path, env: dict[str, str]
) -> None:
    need_cli(agent)
    run_id = run_write(env, repo, agent, SECRET_WRITE[agent])
    review = review_json(env, repo, run_id)
    assert review["flagged"] is True
    digest = review["patch_sha256"]
    patch = (
        Path(env["XDG_STATE_HOME"]) / "agent-supervisor" / "runs" / run_id / "review.patch"
    ).read_bytes()
    assert FAKE_KEY.encode() not in patch
    assert b"[REDACTED:" in patch
    refused = apply_on_pty(env, repo, run_id, digest[:12])
    assert "exit=1" in refused
    assert "--allow-flagged" in refused
    assert git(repo, "branch", "--list", f"external/{run_id}") == ""
    landed = apply_on_pty(env, repo, run_id, digest[:12], "--allow-flagged")
    assert "exit=0" in landed, landed
    r = pygit2.Repository(str(repo))
    commit = r.revparse_single(f"external/{run_id}")
    assert isinstance(commit, pygit2.Commit)
    blob = r[commit.tree["settings.py"].id].data  # type: ignore[attr-defined]
    assert FAKE_KEY.encode() not in blob  # what lands is exactly what was reviewed
