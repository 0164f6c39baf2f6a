"""Disposable git worktrees for child agents, and the user's uncommitted work as a diff.

A child agent never runs in the user's working tree. :func:`create_worktree` checks out the
user's ``HEAD`` commit into a new linked worktree with a **detached** HEAD, outside the
repository, under ``<state dir>/worktrees/<run id>/checkout``; :func:`remove_worktree` deletes
it and its admin entry again. :func:`disposable_worktree` (and its async twin) pairs the two so
the worktree goes on every way out of the ``with`` block. Everything git is done with pygit2.

libgit2 only adds a worktree on a branch. The branch is temporary: named ``asup-tmp-<run id>``,
it is created at the base commit, the new worktree's HEAD is detached onto that commit, and the
branch is deleted (with its reflog) before :func:`create_worktree` returns. No ref of the user's
is touched, and none of ours stays.

Layout on disk::

    <state dir>/worktrees/<run id>/owner.json    OwnerRecord, written before any git change
    <state dir>/worktrees/<run id>/checkout/     the worktree; its ``.git`` file points to ↓
    <repo>/.git/worktrees/asup-<run id>/         the admin dir: HEAD, index, gitdir, logs

``owner.json`` names the process that owns the worktree (pid and process create time) and is
deleted last, so a worktree whose owner was killed keeps the record that lets
:func:`reap_leftovers` remove it later. See docs/worktrees.md.

Errors (the tree is in :mod:`supervisor.errors`)::

    SupervisorError
    ├── Refusal
    │   └── RepositoryRefused   not a git repository, bare, no commits yet, unreadable
    └── WorktreeError           the worktree could not be created or removed
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import stat
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import psutil  # type: ignore[import-untyped, unused-ignore]
import pygit2
from pydantic import BaseModel, ConfigDict, ValidationError
from pygit2.enums import DeltaStatus, DiffOption

from supervisor import paths
from supervisor.errors import RepositoryRefused, SupervisorError
from supervisor.prompt import ChangeKind, DirtyDiff, FileDiff

__all__ = [
    "CHECKOUT_DIR",
    "OWNER_FILE",
    "RECORDLESS_GRACE_SECONDS",
    "OwnerRecord",
    "Reaped",
    "Worktree",
    "WorktreeError",
    "create_worktree",
    "dirty_diff",
    "disposable_worktree",
    "disposable_worktree_async",
    "open_repository",
    "reap_leftovers",
    "remove_worktree",
    "sanitized_git_config",
    "worktrees_root",
]

OWNER_FILE = "owner.json"
CHECKOUT_DIR = "checkout"
# A run dir without a record can only come from a crash between its mkdir and the record's
# rename (nothing of git exists yet); the reaper leaves such a dir alone for this long.
RECORDLESS_GRACE_SECONDS = 60.0
# Process create times are compared with this tolerance: a clock step must not make a live
# owner look dead, while a pid recycled within a second is practically impossible.
_CREATE_TIME_TOLERANCE = 1.0
_REMOVAL_ATTEMPTS = 3
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class WorktreeError(SupervisorError):
    """A worktree could not be created or removed; the message names the path and the cause."""


class OwnerRecord(BaseModel):
    """``owner.json``: who owns a worktree, and everything needed to remove it without them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    run_id: str
    pid: int
    create_time: float  # psutil.Process(pid).create_time() of the owner
    host: str  # the reaper judges only owners on its own host
    common_dir: str  # the repository's .git directory
    worktree_name: str
    checkout: str
    temp_branch: str
    base_commit: str


