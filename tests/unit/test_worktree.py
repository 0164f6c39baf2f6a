"""Disposable worktrees on real temporary repositories: refusals, lifecycle, reaping, dirty diff."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import psutil  # type: ignore[import-untyped, unused-ignore]
import pygit2
import pytest
from pygit2.enums import ConfigLevel

import supervisor.paths as paths_module
import supervisor.prompt as prompt_module
import supervisor.worktree as worktree_module
from supervisor.errors import RepositoryRefused
from supervisor.prompt import ChangeKind
from supervisor.worktree import (
    OWNER_FILE,
    RECORDLESS_GRACE_SECONDS,
    OwnerRecord,
    Worktree,
    WorktreeError,
    create_worktree,
    dirty_diff,
    disposable_worktree,
    disposable_worktree_async,
    open_repository,
    reap_leftovers,
    remove_worktree,
    sanitized_git_config,
    worktrees_root,
)

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
}


@pytest.fixture(autouse=True)
def isolated(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """No user or system git config, for the git CLI and for libgit2; XDG dirs in tmp."""
    home = tmp_path_factory.mktemp("home")
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(home / var.lower()))
    levels = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM, ConfigLevel.PROGRAMDATA)
    saved = {level: pygit2.settings.search_path[level] for level in levels}
    for level in levels:
        pygit2.settings.search_path[level] = str(home)
    yield
    for level, value in saved.items():
        pygit2.settings.search_path[level] = value


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=os.environ
    )
    return done.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('one')\nprint('two')\n")
    (path / "old.txt").write_text("to be deleted\n")
    (path / ".gitignore").write_text("*.log\nbuild/\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    return path


def make_dirty(path: Path) -> None:
    """Staged, unstaged, untracked, ignored and binary changes, and a deletion."""
    (path / "README.md").write_text("hello\nstaged line\n")
    git(path, "add", "README.md")
    (path / "README.md").write_text("hello\nstaged line\nunstaged line\n")
    (path / "src" / "app.py").write_text("print('one')\nprint('TWO')\n")
    (path / "staged_new.txt").write_text("new and staged\n")
    git(path, "add", "staged_new.txt")
    (path / "notes").mkdir()
    (path / "notes" / "todo.md").write_text("untracked in a new dir\n")
    (path / "debug.log").write_text("ignored\n")
    (path / "build").mkdir()
    (path / "build" / "out.txt").write_text("ignored dir\n")
    (path / "image.bin").write_bytes(b"\x00\x01\x02\xff" * 64)
    (path / "old.txt").unlink()


@pytest.fixture
def repo_dir(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def head(repo_dir: Path) -> str:
    return git(repo_dir, "rev-parse", "HEAD").strip()


def refs(repo_dir: Path) -> str:
    return git(repo_dir, "for-each-ref", "--format=%(refname) %(objectname)")


def worktree_list(repo_dir: Path) -> list[dict[str, str]]:
    """``git worktree list --porcelain`` as one dict per worktree."""
    entries: list[dict[str, str]] = []
    for block in git(repo_dir, "worktree", "list", "--porcelain").strip().split("\n\n"):
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            entry[key] = value
        entries.append(entry)
    return entries


def snapshot(repo_dir: Path) -> dict[str, str]:
    """Every file of the user's repository, .git included, by content hash."""
    return {
        str(p.relative_to(repo_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repo_dir.rglob("*"))
        if p.is_file()
    }


def assert_gone(wt: Worktree, repo_dir: Path) -> None:
    assert not wt.run_dir.exists()
    assert not wt.admin_dir.exists()
    assert [e["worktree"] for e in worktree_list(repo_dir)] == [str(repo_dir.resolve())]
    assert git(repo_dir, "branch", "-a").split() == ["*", "main"]


# --- refusals ----------------------------------------------------------------------------------


def test_refuses_a_directory_outside_any_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RepositoryRefused, match="is not inside a git repository") as caught:
        open_repository(plain)
    assert caught.value.code == "repository"
    assert "git init" in caught.value.sentence


