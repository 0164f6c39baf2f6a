"""Reviews on real temporary repositories: capture, staging, apply, discard, and every refusal."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import threading
from argparse import Namespace
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ConfigLevel

import supervisor.store as store_module
from supervisor.review import (
    PATCH_FILE,
    Applied,
    Capture,
    ReviewRefused,
    apply_review,
    capture,
    discard_review,
    stage_review,
)
from supervisor.store import ReviewState, RunStore
from supervisor.worktree import Worktree, create_worktree

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}
LIMIT = 1 << 20


@pytest.fixture(autouse=True)
def isolated(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """No user or system git config, for the git CLI and for libgit2."""
    home = tmp_path_factory.mktemp("home")
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(home))
    levels = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM, ConfigLevel.PROGRAMDATA)
    saved = {level: pygit2.settings.search_path[level] for level in levels}
    for level in levels:
        pygit2.settings.search_path[level] = str(home)
    yield
    for level, value in saved.items():
        pygit2.settings.search_path[level] = value


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@dataclass(frozen=True)
class Plain:
    """A stand-in for the secret scan's result."""

    text: str
    findings: Sequence[object] = ()
    flagged: bool = False


def keep(text: str) -> Plain:
    return Plain(text)


def hide_secret(text: str) -> Plain:
    found = text.count("SECRET-123")
    return Plain(text.replace("SECRET-123", "[redacted]"), ("token",) * found, found > 0)


def broken_scan(text: str) -> Plain:
    raise RuntimeError("scanner crashed on SECRET-123")


