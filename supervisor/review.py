"""What a child wrote, staged for a person, and landed only when that person types its hash.

::

    capture(worktree, base)        the worktree's files vs the base commit, one git patch
        │                          (untracked files, renames, modes, binaries, symlinks)
        ▼
    stage_review(store, run, …)    redact → sha256 of the redacted bytes → <run dir>/review.patch
        │                          and a ``pending`` row in ``reviews``
        ├── apply_review(…)        typed digits == sha256[:12] → one commit on the base, in the
        │                          object database only, and a new branch external/<run id>
        └── discard_review(…)      the patch file goes; the row says ``discarded``

Everything git is done with pygit2, outside any sandbox. The user's HEAD, index and working tree
are never written; nothing is pushed. See docs/review.md.

Errors (the tree is in :mod:`supervisor.errors`)::

    SupervisorError
    └── Refusal
        └── ReviewRefused        ``code`` names the case: empty, patch_too_large,
                                 redaction_failed, no_run, no_review, wrong_digits, flagged,
                                 already_applied, already_discarded, branch_exists,
                                 base_missing, patch_changed, does_not_apply, repository
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import pygit2
from pygit2.enums import ApplyLocation, DeltaStatus, DiffFind, DiffOption, FileMode, ObjectType

from supervisor.errors import Refusal, StoreError, SupervisorError
from supervisor.store import ReviewRecord, ReviewState, RunStore

__all__ = [
    "BRANCH_PREFIX",
    "DEFAULT_LIMIT_BYTES",
    "DIGITS",
    "IDENTITY_EMAIL",
    "IDENTITY_NAME",
    "PATCH_FILE",
    "Applied",
    "Capture",
    "FileChange",
    "Redaction",
    "Redactor",
    "ReviewRefused",
    "apply_review",
    "capture",
    "discard_review",
    "pending_review",
    "read_patch",
    "stage_review",
]

BRANCH_PREFIX = "external/"
DEFAULT_LIMIT_BYTES = 8 * 1024 * 1024
DIGITS = 12
PATCH_FILE = "review.patch"
IDENTITY_NAME = "agent-supervisor"
IDENTITY_EMAIL = "agent-supervisor@localhost"

_DIFF_FLAGS = (
    DiffOption.INCLUDE_UNTRACKED
    | DiffOption.RECURSE_UNTRACKED_DIRS
    | DiffOption.SHOW_UNTRACKED_CONTENT
    | DiffOption.INCLUDE_TYPECHANGE
    | DiffOption.SHOW_BINARY
)
_STATUS = {
    DeltaStatus.ADDED: "added",
    DeltaStatus.UNTRACKED: "added",
    DeltaStatus.COPIED: "added",
    DeltaStatus.DELETED: "deleted",
    DeltaStatus.MODIFIED: "modified",
    DeltaStatus.RENAMED: "renamed",
    DeltaStatus.TYPECHANGE: "type changed",
}


class ReviewRefused(Refusal):
    """A review step refuses; ``code`` names the case, the message the cause and the fix."""

    code = "review"


@runtime_checkable
class _RedactedText(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def findings(self) -> Sequence[object]: ...
    @property
    def flagged(self) -> bool: ...


@runtime_checkable
class _RedactedPatch(Protocol):
    @property
    def patch(self) -> str: ...
    @property
    def findings(self) -> Sequence[object]: ...
    @property
    def flagged(self) -> bool: ...


# What the secret scan returns (``supervisor.redact.Redaction``): the redacted patch as
# ``text`` or ``patch``, the findings, and whether they flag the change.
Redaction = _RedactedText | _RedactedPatch
Redactor = Callable[[str], Redaction]


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    old_path: str | None  # set for a rename
    status: str  # added, deleted, modified, renamed, type changed
    binary: bool


@dataclass(frozen=True, slots=True)
class Capture:
    """The worktree's change against ``base_commit`` as one git patch (bytes as git wrote them).
    ``flags`` are reasons a person must look twice (they block apply without
    ``allow_flagged``); ``notes`` are facts worth saying that change nothing."""

    base_commit: str
    patch: bytes
    files: tuple[FileChange, ...]
    flags: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.patch


@dataclass(frozen=True, slots=True)
class Applied:
    """A landed review: the new branch, its one commit, and what the user should know."""

    run_id: str
    branch: str
    commit: str
    base_commit: str
    notes: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Capture


def capture(worktree_path: Path | str, base_commit: str, *, limit_bytes: int) -> Capture:
    """The files of the worktree at ``worktree_path`` against ``base_commit``: tracked changes
    and untracked files that are not ignored, renames detected, binaries as git binary patches.
    The worktree's HEAD and index are ignored (a note says when they moved). Refused when the
    patch is larger than ``limit_bytes``. Reads only."""
    try:
        repo = pygit2.Repository(str(worktree_path))
    except pygit2.GitError as exc:
        raise ReviewRefused(
            f"{worktree_path} is not a readable git worktree ({exc}); it may have been removed"
            " already, so there is nothing to review",
            code="repository",
        ) from exc
    try:
        return _capture(repo, Path(worktree_path), base_commit, limit_bytes)
    finally:
        repo.free()


def _capture(repo: pygit2.Repository, root: Path, base_commit: str, limit: int) -> Capture:
    base = _commit(repo, base_commit)
    if base is None:
        raise ReviewRefused(
            f"the base commit {base_commit} is not in the repository of {root}; the change"
            " cannot be taken against it",
            code="base_missing",
        )
    notes = []
    if not repo.head_is_unborn and str(repo.head.target) != str(base.id):
        notes.append(
            f"the worktree's HEAD moved to {str(repo.head.target)[:12]}; ignored: the change is"
            f" the worktree's files against the base commit {base_commit[:12]}"
        )
    if len(base.tree.diff_to_index(repo.index)) > 0:
        notes.append(
            "the worktree's index differs from the base commit; ignored: the change is the"
            " worktree's files as they are"
        )
    diff = base.tree.diff_to_workdir(_DIFF_FLAGS)
    diff.find_similar(DiffFind.FIND_RENAMES | DiffFind.FIND_FOR_UNTRACKED)
    chunks: list[bytes] = []
    files: list[FileChange] = []
    flags: list[str] = []
    for patch in diff:
        if patch is None:
            continue
        delta = patch.delta
        chunks.append(patch.data)
        status = _STATUS.get(delta.status, "modified")
        files.append(
            FileChange(
                path=delta.new_file.path if status != "deleted" else delta.old_file.path,
                old_path=delta.old_file.path if status == "renamed" else None,
                status=status,
                binary=bool(delta.is_binary),
            )
        )
        if status != "deleted" and delta.new_file.mode == FileMode.LINK:
            target = os.readlink(root / delta.new_file.path)
            if _outside(delta.new_file.path, target):
                flags.append(
                    f"{delta.new_file.path} is a symlink to {target}, outside the repository"
                )
    data = b"".join(chunks)
    if len(data) > limit:
        raise ReviewRefused(
            f"the change is {len(data)} bytes, more than the review limit of {limit} bytes;"
            " nothing was stored: ask for a smaller change or raise the limit",
            code="patch_too_large",
        )
    return Capture(
        base_commit=str(base.id),
        patch=data,
        files=tuple(files),
        flags=tuple(flags),
        notes=tuple(notes),
    )


def _outside(link: str, target: str) -> bool:
    """Whether a symlink at ``link`` (relative to the root) points outside the root."""
    if os.path.isabs(target):
        return True
    resolved = os.path.normpath(os.path.join(os.path.dirname(link), target))
    return resolved == ".." or resolved.startswith("../")


def _commit(repo: pygit2.Repository, hex_id: str) -> pygit2.Commit | None:
    try:
        found = repo.get(hex_id)
    except (ValueError, pygit2.GitError):
        return None
    return found if isinstance(found, pygit2.Commit) else None


# ---------------------------------------------------------------------------------------------
# Staging


def stage_review(store: RunStore, run_id: str, capture: Capture, redact: Redactor) -> ReviewRecord:
    """Redact the captured patch and store it as run ``run_id``'s pending review. The stored
    bytes are the redacted patch and the hash is theirs: what a person reviews is exactly what
    can land. A scan that cannot complete stores nothing and says only why."""
    if store.get(run_id) is None:
        raise ReviewRefused(
            f"there is no run {run_id}; `asup runs list` shows the runs", code="no_run"
        )
    if capture.empty:
        raise ReviewRefused(f"run {run_id} changed no file: nothing to review", code="empty")
    try:
        redaction = redact(capture.patch.decode("utf-8", "surrogateescape"))
    except Exception as exc:  # any failure of the scan: fail closed
        why = str(exc) if isinstance(exc, SupervisorError) else type(exc).__name__
        raise ReviewRefused(
            f"the secret scan of run {run_id}'s change could not complete ({why}); nothing"
            " was stored, so there is nothing to review or apply",
            code="redaction_failed",
        ) from None
    text = redaction.text if isinstance(redaction, _RedactedText) else redaction.patch
    data = text.encode("utf-8", "surrogateescape")
    try:
        stats = pygit2.Diff.parse_diff(data).stats
    except pygit2.GitError:
        raise ReviewRefused(
            f"the redacted change of run {run_id} is no longer a readable patch; nothing was"
            " stored",
            code="redaction_failed",
        ) from None
    reasons = list(capture.flags)
    if redaction.flagged:
        reasons.append(
            f"the secret scan flagged the change ({len(redaction.findings)} finding(s),"
            " redacted in the stored patch)"
        )
    path = store.run_dir(run_id) / PATCH_FILE
    if store.get_review(run_id) is not None:
        raise ReviewRefused(f"run {run_id} has a review already", code="already_staged")
    tmp = path.with_name(f"{PATCH_FILE}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    try:
        return store.add_review(
            run_id=run_id,
            base_commit=capture.base_commit,
            patch_sha256=hashlib.sha256(data).hexdigest(),
            patch_path=path,
            flagged=bool(reasons),
            flag_reasons=reasons,
            stats={
                "files": stats.files_changed,
                "insertions": stats.insertions,
                "deletions": stats.deletions,
            },
            effect=lambda: os.replace(tmp, path),
        )
    finally:
        tmp.unlink(missing_ok=True)


def read_patch(review: ReviewRecord) -> bytes:
    """The stored patch of a pending review, checked against its hash."""
    if review.patch_path is None:
        raise ReviewRefused(
            f"run {review.run_id}'s review is {review.state.value}; its patch is gone",
            code=f"already_{review.state.value}",
        )
    try:
        data = Path(review.patch_path).read_bytes()
    except OSError as exc:
        raise ReviewRefused(
            f"the patch of run {review.run_id} cannot be read ({exc.strerror}); discard the"
            " review and run the task again",
            code="patch_changed",
        ) from None
    if hashlib.sha256(data).hexdigest() != review.patch_sha256:
        raise ReviewRefused(
            f"the patch file {review.patch_path} changed since it was staged; nothing lands:"
            " discard the review and run the task again",
            code="patch_changed",
        )
    return data


# ---------------------------------------------------------------------------------------------
# Deciding


def pending_review(store: RunStore, run_id: str) -> ReviewRecord:
    """Run ``run_id``'s review, refused unless it exists and is still pending."""
    review = store.get_review(run_id)
    if review is None:
        raise ReviewRefused(
            f"run {run_id} has no review; only a run that changed files leaves one"
            f" (`asup runs show {run_id}`)",
            code="no_review",
        )
    return _still_pending(review)