def test_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(RepositoryRefused, match="is not a directory"):
        open_repository(tmp_path / "nowhere")


def test_refuses_a_bare_repository(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    with pytest.raises(RepositoryRefused, match="bare repository") as caught:
        open_repository(bare)
    assert "git clone" in caught.value.sentence


def test_refuses_a_repository_without_commits(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(RepositoryRefused, match="has no commits yet") as caught:
        open_repository(empty)
    assert "git commit" in caught.value.sentence


def test_refuses_an_unreadable_repository(repo_dir: Path) -> None:
    (repo_dir / ".git" / "config").write_text("[core\nthis is not a config file\n")
    with pytest.raises(RepositoryRefused, match="git cannot open the repository"):
        open_repository(repo_dir)


def test_opens_the_repository_from_a_subdirectory(repo_dir: Path) -> None:
    repo = open_repository(repo_dir / "src")
    assert Path(repo.workdir).resolve() == repo_dir.resolve()


# --- lifecycle ---------------------------------------------------------------------------------


def test_worktree_is_detached_at_head_outside_the_repository(repo_dir: Path, state: Path) -> None:
    before = refs(repo_dir)
    repo = open_repository(repo_dir)
    with disposable_worktree(repo, run_id="r1", state_dir=state) as wt:
        assert wt.path == (state / "worktrees" / "r1" / "checkout").resolve()
        assert not wt.path.is_relative_to(repo_dir.resolve())
        assert wt.base_commit == head(repo_dir)
        assert wt.repo_root == repo_dir.resolve()
        assert (wt.path / "src" / "app.py").read_text() == "print('one')\nprint('two')\n"
        listed = worktree_list(repo_dir)
        assert listed[1] == {"worktree": str(wt.path), "HEAD": wt.base_commit, "detached": ""}
        assert git(repo_dir, "branch", "-a").split() == ["*", "main"]
        assert refs(repo_dir) == before
        assert git(wt.path, "status", "--porcelain") == ""
        assert git(wt.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "HEAD"
    assert_gone(wt, repo_dir)
    assert refs(repo_dir) == before


def test_worktree_describes_the_git_paths_it_needs(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    with disposable_worktree(repo, run_id="paths", state_dir=state) as wt:
        common = (repo_dir / ".git").resolve()
        assert wt.common_dir == common
        assert wt.admin_dir == common / "worktrees" / "asup-paths"
        assert wt.git_file.read_text().strip() == f"gitdir: {wt.admin_dir}/"
        assert (wt.admin_dir / "HEAD").read_text().strip() == wt.base_commit
        assert (wt.admin_dir / "gitdir").read_text().strip() == str(wt.git_file)
        assert wt.object_dirs == (common / "objects",)
        assert wt.git_paths() == (wt.admin_dir, common / "refs", common / "objects")
        assert common / "config" not in wt.git_paths()  # it may hold credentials
        assert wt.owner.pid == os.getpid()
        assert wt.owner == OwnerRecord.model_validate_json((wt.run_dir / OWNER_FILE).read_text())


def test_object_dirs_include_alternates(repo_dir: Path, tmp_path: Path, state: Path) -> None:
    clone = tmp_path / "shared-clone"
    git(tmp_path, "clone", "-q", "--shared", str(repo_dir), str(clone))
    repo = open_repository(clone)
    with disposable_worktree(repo, run_id="alt", state_dir=state) as wt:
        own = (clone / ".git" / "objects").resolve()
        assert wt.object_dirs == (own, (repo_dir / ".git" / "objects").resolve())
        assert set(wt.object_dirs) <= set(wt.git_paths())
        assert git(wt.path, "log", "--format=%s").strip() == "first"


def test_worktree_of_a_linked_worktree_registers_in_the_main_repository(
    repo_dir: Path, tmp_path: Path, state: Path
) -> None:
    linked = tmp_path / "linked"
    git(repo_dir, "worktree", "add", "-q", "-b", "feature", str(linked))
    (linked / "feature.txt").write_text("feature\n")
    git(linked, "add", "feature.txt")
    git(linked, "commit", "-q", "-m", "feature")
    repo = open_repository(linked)
    with disposable_worktree(repo, run_id="from-linked", state_dir=state) as wt:
        assert wt.common_dir == (repo_dir / ".git").resolve()
        assert wt.base_commit == head(linked)
        assert (wt.path / "feature.txt").exists()
    assert not wt.admin_dir.exists()
    assert git(repo_dir, "branch").split() == ["+", "feature", "*", "main"]


def test_dirty_user_repository_is_left_exactly_as_it_was(repo_dir: Path, state: Path) -> None:
    make_dirty(repo_dir)
    before = snapshot(repo_dir)
    repo = open_repository(repo_dir)
    diff = dirty_diff(repo)
    with disposable_worktree(repo, run_id="dirty", state_dir=state) as wt:
        assert (wt.path / "README.md").read_text() == "hello\n"
        assert (wt.path / "old.txt").exists()
        assert not (wt.path / "notes").exists()
        assert not (wt.path / "debug.log").exists()
        (wt.path / "README.md").write_text("the agent's edit\n")
    assert snapshot(repo_dir) == before
    assert len(diff.files) == 6
    assert git(repo_dir, "status", "--porcelain", "--untracked-files=all").splitlines() == [
        "MM README.md",
        " D old.txt",
        " M src/app.py",
        "A  staged_new.txt",
        "?? image.bin",
        "?? notes/todo.md",
    ]


def test_worktree_is_removed_when_the_block_raises(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    with (  # noqa: PT012
        pytest.raises(RuntimeError, match="agent failed"),
        disposable_worktree(repo, run_id="boom", state_dir=state) as wt,
    ):
        assert wt.path.is_dir()
        raise RuntimeError("agent failed")
    assert_gone(wt, repo_dir)


def test_worktree_is_removed_on_keyboard_interrupt(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    with (  # noqa: PT012
        pytest.raises(KeyboardInterrupt),
        disposable_worktree(repo, run_id="ctrl-c", state_dir=state) as wt,
    ):
        assert wt.path.is_dir()
        raise KeyboardInterrupt
    assert_gone(wt, repo_dir)


def test_a_second_interrupt_during_removal_does_not_leave_it_half_done(
    repo_dir: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = open_repository(repo_dir)
    real_prune = worktree_module._prune
    calls: list[str] = []

    def interrupted_once(record: OwnerRecord) -> None:
        calls.append(record.run_id)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real_prune(record)

    monkeypatch.setattr(worktree_module, "_prune", interrupted_once)
    with (
        pytest.raises(KeyboardInterrupt),
        disposable_worktree(repo, run_id="twice", state_dir=state) as wt,
    ):
        assert wt.path.is_dir()
    assert calls == ["twice", "twice"]
    assert_gone(wt, repo_dir)


def test_remove_worktree_is_idempotent(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    wt = create_worktree(repo, run_id="twice", state_dir=state)
    remove_worktree(wt)
    remove_worktree(wt)
    assert_gone(wt, repo_dir)


def test_worktree_with_read_only_directories_is_removed(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    wt = create_worktree(repo, run_id="ro", state_dir=state)
    locked = wt.path / "locked" / "deeper"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x")
    os.symlink(repo_dir, wt.path / "link-out")
    for d in (locked, locked.parent):
        d.chmod(0o500)
    worktree_module._make_dirs_writable(wt.path)
    assert stat.S_IMODE(locked.stat().st_mode) & 0o700 == 0o700
    assert stat.S_IMODE(locked.parent.stat().st_mode) & 0o700 == 0o700
    remove_worktree(wt)
    assert_gone(wt, repo_dir)
    assert (repo_dir / "README.md").exists()  # the symlink was removed, not followed


def test_duplicate_run_id_is_refused_and_the_first_worktree_kept(
    repo_dir: Path, state: Path
) -> None:
    repo = open_repository(repo_dir)
    with disposable_worktree(repo, run_id="same", state_dir=state) as wt:
        with pytest.raises(WorktreeError, match="already has a worktree asup-same"):
            create_worktree(repo, run_id="same", state_dir=state)
        assert wt.path.is_dir()
        assert len(worktree_list(repo_dir)) == 2
    assert_gone(wt, repo_dir)


def test_existing_branch_of_the_same_name_is_refused_and_kept(repo_dir: Path, state: Path) -> None:
    git(repo_dir, "branch", "asup-tmp-taken")
    repo = open_repository(repo_dir)
    with pytest.raises(WorktreeError, match="branch asup-tmp-taken"):
        create_worktree(repo, run_id="taken", state_dir=state)
    assert "asup-tmp-taken" in git(repo_dir, "branch").split()
    assert not (worktrees_root(state) / "taken").exists()


def test_invalid_run_id_is_rejected(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    for bad in ("", "../x", ".hidden", "a/b", "x" * 65):
        with pytest.raises(ValueError, match="run_id"):
            create_worktree(repo, run_id=bad, state_dir=state)


@pytest.mark.parametrize("failure", [pygit2.GitError("checkout failed"), KeyboardInterrupt()])
def test_failure_while_creating_leaves_nothing_behind(
    repo_dir: Path, state: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    """The worktree exists and HEAD is still on the temporary branch when this fails."""
    before = refs(repo_dir)

    def fail(self: pygit2.Repository, target: object) -> None:
        assert "asup-tmp-fails" in git(repo_dir, "branch").split()
        raise failure

    monkeypatch.setattr(pygit2.repository.BaseRepository, "set_head", fail)
    repo = open_repository(repo_dir)
    expected = WorktreeError if isinstance(failure, Exception) else KeyboardInterrupt
    with pytest.raises(expected):
        create_worktree(repo, run_id="fails", state_dir=state)
    assert not (worktrees_root(state) / "fails").exists()
    assert not (repo_dir / ".git" / "worktrees" / "asup-fails").exists()
    assert refs(repo_dir) == before
    assert len(worktree_list(repo_dir)) == 1


def test_async_worktree_is_removed_when_the_task_is_cancelled(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    seen: list[Worktree] = []

    async def main() -> None:
        with anyio.CancelScope() as scope:
            async with disposable_worktree_async(repo, run_id="async", state_dir=state) as wt:
                seen.append(wt)
                assert wt.path.is_dir()
                scope.cancel()
                await anyio.sleep(5)
        assert scope.cancelled_caught

    anyio.run(main, backend="asyncio")
    assert_gone(seen[0], repo_dir)


# --- signals and crash recovery ----------------------------------------------------------------

OWNER_SCRIPT = """
import os, signal, sys, time
from pathlib import Path
import pygit2
from supervisor.worktree import (
    create_worktree, disposable_worktree, open_repository, remove_worktree,
)

mode, repo_dir, state, run_id = sys.argv[1:]
repo = open_repository(repo_dir)
if mode == "die-while-creating":
    def die(self, target):
        os.kill(os.getpid(), signal.SIGKILL)
    pygit2.repository.BaseRepository.set_head = die
if mode == "sigterm-exits":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with disposable_worktree(repo, run_id=run_id, state_dir=Path(state)) as wt:
        print(wt.path, flush=True)
        time.sleep(30)
wt = create_worktree(repo, run_id=run_id, state_dir=Path(state))
if mode == "sigterm-removes":
    def on_term(signum, frame):
        remove_worktree(wt)
        os._exit(143)
    signal.signal(signal.SIGTERM, on_term)
print(wt.path, flush=True)
time.sleep(30)
"""


Owner = Callable[[str, str], "subprocess.Popen[str]"]


@pytest.fixture
def start_owner(repo_dir: Path, state: Path, tmp_path: Path) -> Iterator[Owner]:
    """Start a process that owns a worktree (mode, run id); it prints the checkout's path.
    Its stderr goes to ``owner-<run id>.err`` in tmp_path."""
    started: list[subprocess.Popen[str]] = []

    def start(mode: str, run_id: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", OWNER_SCRIPT, mode, str(repo_dir), str(state), run_id]
        with (tmp_path / f"owner-{run_id}.err").open("w") as err:
            owner = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=err, text=True, env=os.environ
            )
        started.append(owner)
        return owner

    yield start
    for owner in started:
        if owner.poll() is None:
            owner.kill()
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


def checkout_of(owner: subprocess.Popen[str]) -> Path:
    assert owner.stdout is not None
    line = owner.stdout.readline().strip()
    assert line, f"the owner exited with {owner.wait()} before printing its checkout"
    return Path(line)


@pytest.mark.parametrize("mode", ["sigterm-removes", "sigterm-exits"])
def test_sigterm_handler_removes_the_worktree(
    repo_dir: Path, start_owner: Owner, mode: str
) -> None:
    owner = start_owner(mode, "term")
    checkout = checkout_of(owner)
    assert checkout.is_dir()
    owner.send_signal(signal.SIGTERM)
    assert owner.wait(timeout=10) == 143
    assert not checkout.parent.exists()
    assert not (repo_dir / ".git" / "worktrees" / "asup-term").exists()
    assert len(worktree_list(repo_dir)) == 1


def test_reaps_the_worktree_of_a_killed_owner_and_leaves_live_ones(
    repo_dir: Path, state: Path, start_owner: Owner
) -> None:
    before = refs(repo_dir)
    owner = start_owner("run", "killed")
    killed_checkout = checkout_of(owner)
    repo = open_repository(repo_dir)
    with disposable_worktree(repo, run_id="alive", state_dir=state) as alive:
        assert reap_leftovers(state) == []  # both owners live
        owner.kill()
        owner.wait(timeout=10)
        reaped = reap_leftovers(state)
        assert [(r.run_dir.name, r.error) for r in reaped] == [("killed", None)]
        assert reaped[0].owner is not None
        assert reaped[0].owner.pid == owner.pid
        assert not killed_checkout.parent.exists()
        assert not (repo_dir / ".git" / "worktrees" / "asup-killed").exists()
        assert alive.path.is_dir()
        assert [e["worktree"] for e in worktree_list(repo_dir)] == [
            str(repo_dir.resolve()),
            str(alive.path),
        ]
    assert refs(repo_dir) == before


def test_reaps_an_owner_killed_in_the_middle_of_creating(
    repo_dir: Path, state: Path, start_owner: Owner
) -> None:
    """Killed with the worktree made and HEAD still on the temporary branch."""
    before = refs(repo_dir)
    owner = start_owner("die-while-creating", "halfway")
    assert owner.wait(timeout=10) == -signal.SIGKILL
    assert "asup-tmp-halfway" in git(repo_dir, "branch").split()
    assert (repo_dir / ".git" / "worktrees" / "asup-halfway").exists()
    reaped = reap_leftovers(state)
    assert [(r.run_dir.name, r.error) for r in reaped] == [("halfway", None)]
    assert refs(repo_dir) == before
    assert len(worktree_list(repo_dir)) == 1
    assert not (repo_dir / ".git" / "worktrees" / "asup-halfway").exists()


def rewrite_owner(wt: Worktree, **changes: object) -> None:
    record = wt.owner.model_copy(update=changes)
    (wt.run_dir / OWNER_FILE).write_text(record.model_dump_json())


def test_a_recycled_pid_counts_as_dead(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    wt = create_worktree(repo, run_id="recycled", state_dir=state)
    rewrite_owner(wt, create_time=psutil.Process().create_time() - 3600)
    assert [r.run_dir for r in reap_leftovers(state)] == [wt.run_dir]
    assert_gone(wt, repo_dir)


def test_owners_on_another_host_are_left_alone(repo_dir: Path, state: Path) -> None:
    repo = open_repository(repo_dir)
    with disposable_worktree(repo, run_id="elsewhere", state_dir=state) as wt:
        rewrite_owner(wt, host=socket.gethostname() + "-other", pid=2**22 + 1)
        assert reap_leftovers(state) == []
        assert wt.path.is_dir()


def test_run_dirs_without_a_record_are_reaped_only_when_old(state: Path) -> None:
    root = worktrees_root(state)
    young = root / "young"
    old = root / "old"
    for d in (young, old):
        d.mkdir(parents=True)
        (d / (OWNER_FILE + ".tmp")).write_text("{")
    past = time.time() - RECORDLESS_GRACE_SECONDS - 10
    os.utime(old, (past, past))
    reaped = reap_leftovers(state)
    assert [(r.run_dir, r.owner) for r in reaped] == [(old, None)]
    assert young.is_dir()
    assert not old.exists()


def test_reap_without_a_state_dir_finds_nothing(tmp_path: Path) -> None:
    assert reap_leftovers(tmp_path / "never-created") == []


def test_state_dir_defaults_to_xdg_state_home(repo_dir: Path) -> None:
    repo = open_repository(repo_dir)
    with disposable_worktree(repo, run_id="xdg") as wt:
        expected = Path(os.environ["XDG_STATE_HOME"]) / "agent-supervisor" / "worktrees" / "xdg"
        assert wt.run_dir == expected.resolve()


# --- dirty diff --------------------------------------------------------------------------------


def test_dirty_diff_of_a_clean_repository_is_empty(repo_dir: Path) -> None:
    diff = dirty_diff(open_repository(repo_dir))
    assert diff.is_clean
    assert diff.text == ""
    assert diff.base_commit == head(repo_dir)


def test_dirty_diff_has_staged_unstaged_and_untracked_work_but_not_ignored(
    repo_dir: Path,
) -> None:
    make_dirty(repo_dir)
    diff = dirty_diff(open_repository(repo_dir))
    kinds = {f.path: f.kind for f in diff.files}
    assert kinds == {
        "README.md": ChangeKind.MODIFIED,
        "image.bin": ChangeKind.UNTRACKED,
        "notes/todo.md": ChangeKind.UNTRACKED,
        "old.txt": ChangeKind.DELETED,
        "src/app.py": ChangeKind.MODIFIED,
        "staged_new.txt": ChangeKind.ADDED,
    }
    assert diff.paths == tuple(sorted(kinds))
    by_path = {f.path: f for f in diff.files}
    # staged and unstaged changes of one file appear as one change against HEAD
    assert " hello\n+staged line\n+unstaged line\n" in by_path["README.md"].patch
    assert "-print('two')\n+print('TWO')\n" in by_path["src/app.py"].patch
    assert "+++ b/notes/todo.md\n@@ -0,0 +1 @@\n+untracked in a new dir\n" in diff.text
    assert "+new and staged\n" in by_path["staged_new.txt"].patch
    assert "-to be deleted\n" in by_path["old.txt"].patch
    assert by_path["image.bin"].binary
    assert "Binary files /dev/null and b/image.bin differ" in by_path["image.bin"].patch
    assert "\x00" not in diff.text
    assert "debug.log" not in diff.text
    assert "build/" not in diff.text
    assert diff.text.startswith("diff --git a/README.md b/README.md\n")


def test_dirty_diff_applies_to_the_worktree(repo_dir: Path, state: Path) -> None:
    """The diff is exactly the user's work: applied in the worktree it reproduces their files."""
    make_dirty(repo_dir)
    repo = open_repository(repo_dir)
    diff = dirty_diff(repo)
    with disposable_worktree(repo, run_id="apply", state_dir=state) as wt:
        text_only = "".join(f.patch for f in diff.files if not f.binary)
        subprocess.run(["git", "apply", "-"], cwd=wt.path, input=text_only, text=True, check=True)
        for rel in ("README.md", "src/app.py", "staged_new.txt", "notes/todo.md"):
            assert (wt.path / rel).read_text() == (repo_dir / rel).read_text()
        assert not (wt.path / "old.txt").exists()


@pytest.mark.parametrize("module", [worktree_module, prompt_module, paths_module])
def test_all_lists_every_public_definition(module: types.ModuleType) -> None:
    defined = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    }
    assert defined <= set(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)


def test_a_half_made_admin_dir_is_removed_after_a_failed_add(
    repo_dir: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libgit2 makes the admin dir first; when the add fails after that, the dir stays."""
    admin_dir = repo_dir / ".git" / "worktrees" / "asup-half"

    def half_add(self: pygit2.Repository, name: str, path: str, ref: object) -> None:
        admin_dir.mkdir(parents=True)
        raise pygit2.GitError("failed to make directory")

    monkeypatch.setattr(pygit2.Repository, "add_worktree", half_add)
    with pytest.raises(WorktreeError, match="failed to make directory"):
        create_worktree(open_repository(repo_dir), run_id="half", state_dir=state)
    assert not admin_dir.exists()
    assert not (worktrees_root(state) / "half").exists()
    assert git(repo_dir, "branch").split() == ["*", "main"]


def test_a_record_pointing_outside_its_run_dir_is_not_followed(
    repo_dir: Path, state: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("keep\n")
    repo = open_repository(repo_dir)
    with disposable_worktree(repo, run_id="edited", state_dir=state) as wt:
        rewrite_owner(wt, checkout=str(precious), pid=2**22 + 1)
        assert reap_leftovers(state) == []
        assert (precious / "keep.txt").exists()
        assert wt.path.is_dir()


SECRET_CONFIG = """\
[core]
\trepositoryformatversion = 1
\tfilemode = true
\tbare = false
\thooksPath = /home/user/evil-hooks
\tfsmonitor = /home/user/run-me.sh
[extensions]
\tobjectformat = sha256
[remote "origin"]
\turl = https://user:ghp_notarealtokenbutshapedlikeone0000000@github.com/o/r.git
\tfetch = +refs/heads/*:refs/remotes/origin/*
[http]
\textraheader = AUTHORIZATION: bearer sekrit
[credential]
\thelper = store
[include]
\tpath = /home/user/.secrets.gitconfig
[alias]
\tst = !rm -rf /
"""


def test_sanitized_git_config_keeps_how_to_read_the_repository_and_nothing_else(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config"
    path.write_text(SECRET_CONFIG)
    import pygit2

    entries = [(e.name, e.value) for e in pygit2.Config(str(path))]
    text = sanitized_git_config(entries)
    assert "repositoryformatversion = 1" in text
    assert "objectformat = sha256" in text
    assert "filemode = true" in text
    for gone in (
        "ghp_",
        "url",
        "bearer",
        "helper",
        "hooksPath",
        "hookspath",
        "fsmonitor",
        "secrets",
        "alias",
        "rm -rf",
        "origin",
    ):
        assert gone not in text, gone
    # git itself reads the copy back: only [core] and [extensions]
    sections = {
        name.split(".")[0]
        for name, _ in [(e.name, e.value) for e in pygit2.Config(str(_write(tmp_path, text)))]
    }
    assert sections == {"core", "extensions"}


def _write(tmp_path: Path, text: str) -> Path:
    out = tmp_path / "copy"
    out.write_text(text)
    return out


def test_write_git_config_of_a_worktree(repo_dir: Path, state: Path) -> None:
    (repo_dir / ".git" / "config").write_text(
        (repo_dir / ".git" / "config").read_text()
        + '[remote "origin"]\n\turl = https://u:tok3n@example.invalid/r.git\n'
    )
    repo = open_repository(repo_dir)
    with disposable_worktree(repo, run_id="cfg", state_dir=state) as wt:
        copy = wt.write_git_config(wt.run_dir / "git-config")
        text = copy.read_text()
        assert "tok3n" not in text
        assert "repositoryformatversion = 0" in text