@dataclass(frozen=True, slots=True)
class Worktree:
    """One disposable worktree. Every path is absolute with symlinks resolved."""

    run_id: str
    name: str  # git's name for it: ``git worktree list`` shows it, the admin dir bears it
    path: Path  # the checkout, the agent's working directory
    base_commit: str  # hex id of the commit checked out, detached
    repo_root: Path  # the user's working tree
    common_dir: Path  # the user's .git directory: objects, refs, config
    admin_dir: Path  # <common_dir>/worktrees/<name>: this worktree's HEAD, index, logs
    object_dirs: tuple[Path, ...]  # <common_dir>/objects, then its alternates
    run_dir: Path  # <state dir>/worktrees/<run id>: owner.json and the checkout
    owner: OwnerRecord  # what owner.json says

    @property
    def git_file(self) -> Path:
        """The checkout's ``.git`` file; it holds the absolute path of :attr:`admin_dir`."""
        return self.path / ".git"

    def git_paths(self) -> tuple[Path, ...]:
        """The host paths outside the checkout that git needs to work in it, at the same
        absolute paths (the ``.git`` file and the admin dir name each other absolutely):
        the admin dir, ``refs`` (git refuses a git dir without it), ``packed-refs`` and
        ``reftable`` when present, and the object dirs. Read-only is enough for status, diff,
        log and show. Not the repository's ``config``: it may hold credentials (a token in a
        remote URL, an auth header); git gets :meth:`write_git_config`'s copy instead."""
        candidates = (
            self.admin_dir,
            self.common_dir / "refs",
            self.common_dir / "packed-refs",
            self.common_dir / "reftable",
            *self.object_dirs,
        )
        return tuple(p for p in candidates if p.exists())

    def write_git_config(self, dest: Path) -> Path:
        """Write the part of the repository's ``config`` git needs to read this repository
        (:func:`sanitized_git_config`) to ``dest``, and return it."""
        try:
            config = pygit2.Config(str(self.common_dir / "config"))
            entries = [(entry.name, entry.value) for entry in config]
        except (pygit2.GitError, OSError) as exc:
            raise WorktreeError(
                f"cannot read {self.common_dir / 'config'} ({exc}); check that the "
                "repository's config is readable and valid"
            ) from exc
        dest.write_text(sanitized_git_config(entries), encoding="utf-8")
        return dest


# Settings that say how to read the repository, and nothing else: no remote, no URL, no
# credential helper, no hook path, no alias, no include.
_GIT_CONFIG_KEPT = frozenset(
    {
        "core.repositoryformatversion",
        "core.bare",
        "core.filemode",
        "core.symlinks",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.autocrlf",
        "core.eol",
    }
)
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9._-]{1,64}")


def sanitized_git_config(entries: Iterable[tuple[str, str | None]]) -> str:
    """A git config text holding only the ``core`` settings of :data:`_GIT_CONFIG_KEPT` and
    every ``extensions.*`` (the object format, ref storage, worktree config: git refuses a
    repository whose extensions it cannot see), each with a plain value; everything else — the
    remotes and their URLs, credential helpers, ``http.*`` headers, ``core.hooksPath``,
    ``core.fsmonitor``, aliases, includes — is left out. The last value of a key wins, as in
    git."""
    kept: dict[str, dict[str, str]] = {}
    for name, value in entries:
        lowered = name.lower()
        section, _, key = lowered.partition(".")
        if value is None or not _PLAIN_VALUE.fullmatch(value) or "." in key:
            continue
        if lowered in _GIT_CONFIG_KEPT or section == "extensions":
            kept.setdefault(section, {})[key] = value
    lines = ["# written by agent-supervisor: how to read this repository, nothing more"]
    for section in sorted(kept, key=lambda s: (s != "core", s)):
        lines.append(f"[{section}]")
        lines.extend(f"\t{key} = {value}" for key, value in kept[section].items())
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Reaped:
    """A leftover worktree whose owner is gone. ``error`` says why removing it failed (it stays
    and is tried again next time); None when it was removed."""

    run_dir: Path
    owner: OwnerRecord | None
    error: str | None = None


# ---------------------------------------------------------------------------------------------
# The user's repository