def _still_pending(review: ReviewRecord) -> ReviewRecord:
    if review.state is ReviewState.APPLIED:
        raise ReviewRefused(
            f"run {review.run_id} was applied already, to branch {review.branch}; a run lands once",
            code="already_applied",
        )
    if review.state is ReviewState.DISCARDED:
        raise ReviewRefused(
            f"run {review.run_id}'s change was discarded; run the task again for a new one",
            code="already_discarded",
        )
    return review


def _lost(store: RunStore, run_id: str) -> ReviewRefused:
    """The refusal for a decision another process made first."""
    review = store.get_review(run_id)
    assert review is not None
    try:
        _still_pending(review)
    except ReviewRefused as exc:
        return exc
    return ReviewRefused(f"run {run_id}'s review could not be decided; retry", code="review")


def apply_review(
    repo: pygit2.Repository,
    store: RunStore,
    run_id: str,
    *,
    typed_digits: str,
    allow_flagged: bool,
) -> Applied:
    """Land run ``run_id``'s pending review as branch ``external/<run id>`` with exactly one
    commit, whose parent is the base commit, built in the object database alone. Refused, with
    nothing changed, unless ``typed_digits`` are the first 12 hex digits of the patch hash."""
    review = pending_review(store, run_id)
    if typed_digits.strip().lower() != review.patch_sha256[:DIGITS]:
        raise ReviewRefused(
            f"the digits typed are not the first {DIGITS} of run {run_id}'s patch hash; nothing"
            f" was applied: look at `asup review {run_id}` and type the digits it shows",
            code="wrong_digits",
        )
    if review.flagged and not allow_flagged:
        raise ReviewRefused(
            f"run {run_id}'s change is flagged ({'; '.join(review.flag_reasons)}); nothing was"
            " applied: read the diff, and apply with --allow-flagged if it is what you want",
            code="flagged",
        )
    branch = BRANCH_PREFIX + run_id
    ref_name = f"refs/heads/{branch}"
    if ref_name in repo.references:
        raise _branch_exists(branch)
    base = _commit(repo, review.base_commit)
    if base is None:
        raise ReviewRefused(
            f"the base commit {review.base_commit} of run {run_id} is not in the repository at"
            f" {repo.workdir or repo.path}; apply in the repository the run was made in",
            code="base_missing",
        )
    tree_id = _apply_to_tree(repo, base, read_patch(review), run_id)
    run = store.get(run_id)
    agent = run.agent if run is not None else "an agent"
    author = pygit2.Signature(IDENTITY_NAME, IDENTITY_EMAIL)
    commit_id = repo.create_commit(
        None,
        author,
        _committer(repo, author),
        f"{agent} run {run_id}\n\n"
        "The change of a supervised agent run, applied after review.\n\n"
        f"Run: {run_id}\nAgent: {agent}\nPatch-SHA256: {review.patch_sha256}\n",
        tree_id,
        [base.id],
    )

    def create_branch() -> None:
        repo.references.create(ref_name, commit_id)

    try:
        decided = store.decide_review(
            run_id, ReviewState.APPLIED, branch=branch, effect=create_branch
        )
    except pygit2.AlreadyExistsError:
        raise _branch_exists(branch) from None
    except StoreError:
        # The branch may exist while the review stayed pending: take it back.
        with contextlib.suppress(pygit2.GitError, KeyError):
            ref = repo.references.get(ref_name)
            if ref is not None and ref.target == commit_id and _is_pending(store, run_id):
                ref.delete()
        raise
    if decided is None:
        raise _lost(store, run_id)
    return Applied(
        run_id=run_id,
        branch=branch,
        commit=str(commit_id),
        base_commit=str(base.id),
        notes=_head_notes(repo, base),
    )


