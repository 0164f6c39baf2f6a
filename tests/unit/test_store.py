"""The run store: round trip, two writers at once, schema versions, interrupted runs."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import supervisor.store as store_module
from supervisor.errors import StoreError
from supervisor.events import (
    FailureKind,
    MessageEmitted,
    Outcome,
    OutcomeStatus,
    RunFinished,
    RunStarted,
    event_to_json,
)
from supervisor.store import SCHEMA_VERSION, RunState, RunStore, new_run_id

RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")


def test_round_trip(tmp_path: Path) -> None:
    with RunStore(tmp_path) as store:
        rec = store.create_run(
            agent="claude-cli",
            argv=["claude", "-p", "fix it"],
            vendor_version="2.1.197",
            profile="worktree-write",
            network="restricted",
            worktree=tmp_path / "wt",
            repo=tmp_path / "repo",
            base_commit="a" * 40,
        )
        assert RUN_ID.fullmatch(rec.id)
        assert rec.state is RunState.RUNNING
        assert rec.owner_pid == os.getpid()
        assert rec.outcome is None
        assert rec.finished_at is None

        started = RunStarted(0, "claude-cli", rec.id)
        message = MessageEmitted(1, "héllo")
        store.append_stdout(rec.id, b'{"type":"system"}\n{"type":')
        store.append_event(rec.id, started)
        store.append_stdout(rec.id, b'"result"}\n')
        store.append_event(rec.id, message)
        store.append_stderr(rec.id, "warn: slow\n")
        outcome = Outcome.failed(FailureKind.AUTH, "401 from the API")
        store.append_event(rec.id, RunFinished(2, outcome))
        summary = {"session_id": "s-1", "usage": {"input_tokens": 3}, "unknown_lines": 0}
        done = store.finish_run(rec.id, outcome, summary)

        folder = store.run_dir(rec.id)
        assert (folder / "stdout.jsonl").read_bytes() == b'{"type":"system"}\n{"type":"result"}\n'
        events = (folder / "events.jsonl").read_text().splitlines()
        assert events == [event_to_json(e) for e in (started, message, RunFinished(2, outcome))]
        assert (folder / "stderr.txt").read_text() == "warn: slow\n"

    assert done.state is RunState.FINISHED
    assert done.outcome is OutcomeStatus.FAILED
    assert done.failure_kind is FailureKind.AUTH
    assert done.reason == "401 from the API"
    assert done.finished_at is not None
    assert done.finished_at >= done.started_at
    # A second store object (another process, later) reads the same record.
    again = RunStore(tmp_path).get(rec.id)
    assert again == done
    assert again.summary == summary
    assert again.argv == ("claude", "-p", "fix it")
    assert again.worktree == str(tmp_path / "wt")
    assert again.base_commit == "a" * 40


def test_set_launch_records_the_final_argv_and_worktree(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    rec = store.create_run(agent="codex-cli", argv=[])
    store.set_launch(rec.id, argv=["bwrap", "--", "codex", "exec"], worktree=tmp_path / "wt")
    got = store.get(rec.id)
    assert got is not None
    assert got.argv == ("bwrap", "--", "codex", "exec")
    assert got.worktree == str(tmp_path / "wt")
    store.finish_run(rec.id, Outcome(OutcomeStatus.COMPLETED))
    with pytest.raises(StoreError, match=f"no running run {rec.id}"):
        store.set_launch(rec.id, argv=["late"])


def test_list_is_newest_first_and_limited(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    ids = [store.create_run(agent="codex-cli", argv=["codex"]).id for _ in range(4)]
    assert [r.id for r in store.list(limit=3)] == ids[::-1][:3]
    assert store.get("20000101-000000-000000") is None


def test_a_run_finishes_once_and_then_takes_no_more_data(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    rec = store.create_run(agent="codex-cli", argv=["codex"])
    store.finish_run(rec.id, Outcome(OutcomeStatus.COMPLETED))
    with pytest.raises(StoreError, match=f"run {rec.id} is already finished"):
        store.finish_run(rec.id, Outcome(OutcomeStatus.CANCELED))
    with pytest.raises(StoreError, match="takes no more data"):
        store.append_stdout(rec.id, b"late")
    with pytest.raises(StoreError, match="no run 20000101-000000-000000"):
        store.finish_run("20000101-000000-000000", Outcome(OutcomeStatus.COMPLETED))
    with pytest.raises(StoreError, match="no run 20000101-000000-000000"):
        store.append_event("20000101-000000-000000", RunStarted(0, "codex-cli"))
    got = store.get(rec.id)
    assert got is not None
    assert got.outcome is OutcomeStatus.COMPLETED


def test_run_ids_sort_by_time() -> None:
    from datetime import UTC, datetime

    a = new_run_id(datetime(2026, 12, 2, 16, 18, 0, tzinfo=UTC))
    b = new_run_id(datetime(2026, 12, 2, 16, 18, 1, tzinfo=UTC))
    assert a.startswith("20261202-161800-")
    assert a < b


WRITER = """
    import sys
    from supervisor.events import Outcome, OutcomeStatus, MessageEmitted
    from supervisor.store import RunStore

    store = RunStore(sys.argv[1])
    for i in range(25):
        rec = store.create_run(agent="claude-cli", argv=["claude", sys.argv[2], str(i)])
        store.append_stdout(rec.id, b"x" * 100)
        store.append_event(rec.id, MessageEmitted(0, sys.argv[2]))
        store.finish_run(rec.id, Outcome(OutcomeStatus.COMPLETED), {"i": i})
        store.recover_interrupted()
    print("ok")