def open_repository(path: str | os.PathLike[str]) -> pygit2.Repository:
    """The git repository that contains ``path``, refused unless a worktree can be made of it."""
    where = Path(path).absolute()
    if not where.is_dir():
        raise RepositoryRefused(
            f"{where} is not a directory; run asup from a directory inside your git repository"
        )
    try:
        found = pygit2.discover_repository(str(where))
    except pygit2.GitError as exc:
        raise _unreadable(where, exc) from exc
    if found is None:
        raise RepositoryRefused(
            f"{where} is not inside a git repository; run asup in a git checkout"
            " (or create one with `git init` and commit your files)"
        )
    try:
        repo = pygit2.Repository(found)
    except pygit2.GitError as exc:
        raise _unreadable(Path(found), exc) from exc
    if repo.is_bare:
        raise RepositoryRefused(
            f"{found} is a bare repository, which has no working tree to start from; run asup"
            " in a clone with a working tree (`git clone <that path>`)"
        )
    if repo.head_is_unborn:
        raise RepositoryRefused(
            f"the repository at {repo.workdir} has no commits yet, so there is no HEAD to check"
            " out; commit once (`git add -A && git commit`) and run asup again"
        )
    return repo


def _unreadable(where: Path, exc: Exception) -> RepositoryRefused:
    return RepositoryRefused(
        f"git cannot open the repository at {where} ({exc}); check that it is yours and"
        " readable, and if it belongs to another user mark it safe with"
        f" `git config --global --add safe.directory {where}`"
    )


def dirty_diff(repo: pygit2.Repository) -> DirtyDiff:
    """The user's uncommitted work as one diff against HEAD: staged and unstaged changes and
    untracked files that are not ignored (as additions). Binary files are named, not shown.
    Reads only: the index and the working tree are left as they are."""
    head = repo.head.peel(pygit2.Commit)
    flags = (
        DiffOption.INCLUDE_UNTRACKED
        | DiffOption.RECURSE_UNTRACKED_DIRS
        | DiffOption.SHOW_UNTRACKED_CONTENT
        | DiffOption.INCLUDE_TYPECHANGE
    )
    # HEAD → index, then index → working tree, merged: what `git diff HEAD` shows, plus the
    # untracked files.
    diff = head.tree.diff_to_index(repo.index, flags)
    diff.merge(repo.index.diff_to_workdir(flags))
    files = []
    for patch in diff:
        if patch is None:
            continue
        delta = patch.delta
        kind = _KINDS.get(delta.status, ChangeKind.MODIFIED)
        path = delta.old_file.path if kind is ChangeKind.DELETED else delta.new_file.path
        files.append(
            FileDiff(
                path=path,
                kind=kind,
                binary=bool(delta.is_binary),
                patch=patch.data.decode("utf-8", errors="replace"),
            )
        )
    return DirtyDiff(base_commit=str(head.id), files=tuple(files))


_KINDS = {
    DeltaStatus.ADDED: ChangeKind.ADDED,
    DeltaStatus.COPIED: ChangeKind.ADDED,
    DeltaStatus.UNTRACKED: ChangeKind.UNTRACKED,
    DeltaStatus.MODIFIED: ChangeKind.MODIFIED,
    DeltaStatus.DELETED: ChangeKind.DELETED,
    DeltaStatus.RENAMED: ChangeKind.RENAMED,
    DeltaStatus.TYPECHANGE: ChangeKind.TYPE_CHANGED,
}


# ---------------------------------------------------------------------------------------------
# Creating and removing a worktree


def worktrees_root(state_dir: Path | None = None) -> Path:
    """``<state dir>/worktrees``; the state dir defaults to :func:`supervisor.paths.state_dir`."""
    return (paths.state_dir() if state_dir is None else state_dir) / "worktrees"