def _is_pending(store: RunStore, run_id: str) -> bool:
    review = store.get_review(run_id)
    return review is not None and review.state is ReviewState.PENDING


def _branch_exists(branch: str) -> ReviewRefused:
    return ReviewRefused(
        f"a branch {branch} exists already; nothing was applied: rename or delete it"
        f" (`git branch -m {branch} <new name>`) and apply again",
        code="branch_exists",
    )


def _committer(repo: pygit2.Repository, fallback: pygit2.Signature) -> pygit2.Signature:
    """The person who confirmed: user.name and user.email from the repository's config."""
    try:
        return repo.default_signature
    except (KeyError, pygit2.GitError):
        return fallback


def _head_notes(repo: pygit2.Repository, base: pygit2.Commit) -> tuple[str, ...]:
    if repo.head_is_unborn:
        return ()
    head = repo.head.peel(pygit2.Commit)
    if head.id == base.id:
        return ()
    where = repo.head.shorthand if not repo.head_is_detached else "HEAD"
    ahead, _ = repo.ahead_behind(head.id, base.id)
    return (
        f"{where} has moved on since the run (it is {ahead} commit(s) past the base);"
        f" the branch is cut from the run's base commit {str(base.id)[:12]}: merge or rebase it",
    )


def _apply_to_tree(
    repo: pygit2.Repository, base: pygit2.Commit, patch: bytes, run_id: str
) -> pygit2.Oid:
    """The tree of ``base`` with ``patch`` applied, written to ``repo``'s object database.

    pygit2 applies a patch only to a repository's own index or working tree. So it is applied to
    the index of a scratch bare repository that borrows ``repo``'s objects (alternates); the
    new blobs and trees are then copied into ``repo``. The user's index is never opened."""
    objects = Path(repo.path) / "objects"
    commondir = Path(repo.path) / "commondir"
    if commondir.is_file():
        objects = (Path(repo.path) / commondir.read_text().strip() / "objects").resolve()
    with tempfile.TemporaryDirectory(prefix="asup-apply-") as scratch_dir:
        scratch = pygit2.init_repository(scratch_dir, bare=True)
        (Path(scratch_dir) / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        scratch = pygit2.Repository(scratch_dir)
        try:
            index = scratch.index
            index.read_tree(base.tree)
            index.write()
            scratch.apply(pygit2.Diff.parse_diff(patch), ApplyLocation.INDEX)
            index = scratch.index
            index.read()
            tree_id: pygit2.Oid = index.write_tree()
        except pygit2.GitError as exc:
            raise ReviewRefused(
                f"run {run_id}'s patch does not apply to its base commit {str(base.id)[:12]}"
                f" ({exc}); nothing was applied",
                code="does_not_apply",
            ) from None
        _copy_missing(scratch, repo, tree_id)
        scratch.free()
    return tree_id


def _copy_missing(src: pygit2.Repository, dst: pygit2.Repository, oid: pygit2.Oid) -> None:
    if oid in dst:
        return
    kind, data = src.odb.read(oid)
    if kind == ObjectType.TREE:
        tree = src[oid]
        assert isinstance(tree, pygit2.Tree)
        for entry in tree:
            if entry.filemode != FileMode.COMMIT:
                _copy_missing(src, dst, entry.id)
    dst.odb.write(kind, data)


def discard_review(store: RunStore, run_id: str) -> ReviewRecord:
    """``pending`` → ``discarded``; the patch file is removed. Refused unless pending."""
    review = pending_review(store, run_id)
    decided = store.decide_review(run_id, ReviewState.DISCARDED)
    if decided is None:
        raise _lost(store, run_id)
    if review.patch_path is not None:
        Path(review.patch_path).unlink(missing_ok=True)
    return decided
