"""The run store: one SQLite file of run records, and one directory of transcripts per run.

::

    <state_dir>/runs.sqlite3        meta (schema version) and runs (one row per run)
    <state_dir>/runs/<run id>/
        stdout.jsonl                 the child's raw stdout, appended as it arrives
        events.jsonl                 the RunEvent stream, one JSON object a line
        stderr.txt                   the child's stderr (its bounded tail)

SQLite runs in WAL mode with a busy timeout, so several asup processes can share the store;
every write is one ``BEGIN IMMEDIATE`` transaction, and a state change is a single ``UPDATE``
guarded by the state it leaves. Each operation opens its own connection, so a store object may
be used from any thread.

A run is ``running`` from :meth:`RunStore.create_run` until :meth:`RunStore.finish_run` makes
it ``finished`` with its outcome. A run still ``running`` whose owner process (pid and creation
time, so a reused pid does not count) is gone was cut short by a crash, ``kill -9`` or a power
loss: :meth:`RunStore.recover_interrupted` marks it ``interrupted`` with an unknown outcome.
Nothing re-runs it; its transcript stays as far as it got.

A run may leave one review (``reviews``, schema version 2): the patch it staged for a person,
``pending`` until it is ``applied`` or ``discarded``, each exactly once (see docs/review.md).

The file records its schema version in ``meta``. An older file is migrated forward, step by
step, in one transaction; a file from a newer asup is refused and never rewritten.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

import psutil  # type: ignore[import-untyped, unused-ignore]  # no stubs unless types-psutil
from pydantic import BaseModel, ConfigDict

from supervisor.errors import StoreError
from supervisor.events import FailureKind, Outcome, OutcomeStatus, RunEvent, event_to_json
from supervisor.summary import RunSummary

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "ReviewRecord",
    "ReviewState",
    "RunRecord",
    "RunState",
    "RunStore",
    "new_run_id",
]

DB_NAME = "runs.sqlite3"
BUSY_TIMEOUT_S = 10.0
STDOUT_FILE = "stdout.jsonl"
EVENTS_FILE = "events.jsonl"
STDERR_FILE = "stderr.txt"


class RunState(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"


class RunRecord(BaseModel):
    """One row of ``runs``. ``outcome`` is None while running and when interrupted (unknown)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    agent: str
    vendor_version: str | None
    argv: tuple[str, ...]
    profile: str | None
    network: str | None
    worktree: str | None
    repo: str | None
    base_commit: str | None
    owner_pid: int
    owner_started: float
    state: RunState
    started_at: datetime
    finished_at: datetime | None
    outcome: OutcomeStatus | None
    failure_kind: FailureKind | None
    reason: str | None
    summary: dict[str, Any] | None


class ReviewState(StrEnum):
    PENDING = "pending"
    APPLIED = "applied"
    DISCARDED = "discarded"


class ReviewRecord(BaseModel):
    """One row of ``reviews``: a run's staged patch and what became of it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    state: ReviewState
    base_commit: str
    patch_sha256: str
    patch_path: str | None  # None once the patch file is gone (discarded)
    flagged: bool
    flag_reasons: tuple[str, ...]
    stats: dict[str, int]
    created_at: datetime
    decided_at: datetime | None
    branch: str | None


def _v1(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        """
        CREATE TABLE runs (
            id             TEXT PRIMARY KEY,
            agent          TEXT NOT NULL,
            vendor_version TEXT,
            argv           TEXT NOT NULL,
            profile        TEXT,
            network        TEXT,
            worktree       TEXT,
            repo           TEXT,
            base_commit    TEXT,
            owner_pid      INTEGER NOT NULL,
            owner_started  REAL NOT NULL,
            state          TEXT NOT NULL
                           CHECK (state IN ('running', 'finished', 'interrupted')),
            started_at     TEXT NOT NULL,
            finished_at    TEXT,
            outcome        TEXT,
            failure_kind   TEXT,
            reason         TEXT,
            summary        TEXT
        )
        """
    )
    db.execute("CREATE INDEX runs_started ON runs (started_at)")
    db.execute("CREATE INDEX runs_state ON runs (state)")


def _v2(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE reviews (
            run_id       TEXT PRIMARY KEY REFERENCES runs (id),
            state        TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'discarded')),
            base_commit  TEXT NOT NULL,
            patch_sha256 TEXT NOT NULL,
            patch_path   TEXT,
            flagged      INTEGER NOT NULL,
            flag_reasons TEXT NOT NULL,
            stats        TEXT NOT NULL,
            created_at   TEXT NOT NULL,
            decided_at   TEXT,
            branch       TEXT
        )
        """
    )