def create_worktree(
    repo: pygit2.Repository, *, run_id: str, state_dir: Path | None = None
) -> Worktree:
    """Check out ``repo``'s HEAD commit, detached, into a new worktree for run ``run_id``.

    ``run_id`` is 1-64 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit,
    and unique among live runs. On any failure (and on KeyboardInterrupt) whatever was made is
    removed again before the exception propagates.
    """
    if not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run_id {run_id!r} must match {_RUN_ID.pattern}")
    if repo.workdir is None:
        raise RepositoryRefused(
            f"{repo.path} is a bare repository, which has no working tree to start from;"
            " run asup in a clone with a working tree"
        )
    common_dir = _common_dir(repo)
    name = f"asup-{run_id}"
    branch = f"asup-tmp-{run_id}"
    admin_dir = common_dir / "worktrees" / name
    if admin_dir.exists() or repo.branches.local.get(branch) is not None:
        raise WorktreeError(
            f"the repository at {repo.workdir} already has a worktree {name} or a branch"
            f" {branch}; run with a new run id, or remove them with `git worktree remove {name}`"
            f" and `git branch -D {branch}`"
        )
    base = repo.head.peel(pygit2.Commit)

    root = worktrees_root(state_dir)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    run_dir = root.resolve() / run_id
    try:
        run_dir.mkdir(mode=0o700)
    except FileExistsError:
        raise WorktreeError(
            f"{run_dir} already exists; run with a new run id, or let `reap_leftovers` remove it"
            " once its owner is gone"
        ) from None
    checkout = run_dir / CHECKOUT_DIR
    me = psutil.Process()
    record = OwnerRecord(
        run_id=run_id,
        pid=me.pid,
        create_time=me.create_time(),
        host=socket.gethostname(),
        common_dir=str(common_dir),
        worktree_name=name,
        checkout=str(checkout),
        temp_branch=branch,
        base_commit=str(base.id),
    )
    worktree = Worktree(
        run_id=run_id,
        name=name,
        path=checkout,
        base_commit=str(base.id),
        repo_root=Path(repo.workdir).resolve(),
        common_dir=common_dir,
        admin_dir=admin_dir,
        object_dirs=_object_dirs(common_dir / "objects"),
        run_dir=run_dir,
        owner=record,
    )
    try:
        _write_record(run_dir / OWNER_FILE, record)
        _add_detached(repo, record, base)
    except BaseException as exc:
        try:
            _remove_despite_interrupts(record, run_dir)
        except WorktreeError as cleanup:
            exc.add_note(str(cleanup))
        if isinstance(exc, pygit2.GitError | OSError | ValueError):
            raise WorktreeError(
                f"git could not create a worktree of {repo.workdir} at {checkout} ({exc});"
                " check that the state dir is writable and the repository is healthy"
            ) from exc
        raise
    return worktree


def remove_worktree(worktree: Worktree) -> None:
    """Remove the checkout, the admin entry and the owner record. Idempotent and safe to call
    from a signal handler (e.g. SIGTERM's), also while another removal of the same worktree was
    interrupted. Raises :class:`WorktreeError` when something could not be removed; the owner
    record then stays, so :func:`reap_leftovers` retries once this process is gone.

    A KeyboardInterrupt or SystemExit raised inside the removal (a second Ctrl-C, a SIGTERM
    handler that exits) does not leave it half done: the removal starts over, up to
    three times, and the interruption is re-raised when it is complete."""
    _remove_despite_interrupts(worktree.owner, worktree.run_dir)


@contextlib.contextmanager
def disposable_worktree(
    repo: pygit2.Repository, *, run_id: str, state_dir: Path | None = None
) -> Iterator[Worktree]:
    """:func:`create_worktree` … :func:`remove_worktree`, on success, on any exception and on
    KeyboardInterrupt. SIGTERM kills Python without unwinding: turn it into an exception
    (``signal.signal(SIGTERM, lambda *_: sys.exit(143))``) or call :func:`remove_worktree`
    from the handler."""
    worktree = create_worktree(repo, run_id=run_id, state_dir=state_dir)
    try:
        yield worktree
    finally:
        remove_worktree(worktree)


@contextlib.asynccontextmanager
async def disposable_worktree_async(
    repo: pygit2.Repository, *, run_id: str, state_dir: Path | None = None
) -> AsyncIterator[Worktree]:
    """:func:`disposable_worktree` for async code: git work runs in a worker thread, creation
    and removal are shielded from cancellation so a cancelled run never leaks its worktree."""
    create = partial(create_worktree, repo, run_id=run_id, state_dir=state_dir)
    with anyio.CancelScope(shield=True):
        worktree = await anyio.to_thread.run_sync(create)
    try:
        yield worktree
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(remove_worktree, worktree)