"""


def test_two_processes_write_at_once(tmp_path: Path) -> None:
    code = textwrap.dedent(WRITER)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("left", "right")
    ]
    outputs = [w.communicate(timeout=60) for w in writers]
    assert [(w.returncode, out) for w, (out, _) in zip(writers, outputs, strict=True)] == [
        (0, "ok\n"),
        (0, "ok\n"),
    ], outputs
    runs = RunStore(tmp_path).list(limit=100)
    assert len(runs) == 50
    assert len({r.id for r in runs}) == 50
    assert all(r.state is RunState.FINISHED for r in runs)
    for name in ("left", "right"):
        assert sorted(int(r.argv[2]) for r in runs if r.argv[1] == name) == list(range(25))


def _set_version(db_path: Path, version: str) -> None:
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    db.close()


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    RunStore(tmp_path).create_run(agent="claude-cli", argv=["claude"])
    db_path = tmp_path / "runs.sqlite3"
    _set_version(db_path, str(SCHEMA_VERSION + 1))
    before = db_path.read_bytes()
    with pytest.raises(StoreError) as err:
        RunStore(tmp_path)
    assert str(err.value) == (
        f"the run store {db_path} has schema version {SCHEMA_VERSION + 1}, newer than the "
        f"{SCHEMA_VERSION} this asup understands; upgrade asup to read it (it is never "
        "rewritten by an older version)"
    )
    assert db_path.read_bytes() == before


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (lambda p: p.write_bytes(b"not a database, just text" * 100), "cannot be used"),
        (
            lambda p: sqlite3.connect(p).execute("CREATE TABLE notes (x)").connection.commit(),
            "is an SQLite file but not an asup run store",
        ),
    ],
)
def test_a_foreign_file_is_refused(
    tmp_path: Path, prepare: Callable[[Path], object], message: str
) -> None:
    prepare(tmp_path / "runs.sqlite3")
    with pytest.raises(StoreError, match=message):
        RunStore(tmp_path)


def test_a_garbled_version_is_refused(tmp_path: Path) -> None:
    RunStore(tmp_path)
    _set_version(tmp_path / "runs.sqlite3", "two")
    with pytest.raises(StoreError, match="records no valid schema version"):
        RunStore(tmp_path)


def test_an_older_schema_is_migrated_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = RunStore(tmp_path).create_run(agent="claude-cli", argv=["claude"])

    def v2(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE runs ADD COLUMN labels TEXT NOT NULL DEFAULT '[]'")

    newer = SCHEMA_VERSION + 1
    monkeypatch.setattr(store_module, "_MIGRATIONS", {**store_module._MIGRATIONS, newer: v2})
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", newer)
    store = RunStore(tmp_path)
    assert store.get(old.id) == old
    with sqlite3.connect(tmp_path / "runs.sqlite3") as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        labels = db.execute("SELECT labels FROM runs").fetchall()
    db.close()
    assert version == (str(newer),)
    assert labels == [("[]",)]


OWNER = """
    import sys, time
    from supervisor.store import RunStore

    store = RunStore(sys.argv[1])
    rec = store.create_run(agent="codex-cli", argv=["codex", "exec"])
    store.append_stdout(rec.id, b'{"type":"thread.started"}\\n')
    print(rec.id, flush=True)
    time.sleep(60)
"""


def test_runs_of_a_killed_owner_are_recovered_as_interrupted(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    mine = store.create_run(agent="claude-cli", argv=["claude"])  # owner alive: left alone
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(OWNER), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    run_id = owner.stdout.readline().strip()
    assert store.recover_interrupted() == []  # its owner still runs
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    owner.stdout.close()

    recovered = store.recover_interrupted()
    assert [r.id for r in recovered] == [run_id]
    rec = recovered[0]
    assert rec.state is RunState.INTERRUPTED
    assert rec.outcome is None
    assert rec.finished_at is None
    assert rec.reason == (
        f"the supervisor (pid {owner.pid}) ended without finishing the run, "
        "so its outcome is unknown"
    )
    assert (store.run_dir(run_id) / "stdout.jsonl").read_bytes() == b'{"type":"thread.started"}\n'
    assert store.recover_interrupted() == []
    assert store.get(mine.id) == mine
    with pytest.raises(StoreError, match="already interrupted"):
        store.finish_run(run_id, Outcome(OutcomeStatus.COMPLETED))


def test_a_reused_owner_pid_does_not_keep_a_run_alive(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    rec = store.create_run(agent="claude-cli", argv=["claude"])
    with sqlite3.connect(tmp_path / "runs.sqlite3") as db:  # same pid, another process's birth
        db.execute("UPDATE runs SET owner_started = owner_started - 1000")
    db.close()
    assert [r.id for r in store.recover_interrupted()] == [rec.id]


def test_summary_accepts_a_run_summary(tmp_path: Path) -> None:
    from supervisor.codecs import decode_transcript

    decoded = decode_transcript("claude-cli", b"")
    store = RunStore(tmp_path)
    rec = store.create_run(agent="claude-cli", argv=["claude"])
    done = store.finish_run(rec.id, decoded.outcome, decoded.summary)
    assert done.summary == json.loads(json.dumps(decoded.summary.to_dict()))