# Step n takes a file at version n - 1 to version n. Version 0 is an empty file.
_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1, 2: _v2}
SCHEMA_VERSION = 2


def new_run_id(now: datetime | None = None) -> str:
    """``20261202-161800-ab12cd``: UTC time to the second, then 24 random bits. Sorts by time."""
    now = now or datetime.now(UTC)
    return f"{now.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _owner_started(pid: int) -> float:
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error as exc:
        raise StoreError(
            f"the owner process {pid} of a new run does not exist; pass the pid of a live process"
        ) from exc


def _owner_alive(pid: int, started: float) -> bool:
    try:
        p = psutil.Process(pid)
        return bool(abs(p.create_time() - started) < 0.01 and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


_COLUMNS = (
    "id, agent, vendor_version, argv, profile, network, worktree, repo, base_commit, owner_pid, "
    "owner_started, state, started_at, finished_at, outcome, failure_kind, reason, summary"
)


_REVIEW_COLUMNS = (
    "run_id, state, base_commit, patch_sha256, patch_path, flagged, flag_reasons, stats, "
    "created_at, decided_at, branch"
)


def _review(row: sqlite3.Row) -> ReviewRecord:
    values = dict(row)
    values["flagged"] = bool(values["flagged"])
    values["flag_reasons"] = tuple(json.loads(values["flag_reasons"]))
    values["stats"] = json.loads(values["stats"])
    return ReviewRecord.model_validate(values)


def _record(row: sqlite3.Row) -> RunRecord:
    values = dict(row)
    values["argv"] = tuple(json.loads(values["argv"]))
    values["summary"] = json.loads(values["summary"]) if values["summary"] else None
    return RunRecord.model_validate(values)


class RunStore:
    """The run store under ``state_dir`` (created if missing). Opening checks the schema:
    a newer file raises :class:`StoreError`, an older one is migrated."""

    def __init__(self, state_dir: Path | str) -> None:
        self.state_dir = Path(state_dir)
        self.db_path = self.state_dir / DB_NAME
        self.runs_dir = self.state_dir / "runs"
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(
                f"cannot create the run store directory {self.runs_dir}: {exc.strerror}; "
                "make its parent writable or point the state directory elsewhere"
            ) from exc
        self._files: dict[tuple[str, str], IO[bytes]] = {}
        self._closed_runs: set[str] = set()
        self._lock = threading.Lock()
        self._open_schema()

    # -- database plumbing ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection that maps every sqlite3 error to a StoreError naming the file."""
        try:
            db = sqlite3.connect(self.db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._mapped(exc) from exc
        try:
            db.row_factory = sqlite3.Row
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            db.execute("PRAGMA synchronous = NORMAL")
            yield db
        except sqlite3.Error as exc:
            raise self._mapped(exc) from exc
        finally:
            db.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``): all or nothing."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _mapped(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StoreError(
                f"the run store {self.db_path} stayed locked for {BUSY_TIMEOUT_S:g} s; another "
                "asup process is holding it, so retry once it is done"
            )
        return StoreError(
            f"the run store {self.db_path} cannot be used ({text}); move the file aside and "
            "asup starts a new one"
        )

    def _version(self, db: sqlite3.Connection) -> int:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:
            if tables:
                raise StoreError(
                    f"{self.db_path} is an SQLite file but not an asup run store; move it aside "
                    "and asup starts a new one"
                )
            return 0
        rows = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        try:
            return int(rows[0][0])
        except (IndexError, TypeError, ValueError):
            raise StoreError(
                f"the run store {self.db_path} records no valid schema version; move it aside "
                "and asup starts a new one"
            ) from None

    def _open_schema(self) -> None:
        with self._db() as db:
            self._refuse_newer(self._version(db))  # before anything writes to the file
            self._use_wal(db)
        with self._write() as db:
            version = self._version(db)  # again: another process may have migrated meanwhile
            self._refuse_newer(version)
            if version < SCHEMA_VERSION:
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    _MIGRATIONS[step](db)
                db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )

    @staticmethod
    def _use_wal(db: sqlite3.Connection) -> None:
        """Switch the file to WAL (it stays so). The switch answers "locked" at once, without
        the busy timeout, while another process opens the file: retry it within the timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                db.execute("PRAGMA journal_mode = WAL").fetchall()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.02)

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the run store {self.db_path} has schema version {version}, newer than the "
                f"{SCHEMA_VERSION} this asup understands; upgrade asup to read it (it is never "
                "rewritten by an older version)"
            )

    # -- runs -----------------------------------------------------------------------------------

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def create_run(
        self,
        *,
        agent: str,
        argv: Sequence[str],
        vendor_version: str | None = None,
        profile: str | None = None,
        network: str | None = None,
        worktree: Path | str | None = None,
        repo: Path | str | None = None,
        base_commit: str | None = None,
        owner_pid: int | None = None,
    ) -> RunRecord:
        """Record a new ``running`` run owned by ``owner_pid`` (this process by default) and
        make its directory with empty transcript files."""
        pid = os.getpid() if owner_pid is None else owner_pid
        owner_started = _owner_started(pid)
        for _ in range(5):
            run_id = new_run_id()
            try:
                self.run_dir(run_id).mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        else:
            raise StoreError(f"could not find a free run id under {self.runs_dir}")
        folder = self.run_dir(run_id)
        for name in (STDOUT_FILE, EVENTS_FILE, STDERR_FILE):
            (folder / name).touch()
        row = (
            run_id,
            agent,
            vendor_version,
            json.dumps(list(argv)),
            profile,
            network,
            None if worktree is None else str(worktree),
            None if repo is None else str(repo),
            base_commit,
            pid,
            owner_started,
            RunState.RUNNING.value,
            _now(),
        )
        try:
            with self._write() as db:
                db.execute(
                    "INSERT INTO runs (id, agent, vendor_version, argv, profile, network, "
                    "worktree, repo, base_commit, owner_pid, owner_started, state, started_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
        except BaseException:
            for name in (STDOUT_FILE, EVENTS_FILE, STDERR_FILE):
                (folder / name).unlink(missing_ok=True)
            folder.rmdir()
            raise
        record = self.get(run_id)
        assert record is not None
        return record

    def set_launch(
        self, run_id: str, *, argv: Sequence[str], worktree: Path | str | None = None
    ) -> None:
        """Record what a ``running`` run actually launched (known only once the sandbox and the
        worktree exist): the full argv and the worktree path."""
        with self._write() as db:
            changed = db.execute(
                "UPDATE runs SET argv = ?, worktree = ? WHERE id = ? AND state = ?",
                (
                    json.dumps(list(argv)),
                    None if worktree is None else str(worktree),
                    run_id,
                    RunState.RUNNING.value,
                ),
            ).rowcount
            if not changed:
                raise StoreError(f"no running run {run_id} in {self.db_path}")

    def _append(self, run_id: str, name: str, data: bytes) -> None:
        with self._lock:
            if run_id in self._closed_runs:
                raise StoreError(f"run {run_id} is finished; its transcript takes no more data")
            handle = self._files.get((run_id, name))
            if handle is None:
                path = self.run_dir(run_id) / name
                if not path.parent.is_dir():
                    raise StoreError(f"no run {run_id} in {self.runs_dir}")
                handle = self._files[(run_id, name)] = path.open("ab")
            handle.write(data)
            handle.flush()  # in the OS as it arrives: a crash of ours loses nothing written

    def append_stdout(self, run_id: str, data: bytes) -> None:
        """Append a chunk of the child's raw stdout, exactly as it came."""
        self._append(run_id, STDOUT_FILE, data)

    def append_event(self, run_id: str, event: RunEvent) -> None:
        self._append(run_id, EVENTS_FILE, event_to_json(event).encode() + b"\n")

    def append_stderr(self, run_id: str, data: bytes | str) -> None:
        self._append(run_id, STDERR_FILE, data.encode() if isinstance(data, str) else data)

    def _close_files(self, run_id: str) -> None:
        with self._lock:
            self._closed_runs.add(run_id)
            for key in [k for k in self._files if k[0] == run_id]:
                self._files.pop(key).close()

    def finish_run(
        self,
        run_id: str,
        outcome: Outcome,
        summary: RunSummary | Mapping[str, Any] | None = None,
    ) -> RunRecord:
        """``running`` → ``finished`` with the outcome and summary, in one transaction."""
        body = summary.to_dict() if isinstance(summary, RunSummary) else summary
        with self._write() as db:
            changed = db.execute(
                "UPDATE runs SET state = ?, finished_at = ?, outcome = ?, failure_kind = ?, "
                "reason = ?, summary = ? WHERE id = ? AND state = ?",
                (
                    RunState.FINISHED.value,
                    _now(),
                    outcome.status.value,
                    None if outcome.failure_kind is None else outcome.failure_kind.value,
                    outcome.reason or None,
                    None if body is None else json.dumps(dict(body), ensure_ascii=False),
                    run_id,
                    RunState.RUNNING.value,
                ),
            ).rowcount
            if not changed:
                row = db.execute("SELECT state FROM runs WHERE id = ?", (run_id,)).fetchone()
                if row is None:
                    raise StoreError(f"no run {run_id} in {self.db_path}")
                self._close_files(run_id)
                raise StoreError(f"run {run_id} is already {row[0]}; a run finishes only once")
        self._close_files(run_id)
        record = self.get(run_id)
        assert record is not None
        return record

    def get(self, run_id: str) -> RunRecord | None:
        with self._db() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else _record(row)

    def list(self, limit: int = 20) -> builtins.list[RunRecord]:
        """The newest ``limit`` runs, newest first."""
        with self._db() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM runs ORDER BY started_at DESC, id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [_record(r) for r in rows]

    def recover_interrupted(self) -> builtins.list[RunRecord]:
        """Mark ``interrupted`` every ``running`` run whose owner process is gone (outcome
        unknown; never re-run). Returns those runs, in one transaction."""
        with self._write() as db:
            rows = db.execute(
                "SELECT id, owner_pid, owner_started FROM runs WHERE state = ?",
                (RunState.RUNNING.value,),
            ).fetchall()
            dead = [r for r in rows if not _owner_alive(r["owner_pid"], r["owner_started"])]
            for r in dead:
                db.execute(
                    "UPDATE runs SET state = ?, outcome = NULL, reason = ? "
                    "WHERE id = ? AND state = ?",
                    (
                        RunState.INTERRUPTED.value,
                        f"the supervisor (pid {r['owner_pid']}) ended without finishing the "
                        "run, so its outcome is unknown",
                        r["id"],
                        RunState.RUNNING.value,
                    ),
                )
        found = [self.get(r["id"]) for r in dead]
        return [r for r in found if r is not None]

    # -- reviews --------------------------------------------------------------------------------

    def add_review(
        self,
        *,
        run_id: str,
        base_commit: str,
        patch_sha256: str,
        patch_path: Path | str,
        flagged: bool,
        flag_reasons: Sequence[str],
        stats: Mapping[str, int],
        effect: Callable[[], None] | None = None,
    ) -> ReviewRecord:
        """Record run ``run_id``'s review as ``pending``. ``effect`` runs inside the transaction,
        after the insert: when it raises, nothing is recorded. A run has at most one review;
        a second one, or one for an unknown run, is a :class:`StoreError`."""
        with self._write() as db:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise StoreError(f"no run {run_id} in {self.db_path}")
            if db.execute("SELECT 1 FROM reviews WHERE run_id = ?", (run_id,)).fetchone():
                raise StoreError(f"run {run_id} has a review already; a run is reviewed once")
            db.execute(
                f"INSERT INTO reviews ({_REVIEW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    ReviewState.PENDING.value,
                    base_commit,
                    patch_sha256,
                    str(patch_path),
                    int(flagged),
                    json.dumps(list(flag_reasons), ensure_ascii=False),
                    json.dumps(dict(stats)),
                    _now(),
                    None,
                    None,
                ),
            )
            if effect is not None:
                effect()
        review = self.get_review(run_id)
        assert review is not None
        return review

    def get_review(self, run_id: str) -> ReviewRecord | None:
        with self._db() as db:
            row = db.execute(
                f"SELECT {_REVIEW_COLUMNS} FROM reviews WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if row is None else _review(row)

    def decide_review(
        self,
        run_id: str,
        state: ReviewState,
        *,
        branch: str | None = None,
        effect: Callable[[], None] | None = None,
    ) -> ReviewRecord | None:
        """``pending`` → ``state`` (applied or discarded) in one transaction: a single ``UPDATE``
        guarded by ``state = 'pending'``, so of two deciders exactly one wins. ``effect`` runs
        inside the transaction once the update won: when it raises, the review stays pending.
        Returns the decided review, or None when it was not pending (the caller reads why)."""
        if state is ReviewState.PENDING:
            raise ValueError("a review is decided as applied or discarded")
        with self._write() as db:
            changed = db.execute(
                "UPDATE reviews SET state = ?, decided_at = ?, branch = ?, "
                "patch_path = CASE WHEN ? THEN NULL ELSE patch_path END "
                "WHERE run_id = ? AND state = ?",
                (
                    state.value,
                    _now(),
                    branch,
                    int(state is ReviewState.DISCARDED),
                    run_id,
                    ReviewState.PENDING.value,
                ),
            ).rowcount
            if changed and effect is not None:
                effect()
        return self.get_review(run_id) if changed else None

    def close(self) -> None:
        """Close the transcript files this store holds open."""
        with self._lock:
            for handle in self._files.values():
                handle.close()
            self._files.clear()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