def _add_detached(repo: pygit2.Repository, record: OwnerRecord, base: pygit2.Commit) -> None:
    ref = repo.branches.local.create(record.temp_branch, base)
    repo.add_worktree(record.worktree_name, record.checkout, ref)
    checkout_repo = pygit2.Repository(record.checkout)
    try:
        checkout_repo.set_head(base.id)
    finally:
        checkout_repo.free()
    repo.branches.local.delete(record.temp_branch)


def _remove_despite_interrupts(record: OwnerRecord, run_dir: Path) -> None:
    interrupted: KeyboardInterrupt | SystemExit | None = None
    for _ in range(_REMOVAL_ATTEMPTS):
        try:
            _remove(record, run_dir)
        except (KeyboardInterrupt, SystemExit) as exc:
            interrupted = interrupted or exc
            continue
        except WorktreeError as exc:
            if interrupted is None:
                raise
            interrupted.add_note(str(exc))
        break
    if interrupted is not None:
        raise interrupted


def _remove(record: OwnerRecord, run_dir: Path) -> None:
    """Undo :func:`create_worktree` step by step; every step tolerates that it was done."""
    failures: list[str] = []
    for step in (_remove_checkout, _prune, _delete_temp_branch):
        try:
            step(record)
        except (OSError, pygit2.GitError, ValueError) as exc:
            failures.append(str(exc))
    if failures:
        raise WorktreeError(
            f"the worktree of run {record.run_id} at {record.checkout} was not fully removed"
            f" ({'; '.join(failures)}); fix the cause, then remove {run_dir} and run"
            " `git worktree prune` in the repository"
        )
    (run_dir / OWNER_FILE).unlink(missing_ok=True)
    _rmtree(run_dir)


def _remove_checkout(record: OwnerRecord) -> None:
    _rmtree(Path(record.checkout))


def _prune(record: OwnerRecord) -> None:
    common_dir = Path(record.common_dir)
    admin_dir = common_dir / "worktrees" / record.worktree_name
    if not admin_dir.exists():
        return
    repo = pygit2.Repository(str(common_dir))
    try:
        if record.worktree_name in repo.list_worktrees():
            found = repo.lookup_worktree(record.worktree_name)
            if Path(found.path) == Path(record.checkout):
                found.prune(True)
            return
    finally:
        repo.free()
    # libgit2 lists only complete admin dirs; a half-made one (a failed or killed add) is not
    # a worktree to git either, and is removed here when nothing says it is someone else's.
    if _admin_dir_is_ours(admin_dir, record):
        _rmtree(admin_dir)


def _admin_dir_is_ours(admin_dir: Path, record: OwnerRecord) -> bool:
    try:
        gitdir = (admin_dir / "gitdir").read_text().strip()
    except FileNotFoundError:
        return True
    return Path(gitdir) == Path(record.checkout) / ".git"


def _delete_temp_branch(record: OwnerRecord) -> None:
    repo = pygit2.Repository(record.common_dir)
    try:
        ref = repo.branches.local.get(record.temp_branch)
        if ref is not None and str(ref.target) == record.base_commit and not ref.is_checked_out():
            ref.delete()
    finally:
        repo.free()


# ---------------------------------------------------------------------------------------------
# Crash recovery


def reap_leftovers(state_dir: Path | None = None) -> list[Reaped]:
    """Remove the worktrees whose owner process no longer lives; leave live owners' alone.

    An owner is alive when a process with its pid exists and was created when the record says
    (a recycled pid has another create time). Records from another host, and records that
    do not describe the run dir they sit in, are never judged.
    A run dir without a record is removed once it is older than
    :data:`RECORDLESS_GRACE_SECONDS` and holds nothing but a half-written record.
    """
    root = worktrees_root(state_dir)
    if not root.is_dir():
        return []
    reaped: list[Reaped] = []
    for run_dir in sorted(root.iterdir()):
        if run_dir.is_symlink() or not run_dir.is_dir():
            continue
        record = _read_record(run_dir / OWNER_FILE)
        if record is None:
            if _abandoned_before_record(run_dir):
                _rmtree(run_dir)
                reaped.append(Reaped(run_dir=run_dir, owner=None))
            continue
        if not _describes(record, run_dir) or _owner_alive(record):
            continue
        try:
            _remove_despite_interrupts(record, run_dir)
        except (WorktreeError, OSError) as exc:
            reaped.append(Reaped(run_dir=run_dir, owner=record, error=str(exc)))
        else:
            reaped.append(Reaped(run_dir=run_dir, owner=record))
    return reaped