@dataclass
class Setup:
    repo: pygit2.Repository
    root: Path
    store: RunStore
    run_id: str
    worktree: Worktree

    @property
    def wt(self) -> Path:
        return self.worktree.path

    def capture(self) -> Capture:
        return capture(self.wt, self.worktree.base_commit, limit_bytes=LIMIT)

    def stage(self, redact: Callable[[str], Plain] = keep) -> str:
        """Stage the worktree's change; the digits a person would type."""
        return stage_review(self.store, self.run_id, self.capture(), redact).patch_sha256[:12]

    def apply(self, digits: str, *, allow_flagged: bool = False) -> Applied:
        return apply_review(
            self.repo, self.store, self.run_id, typed_digits=digits, allow_flagged=allow_flagged
        )


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Person")
    git(root, "config", "user.email", "person@example.invalid")
    (root / "README.md").write_text("hello\n")
    (root / "old.txt").write_text("to be deleted\n")
    (root / "moved.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    (root / "run.sh").write_text("echo hi\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02\x03")
    (root / ".gitignore").write_text("*.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    repo = pygit2.Repository(str(root))
    store = RunStore(tmp_path / "state")
    run = store.create_run(agent="claude-cli", argv=["claude"], repo=root)
    worktree = create_worktree(repo, run_id=run.id, state_dir=tmp_path / "state")
    return Setup(repo, root, store, run.id, worktree)


def snapshot(root: Path) -> dict[str, object]:
    """Everything of the user's repository an apply may not touch, and its branches."""
    files = {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }
    return {
        "files": files,
        "index": (root / ".git" / "index").read_bytes(),
        "HEAD": (root / ".git" / "HEAD").read_bytes(),
        "head": git(root, "rev-parse", "HEAD"),
        "status": git(root, "status", "--porcelain=v1", "--untracked-files=all"),
        "refs": git(root, "for-each-ref", "--format=%(refname) %(objectname)"),
    }


def make_dirty(root: Path) -> None:
    (root / "README.md").write_text("hello, edited by the user\n")
    (root / "notes.txt").write_text("untracked\n")
    (root / "staged.txt").write_text("staged\n")
    git(root, "add", "staged.txt")


def worktree_tree(wt: Path) -> str:
    """What git itself makes of the worktree's files: the tree an apply must produce."""
    git(wt, "add", "-A")
    return git(wt, "write-tree").strip()


# ---------------------------------------------------------------------------------------------
# Capture, case by case, and the round trip through apply


def _modify(wt: Path) -> None:
    (wt / "README.md").write_text("hello\nworld\n")


def _add(wt: Path) -> None:
    (wt / "src" / "deep").mkdir(parents=True)
    (wt / "src" / "deep" / "new.py").write_text("print('new')\n")


def _delete(wt: Path) -> None:
    (wt / "old.txt").unlink()


def _rename(wt: Path) -> None:
    (wt / "moved.txt").rename(wt / "renamed.txt")


def _mode(wt: Path) -> None:
    os.chmod(wt / "run.sh", 0o755)


def _binary(wt: Path) -> None:
    (wt / "blob.bin").write_bytes(b"\x00\xff\xfe" * 50)


def _symlink_in(wt: Path) -> None:
    os.symlink("README.md", wt / "link")


def _latin1(wt: Path) -> None:
    (wt / "latin.txt").write_bytes(b"caf\xe9\n")


CASES = {
    "modified": (_modify, "modified", "README.md", b"+world"),
    "new": (_add, "added", "src/deep/new.py", b"new file mode 100644"),
    "deleted": (_delete, "deleted", "old.txt", b"deleted file mode 100644"),
    "renamed": (_rename, "renamed", "renamed.txt", b"rename from moved.txt"),
    "mode": (_mode, "modified", "run.sh", b"new mode 100755"),
    "binary": (_binary, "modified", "blob.bin", b"GIT binary patch"),
    "symlink inside": (_symlink_in, "added", "link", b"new file mode 120000"),
    "not utf-8": (_latin1, "added", "latin.txt", b"+caf\xe9"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_kind_of_change_is_captured_and_lands_exactly(setup: Setup, case: str) -> None:
    change, status, path, marker = CASES[case]
    change(setup.wt)
    (setup.wt / "debug.log").write_text("ignored\n")
    got = setup.capture()
    assert not got.empty
    assert [(f.status, f.path) for f in got.files] == [(status, path)]
    assert marker in got.patch
    assert b"debug.log" not in got.patch
    assert got.flags == ()
    assert got.notes == ()
    applied = setup.apply(setup.stage())
    commit = setup.repo.get(applied.commit)
    assert isinstance(commit, pygit2.Commit)
    assert [str(p) for p in commit.parent_ids] == [setup.worktree.base_commit]
    assert str(commit.tree_id) == worktree_tree(setup.wt)


def test_everything_at_once_lands_as_one_commit(setup: Setup) -> None:
    for change, *_ in CASES.values():
        change(setup.wt)
    got = setup.capture()
    assert len(got.files) == len(CASES)
    applied = setup.apply(setup.stage())
    assert applied.branch == f"external/{setup.run_id}"
    commit = setup.repo.revparse_single(applied.branch)
    assert isinstance(commit, pygit2.Commit)
    assert str(commit.id) == applied.commit
    assert str(commit.tree_id) == worktree_tree(setup.wt)
    assert git(setup.root, "rev-list", "--count", f"main..{applied.branch}") == "1\n"
    assert commit.author.name == "agent-supervisor"
    assert (commit.committer.name, commit.committer.email) == ("Person", "person@example.invalid")
    review = setup.store.get_review(setup.run_id)
    assert review is not None
    assert setup.run_id in commit.message
    assert "claude-cli" in commit.message
    assert review.patch_sha256 in commit.message


def test_an_unchanged_worktree_has_nothing_to_review(setup: Setup) -> None:
    (setup.wt / "debug.log").write_text("ignored\n")
    got = setup.capture()
    assert got.empty
    assert got.files == ()
    with pytest.raises(ReviewRefused, match="changed no file: nothing to review") as info:
        stage_review(setup.store, setup.run_id, got, keep)
    assert info.value.code == "empty"
    assert setup.store.get_review(setup.run_id) is None


@pytest.mark.parametrize("target", ["/etc/passwd", "../../outside", "sub/../../x"])
def test_a_symlink_out_of_the_repository_is_flagged(setup: Setup, target: str) -> None:
    os.symlink(target, setup.wt / "escape")
    got = setup.capture()
    assert got.flags == (f"escape is a symlink to {target}, outside the repository",)
    digits = setup.stage()
    review = setup.store.get_review(setup.run_id)
    assert review is not None
    assert review.flagged
    assert review.flag_reasons == got.flags
    before = snapshot(setup.root)
    with pytest.raises(ReviewRefused, match=r"is flagged .*--allow-flagged") as info:
        setup.apply(digits)
    assert info.value.code == "flagged"
    assert snapshot(setup.root) == before
    applied = setup.apply(digits, allow_flagged=True)
    tree = setup.repo.revparse_single(applied.branch).peel(pygit2.Tree)
    assert tree["escape"].filemode == pygit2.enums.FileMode.LINK


def test_a_moved_head_and_a_changed_index_are_ignored_and_noted(setup: Setup) -> None:
    _modify(setup.wt)
    (setup.wt / "committed.txt").write_text("the child committed this\n")
    git(setup.wt, "add", "committed.txt")
    git(setup.wt, "commit", "-q", "-m", "child")
    (setup.wt / "staged.txt").write_text("staged\n")
    git(setup.wt, "add", "staged.txt")
    got = setup.capture()
    assert got.base_commit == setup.worktree.base_commit
    assert sorted(f.path for f in got.files) == ["README.md", "committed.txt", "staged.txt"]
    assert len(got.notes) == 2
    assert got.notes[0].startswith("the worktree's HEAD moved to")
    assert got.notes[1].startswith("the worktree's index differs from the base commit")


def test_a_change_over_the_limit_is_refused_and_nothing_is_stored(setup: Setup) -> None:
    (setup.wt / "big.txt").write_text("x" * 5000 + "\n")
    with pytest.raises(ReviewRefused) as info:
        capture(setup.wt, setup.worktree.base_commit, limit_bytes=1000)
    assert info.value.code == "patch_too_large"
    assert "more than the review limit of 1000 bytes; nothing was stored" in str(info.value)
    size = len(setup.capture().patch)
    assert f"the change is {size} bytes" in str(info.value)
    assert setup.store.get_review(setup.run_id) is None


def test_a_missing_base_commit_is_refused(setup: Setup) -> None:
    with pytest.raises(ReviewRefused, match="is not in the repository") as info:
        capture(setup.wt, "0" * 40, limit_bytes=LIMIT)
    assert info.value.code == "base_missing"


# ---------------------------------------------------------------------------------------------
# Staging


def test_the_stored_patch_is_the_redacted_one_and_its_hash_is_of_those_bytes(
    setup: Setup,
) -> None:
    (setup.wt / "config.env").write_text("TOKEN=SECRET-123\n")
    digits = setup.stage(hide_secret)
    review = setup.store.get_review(setup.run_id)
    assert review is not None
    assert review.state is ReviewState.PENDING
    assert review.patch_path == str(setup.store.run_dir(setup.run_id) / PATCH_FILE)
    stored = Path(review.patch_path).read_bytes()
    assert b"SECRET-123" not in stored
    assert b"+TOKEN=[redacted]" in stored
    assert review.patch_sha256 == hashlib.sha256(stored).hexdigest()
    assert digits == review.patch_sha256[:12]
    assert review.flagged
    assert review.stats == {"files": 1, "insertions": 1, "deletions": 0}
    applied = setup.apply(digits, allow_flagged=True)
    blob = setup.repo.revparse_single(f"{applied.branch}:config.env")
    assert isinstance(blob, pygit2.Blob)
    assert blob.data == b"TOKEN=[redacted]\n"


def test_a_failed_scan_stores_nothing_and_says_only_why(setup: Setup) -> None:
    (setup.wt / "config.env").write_text("TOKEN=SECRET-123\n")
    with pytest.raises(ReviewRefused) as info:
        stage_review(setup.store, setup.run_id, setup.capture(), broken_scan)
    assert info.value.code == "redaction_failed"
    assert str(info.value) == (
        f"the secret scan of run {setup.run_id}'s change could not complete (RuntimeError);"
        " nothing was stored, so there is nothing to review or apply"
    )
    assert setup.store.get_review(setup.run_id) is None
    assert sorted(p.name for p in setup.store.run_dir(setup.run_id).iterdir()) == [
        "events.jsonl",
        "stderr.txt",
        "stdout.jsonl",
    ]


def test_a_run_is_staged_once_and_only_a_known_run(setup: Setup) -> None:
    _modify(setup.wt)
    first = setup.stage()
    with pytest.raises(ReviewRefused, match="has a review already"):
        setup.stage()
    review = setup.store.get_review(setup.run_id)
    assert review is not None
    assert review.patch_sha256[:12] == first
    with pytest.raises(ReviewRefused, match="there is no run nope") as info:
        stage_review(setup.store, "nope", setup.capture(), keep)
    assert info.value.code == "no_run"


# ---------------------------------------------------------------------------------------------
# Deciding: the state machine and the refusals


def test_apply_lands_once_and_survives_a_restart(setup: Setup) -> None:
    _modify(setup.wt)
    digits = setup.stage()
    applied = setup.apply(digits)
    again = RunStore(setup.store.state_dir).get_review(setup.run_id)
    assert again is not None
    assert again.state is ReviewState.APPLIED
    assert again.branch == applied.branch
    assert again.decided_at is not None
    before = snapshot(setup.root)
    with pytest.raises(ReviewRefused, match="was applied already, to branch external/") as info:
        setup.apply(digits)
    assert info.value.code == "already_applied"
    with pytest.raises(ReviewRefused, match="was applied already"):
        discard_review(setup.store, setup.run_id)
    assert snapshot(setup.root) == before


def test_discard_removes_the_patch_and_nothing_lands_after(setup: Setup) -> None:
    _modify(setup.wt)
    digits = setup.stage()
    review = setup.store.get_review(setup.run_id)
    assert review is not None
    assert review.patch_path is not None
    patch_path = Path(review.patch_path)
    before = snapshot(setup.root)
    discarded = discard_review(setup.store, setup.run_id)
    assert discarded.state is ReviewState.DISCARDED
    assert discarded.patch_path is None
    assert not patch_path.exists()
    for action in (lambda: setup.apply(digits), lambda: discard_review(setup.store, setup.run_id)):
        with pytest.raises(ReviewRefused, match="change was discarded") as info:
            action()
        assert info.value.code == "already_discarded"
    assert snapshot(setup.root) == before


def test_a_run_without_a_review(setup: Setup) -> None:
    for action in (
        lambda: setup.apply("0" * 12),
        lambda: discard_review(setup.store, setup.run_id),
    ):
        with pytest.raises(ReviewRefused, match=f"run {setup.run_id} has no review") as info:
            action()
        assert info.value.code == "no_review"


@pytest.mark.parametrize("dirty", [False, True], ids=["clean", "dirty"])
def test_refusals_change_nothing(setup: Setup, dirty: bool, tmp_path: Path) -> None:
    _modify(setup.wt)
    os.symlink("/etc", setup.wt / "etc")
    digits = setup.stage()
    if dirty:
        make_dirty(setup.root)
    wrong = "f" * 12 if digits != "f" * 12 else "e" * 12
    before = snapshot(setup.root)

    def expect(code: str, sentence: str, action: Callable[[], object]) -> None:
        with pytest.raises(ReviewRefused, match=sentence) as info:
            action()
        assert info.value.code == code
        assert snapshot(setup.root) == before

    expect(
        "wrong_digits",
        "the digits typed are not the first 12 of run .*'s patch hash; nothing was applied",
        lambda: setup.apply(wrong, allow_flagged=True),
    )
    expect("wrong_digits", "nothing was applied", lambda: setup.apply(""))
    expect("flagged", "is flagged .*etc is a symlink to /etc", lambda: setup.apply(digits))

    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    git(other, "commit", "-q", "--allow-empty", "-m", "unrelated")
    other_before = snapshot(other)
    with pytest.raises(ReviewRefused, match=r"base commit .* is not in the repository") as info:
        apply_review(
            pygit2.Repository(str(other)),
            setup.store,
            setup.run_id,
            typed_digits=digits,
            allow_flagged=True,
        )
    assert info.value.code == "base_missing"
    assert snapshot(other) == other_before

    review = setup.store.get_review(setup.run_id)
    assert review is not None
    assert review.patch_path is not None
    patch = Path(review.patch_path)
    original = patch.read_bytes()
    patch.write_bytes(original.replace(b"+world", b"+WORLD"))
    expect(
        "patch_changed",
        "changed since it was staged",
        lambda: setup.apply(digits, allow_flagged=True),
    )
    patch.write_bytes(original)

    git(setup.root, "branch", f"external/{setup.run_id}", "HEAD")
    before = snapshot(setup.root)
    expect(
        "branch_exists",
        f"a branch external/{setup.run_id} exists already; nothing was applied",
        lambda: setup.apply(digits, allow_flagged=True),
    )
    review = setup.store.get_review(setup.run_id)
    assert review is not None
    assert review.state is ReviewState.PENDING


def test_apply_touches_nothing_of_a_dirty_repository_but_adds_one_branch(setup: Setup) -> None:
    _modify(setup.wt)
    _add(setup.wt)
    digits = setup.stage()
    make_dirty(setup.root)
    before = snapshot(setup.root)
    applied = setup.apply(digits)
    after = snapshot(setup.root)
    refs_before = str(before.pop("refs"))
    refs_after = str(after.pop("refs"))
    assert after == before
    assert refs_after.splitlines() == sorted(
        [*refs_before.splitlines(), f"refs/heads/{applied.branch} {applied.commit}"]
    )
    assert applied.notes == ()


def test_a_branch_that_moved_on_is_not_the_parent_and_is_named(setup: Setup) -> None:
    _modify(setup.wt)
    digits = setup.stage()
    (setup.root / "later.txt").write_text("the user kept working\n")
    git(setup.root, "add", "later.txt")
    git(setup.root, "commit", "-q", "-m", "later")
    applied = setup.apply(digits)
    commit = setup.repo.get(applied.commit)
    assert isinstance(commit, pygit2.Commit)
    assert [str(p) for p in commit.parent_ids] == [setup.worktree.base_commit]
    assert "later.txt" not in commit.tree
    assert applied.notes == (
        "main has moved on since the run (it is 1 commit(s) past the base); the branch is cut"
        f" from the run's base commit {setup.worktree.base_commit[:12]}: merge or rebase it",
    )


def test_a_patch_that_does_not_apply_to_its_base_is_refused(setup: Setup) -> None:
    _modify(setup.wt)

    def rewrite_context(text: str) -> Plain:
        return Plain(text.replace(" hello\n", " howdy\n"))

    digits = setup.stage(rewrite_context)
    before = snapshot(setup.root)
    with pytest.raises(ReviewRefused, match="patch does not apply to its base commit") as info:
        setup.apply(digits)
    assert info.value.code == "does_not_apply"
    assert snapshot(setup.root) == before


def test_two_applies_at_once_land_exactly_once(setup: Setup) -> None:
    _modify(setup.wt)
    digits = setup.stage()
    barrier = threading.Barrier(2)
    results: list[Applied | ReviewRefused] = []

    def apply_in_thread() -> None:
        repo = pygit2.Repository(str(setup.root))
        store = RunStore(setup.store.state_dir)
        barrier.wait()
        try:
            results.append(
                apply_review(repo, store, setup.run_id, typed_digits=digits, allow_flagged=False)
            )
        except ReviewRefused as exc:
            results.append(exc)

    threads = [threading.Thread(target=apply_in_thread) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [r for r in results if isinstance(r, Applied)]
    lost = [r for r in results if isinstance(r, ReviewRefused)]
    assert len(won) == 1
    assert len(lost) == 1
    assert lost[0].code in {"already_applied", "branch_exists"}
    refs = git(setup.root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    assert refs.splitlines()[0] == f"refs/heads/external/{setup.run_id} {won[0].commit}"
    assert len(refs.splitlines()) == 2


# ---------------------------------------------------------------------------------------------
# The store's migration


def test_a_version_1_store_gains_the_reviews_table(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "runs.sqlite3", isolation_level=None)
    store_module._v1(db)
    db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    db.execute(
        "INSERT INTO runs (id, agent, argv, owner_pid, owner_started, state, started_at) "
        "VALUES ('r1', 'claude-cli', '[]', 1, 0.0, 'finished', '2026-01-01T00:00:00+00:00')"
    )
    db.close()
    store = RunStore(tmp_path)
    assert store.get("r1") is not None
    assert store.get_review("r1") is None
    store.add_review(
        run_id="r1",
        base_commit="a" * 40,
        patch_sha256="b" * 64,
        patch_path=tmp_path / "p",
        flagged=False,
        flag_reasons=[],
        stats={"files": 1},
    )
    with sqlite3.connect(tmp_path / "runs.sqlite3") as check:
        version = check.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    check.close()
    assert version == ("2",)
    review = RunStore(tmp_path).get_review("r1")
    assert review is not None
    assert review.state is ReviewState.PENDING


# ---------------------------------------------------------------------------------------------
# The scan's result as supervisor.redact shapes it, and the CLI functions


@dataclass(frozen=True)
class PatchShaped:
    patch: str
    findings: tuple[object, ...]

    @property
    def flagged(self) -> bool:
        return bool(self.findings)


def test_a_scan_result_holding_the_patch_as_patch_is_stored(setup: Setup) -> None:
    (setup.wt / "config.env").write_text("TOKEN=SECRET-123\n")

    def redact(text: str) -> PatchShaped:
        return PatchShaped(text.replace("SECRET-123", "[REDACTED:x]"), ("x",))

    review = stage_review(setup.store, setup.run_id, setup.capture(), redact)
    assert review.patch_path is not None
    assert b"+TOKEN=[REDACTED:x]" in Path(review.patch_path).read_bytes()
    assert review.flag_reasons == (
        "the secret scan flagged the change (1 finding(s), redacted in the stored patch)",
    )


@pytest.fixture
def cli(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> Setup:
    """The CLI's state dir is the setup's store."""
    monkeypatch.setattr(
        "supervisor.cli.review.paths.state_dir", lambda env=None: setup.store.state_dir
    )
    return setup


def test_review_command_prints_json_and_the_diff(
    cli: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.cli.review import review_command

    _modify(cli.wt)
    (cli.wt / "evil.txt").write_text("line\x1b[2Khidden\n")
    digits = cli.stage()
    assert review_command(Namespace(run_id=cli.run_id, json=True)) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["state"] == "pending"
    assert body["patch_sha256"][:12] == digits
    assert body["stats"] == {"files": 2, "insertions": 2, "deletions": 0}
    assert "+world" in body["patch"]
    assert review_command(Namespace(run_id=cli.run_id, json=False)) == 0
    shown = capsys.readouterr().out
    assert "+world" in shown
    assert "\x1b[2K" not in shown
    assert "\\x1b[2Khidden" in shown
    assert body["patch_sha256"] in shown


def test_cli_refusals_exit_1_and_say_so(cli: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    from supervisor.cli.review import apply_command, discard_command, review_command

    assert review_command(Namespace(run_id=cli.run_id, json=False)) == 1
    assert "asup review: refused: run " in capsys.readouterr().err
    _modify(cli.wt)
    cli.stage()
    before = snapshot(cli.root)
    # pytest's stdin is not a terminal: apply refuses before it asks anything.
    assert apply_command(Namespace(run_id=cli.run_id, allow_flagged=False, repo=None)) == 1
    err = capsys.readouterr().err
    assert err.startswith("asup apply: refused: applying needs a person at a terminal")
    assert snapshot(cli.root) == before
    assert discard_command(Namespace(run_id=cli.run_id)) == 0
    assert "discarded run" in capsys.readouterr().out
    assert discard_command(Namespace(run_id=cli.run_id)) == 1
    assert "asup discard: refused: run " in capsys.readouterr().err
