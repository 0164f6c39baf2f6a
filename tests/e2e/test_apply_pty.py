"""``asup apply`` through a real pseudo-terminal: the typed digits decide whether anything lands.

A review is staged through the library (a worktree of a temporary repository in which the test
writes files); ``python -m supervisor.cli.main apply <run id>`` then runs with its stdin, stdout
and stderr on a pty, as a person's terminal, or on pipes, as a script's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from helpers import ROOT, on_pty

from supervisor import paths
from supervisor.cli.review import PROMPT
from supervisor.review import capture, stage_review
from supervisor.store import ReviewState, RunStore
from supervisor.worktree import create_worktree, remove_worktree

pytestmark = pytest.mark.e2e

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Plain:
    text: str
    findings: tuple[object, ...] = ()
    flagged: bool = False


@dataclass(frozen=True)
class Staged:
    env: dict[str, str]
    root: Path
    run_id: str
    base: str
    digits: str
    expected_tree: str
    state_dir: Path


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def staged(tmp_path: Path) -> Staged:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.invalid",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.invalid",
        "TERM": "xterm",
        "COLUMNS": "120",
        "PYTHONPATH": str(ROOT),
    }
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, env, "init", "-q", "-b", "main")
    (root / "README.md").write_text("hello\n")
    (root / "gone.txt").write_text("bye\n")
    _git(root, env, "add", "-A")
    _git(root, env, "commit", "-q", "-m", "base")

    state_dir = paths.state_dir(env)
    repo = pygit2.Repository(str(root))
    store = RunStore(state_dir)
    run = store.create_run(agent="codex-cli", argv=["codex"], repo=root)
    worktree = create_worktree(repo, run_id=run.id, state_dir=state_dir)
    (worktree.path / "README.md").write_text("hello\nfrom the agent\n")
    (worktree.path / "gone.txt").unlink()
    (worktree.path / "new").mkdir()
    (worktree.path / "new" / "file.py").write_text("print('new')\n")
    change = capture(worktree.path, worktree.base_commit, limit_bytes=1 << 20)
    review = stage_review(store, run.id, change, Plain)
    _git(worktree.path, env, "add", "-A")
    expected_tree = _git(worktree.path, env, "write-tree").strip()
    remove_worktree(worktree)
    # The user has uncommitted work: apply must leave it alone.
    (root / "README.md").write_text("hello, the user's edit\n")
    return Staged(
        env=env,
        root=root,
        run_id=run.id,
        base=worktree.base_commit,
        digits=review.patch_sha256[:12],
        expected_tree=expected_tree,
        state_dir=state_dir,
    )


def _argv(run_id: str) -> list[str]:
    return [sys.executable, "-m", "supervisor.cli.main", "apply", run_id]


def _apply_on_pty(s: Staged, typed: str) -> tuple[int, str]:
    code, out = on_pty(
        _argv(s.run_id),
        env=s.env,
        cwd=s.root,
        timeout=TIMEOUT_S,
        question=PROMPT.encode(),
        answer=typed.encode(),
    )
    return code, out.decode("utf-8", errors="replace")


def _user_state(root: Path, env: dict[str, str]) -> tuple[str, ...]:
    return (
        _git(root, env, "for-each-ref", "--format=%(refname) %(objectname)"),
        _git(root, env, "rev-parse", "HEAD"),
        _git(root, env, "status", "--porcelain=v1", "--untracked-files=all"),
        (root / "README.md").read_text(),
        (root / ".git" / "index").read_bytes().hex(),
    )


def test_the_right_digits_land_exactly_one_commit_on_a_new_branch(staged: Staged) -> None:
    before = _user_state(staged.root, staged.env)
    code, out = _apply_on_pty(staged, staged.digits)
    assert code == 0, out
    assert f"applied run {staged.run_id}: branch external/{staged.run_id}" in out
    assert "+from the agent" in out  # the diff was shown before the prompt
    branch = f"external/{staged.run_id}"
    log = _git(staged.root, staged.env, "rev-list", "--parents", branch).splitlines()
    head, parent = log[0].split()
    assert parent == staged.base
    assert log[1] == staged.base  # exactly one commit on top of the base
    tree = _git(staged.root, staged.env, "rev-parse", f"{branch}^{{tree}}").strip()
    assert tree == staged.expected_tree
    refs_before, *rest_before = before
    refs_after, *rest_after = _user_state(staged.root, staged.env)
    assert rest_after == rest_before
    assert refs_after.splitlines() == sorted(
        [*refs_before.splitlines(), f"refs/heads/{branch} {head}"]
    )
    review = RunStore(staged.state_dir).get_review(staged.run_id)
    assert review is not None
    assert review.state is ReviewState.APPLIED


def test_wrong_digits_land_nothing(staged: Staged) -> None:
    before = _user_state(staged.root, staged.env)
    wrong = "0" * 12 if staged.digits != "0" * 12 else "1" * 12
    code, out = _apply_on_pty(staged, wrong)
    assert code == 1, out
    assert "asup apply: refused: the digits typed are not the first 12" in out
    assert _user_state(staged.root, staged.env) == before
    review = RunStore(staged.state_dir).get_review(staged.run_id)
    assert review is not None
    assert review.state is ReviewState.PENDING


def test_without_a_terminal_apply_refuses_before_asking(staged: Staged) -> None:
    before = _user_state(staged.root, staged.env)
    done = subprocess.run(
        _argv(staged.run_id),
        input=staged.digits + "\n",
        capture_output=True,
        text=True,
        cwd=staged.root,
        env=staged.env,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1
    assert "asup apply: refused: applying needs a person at a terminal" in done.stderr
    assert PROMPT not in done.stdout
    assert _user_state(staged.root, staged.env) == before