def _describes(record: OwnerRecord, run_dir: Path) -> bool:
    """A record is followed only where it describes its own run dir: removal never reaches a
    path a copied or edited record points elsewhere."""
    return (
        record.run_id == run_dir.name
        and Path(record.checkout) == run_dir / CHECKOUT_DIR
        and record.worktree_name == f"asup-{record.run_id}"
        and record.temp_branch == f"asup-tmp-{record.run_id}"
    )


def _owner_alive(record: OwnerRecord) -> bool:
    if record.host != socket.gethostname():
        return True
    try:
        owner = psutil.Process(record.pid)
        created: float = owner.create_time()
        zombie: bool = owner.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists; whose it is cannot be told, so it is not ours to judge
    return not zombie and abs(created - record.create_time) <= _CREATE_TIME_TOLERANCE


def _abandoned_before_record(run_dir: Path) -> bool:
    try:
        entries = {p.name for p in run_dir.iterdir()}
        age = time.time() - run_dir.stat().st_mtime
    except FileNotFoundError:
        return False
    return entries <= {OWNER_FILE + ".tmp"} and age > RECORDLESS_GRACE_SECONDS


def _write_record(path: Path, record: OwnerRecord) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(record.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)


def _read_record(path: Path) -> OwnerRecord | None:
    try:
        return OwnerRecord.model_validate_json(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError, ValidationError):
        return None


# ---------------------------------------------------------------------------------------------
# Helpers


def _common_dir(repo: pygit2.Repository) -> Path:
    """The directory holding objects and refs; for a linked worktree not its own ``.git``."""
    git_dir = Path(repo.path)
    try:
        pointer = (git_dir / "commondir").read_text().strip()
    except FileNotFoundError:
        return git_dir.resolve()
    return (git_dir / pointer).resolve()


def _object_dirs(objects: Path, depth: int = 0) -> tuple[Path, ...]:
    """``objects`` and, recursively, the object dirs its ``info/alternates`` names."""
    found = [objects.resolve()]
    try:
        lines = (objects / "info" / "alternates").read_text().splitlines()
    except FileNotFoundError:
        return tuple(found)
    for line in lines:
        entry = line.strip()
        if not entry or entry.startswith("#") or depth >= 5:
            continue
        alternate = (objects / entry).resolve()
        if alternate.is_dir():
            found.extend(d for d in _object_dirs(alternate, depth + 1) if d not in found)
    return tuple(found)


def _rmtree(path: Path) -> None:
    """Remove a tree, also where the agent made directories read-only; gone already is fine."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    if not path.exists():
        return
    try:
        _rmtree_once(path)
    except PermissionError:
        _make_dirs_writable(path)
        _rmtree_once(path)


def _make_dirs_writable(top: Path) -> None:
    """chmod u+rwx every directory of ``top`` (never through a symlink)."""
    with contextlib.suppress(FileNotFoundError):
        os.chmod(top, os.stat(top).st_mode | stat.S_IRWXU)
    for parent, dirnames, _ in os.walk(top):
        for name in dirnames:
            child = os.path.join(parent, name)
            if not os.path.islink(child):
                with contextlib.suppress(FileNotFoundError):
                    os.chmod(child, os.stat(child).st_mode | stat.S_IRWXU)


if sys.version_info >= (3, 12):

    def _rmtree_once(path: Path) -> None:
        def skip_missing(func: Callable[..., Any], target: str, exc: BaseException) -> None:
            if not isinstance(exc, FileNotFoundError):
                raise exc

        shutil.rmtree(path, onexc=skip_missing)

else:

    def _rmtree_once(path: Path) -> None:
        def skip_missing(func: Callable[..., Any], target: str, exc_info: Any) -> None:
            if not isinstance(exc_info[1], FileNotFoundError):
                raise exc_info[1]

        shutil.rmtree(path, onerror=skip_missing)
