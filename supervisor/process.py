"""Owning a child process: spawn, stream, budget, cancel, and prove that nothing outlives it.

:func:`open_child` is an async context manager (anyio, asyncio backend) and :func:`run_child`
the one-call form. The child runs in its own session and process group (``start_new_session``)
with stdin on ``/dev/null``. Its stdout is handed to ``on_stdout`` chunk by chunk as it arrives
(the caller feeds the codec and the raw transcript); its stderr is drained into a bounded tail.

The run ends in one of four ways: the child exits; the wall-clock budget ``max_runtime`` runs
out (``timed_out``); it is canceled (``Child.cancel()``, the ``cancel`` event, a cancel scope
around the block, or Ctrl-C of the supervisor, which anyio turns into cancellation); or the body
of the ``async with`` block leaves without waiting (canceled too). Ending a child that still
runs is SIGTERM to its process group and to every known descendant, ``grace`` seconds, then
SIGKILL. This teardown is shielded from cancellation, so it also runs when the caller is being
canceled.

Then the sweep: every process of the run still alive after the child itself has gone is a
*survivor*. Survivors get SIGTERM (within what is left of the grace period), then are frozen
(SIGSTOP, so none can fork while the others die) and killed (SIGKILL) in rounds until a search
finds none; :attr:`ChildResult.survivors_killed` names them. A process belongs to the run when

1. it descends from the child: the tree is snapshotted every :data:`POLL_INTERVAL` seconds during
   the run, and a process once seen stays tracked (by pid and creation time) with its own
   descendants, even after it left the group or the session;
2. it is in the child's session (only the child and its descendants can be);
3. its environment carries this run's cookie (:data:`COOKIE_VAR`, a random value the child
   inherits and passes on unless it scrubs its environment); or
4. on Linux, where the supervisor makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``) so
   that orphans reparent to it rather than to init: it is an orphan the supervisor adopted. Its
   parent is now the supervisor, it is not a child spawned by :func:`open_child`, it was created
   after the run's child, and it is in a session other than the supervisor's whose leader it is
   not: the mark of a daemon (fork, ``setsid``, fork), and never true of a process that code
   in the supervisor started itself, in its own session or in a new one.

Rule 4 catches a daemon that also scrubbed its environment, between two snapshots. Rules 2 to 4
look only at processes of the same user created after the child. An orphan that only rule 4
finds cannot be told apart when two runs share one supervisor process: the run that ends first
claims it. Nor can a daemon that other code in the supervisor process starts while a run goes
on (say a gpg-agent behind a signed commit); the supervisor's own code starts none. Zombies
the supervisor adopted are reaped; it never waits on a process it did not find this way, so
children of other code are left alone.

Errors::

    ChildSpawnError   the child could not be started (missing binary, bad cwd, …)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import math
import os
import secrets
import signal as signals
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
import psutil  # type: ignore[import-untyped, unused-ignore]  # no stubs unless types-psutil

from supervisor.errors import SupervisorError

__all__ = [
    "COOKIE_VAR",
    "POLL_INTERVAL",
    "Child",
    "ChildResult",
    "ChildSpawnError",
    "KilledProcess",
    "ProcessWatch",
    "become_subreaper",
    "open_child",
    "run_child",
]

COOKIE_VAR = "ASUP_PROCESS_COOKIE"
"""Set in the child's environment to a random per-run value; marks the run's processes."""

POLL_INTERVAL = 0.1
"""Seconds between two snapshots of the child's process tree."""

_EXIT_POLL = 0.02
_DRAIN_TIMEOUT = 1.0
_KILL_WAIT = 2.0
_KILL_ROUNDS = 10
_PR_SET_CHILD_SUBREAPER = 36


class ChildSpawnError(SupervisorError):
    """The child process could not be started."""


@dataclass(frozen=True, slots=True)
class KilledProcess:
    pid: int
    name: str


@dataclass(frozen=True, slots=True)
class ChildResult:
    """How a child ended.

    ``exit_code`` is None when a signal ended the child (then ``signal`` is its number).
    ``wall_time_s`` runs from the spawn until the child and every survivor were gone;
    ``first_byte_s`` from the spawn to the first stdout byte (None: the child printed nothing).
    ``survivors_killed``: processes of the run still alive after the child had gone, which the
    supervisor killed. ``survivors_left``: processes even SIGKILL did not end in time (e.g. stuck
    in uninterruptible sleep); empty unless something is badly wrong.
    """

    pid: int
    exit_code: int | None
    signal: int | None
    timed_out: bool
    canceled: bool
    stderr_tail: str
    wall_time_s: float
    first_byte_s: float | None
    survivors_killed: tuple[KilledProcess, ...] = ()
    survivors_left: tuple[KilledProcess, ...] = ()

    @property
    def signal_name(self) -> str | None:
        if self.signal is None:
            return None
        try:
            return signals.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"


_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux), once; True when it is one.

    Orphaned descendants of our children then reparent to us instead of to init, so a process
    that double-forked away from the child is still ours to find and kill. The setting is not
    inherited by our children."""
    global _subreaper  # noqa: PLW0603 (one process-wide attribute, set once)
    if _subreaper is None:
        _subreaper = False
        if sys.platform == "linux":
            name = ctypes.util.find_library("c")
            libc = ctypes.CDLL(name, use_errno=True)
            _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


# Children spawned by open_child in this process (pid → their tree): never treated as orphans.
_ACTIVE: dict[int, _Tree] = {}


def _alive(p: psutil.Process) -> bool:
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _signal(p: psutil.Process, sig: int) -> None:
    # psutil checks the creation time first, so a reused pid is never signalled.
    with contextlib.suppress(psutil.Error):
        p.send_signal(sig)


class _Tree:
    """The processes of one run (the rules are in the module docstring). Its methods block;
    they run in worker threads, one at a time per tree."""

    def __init__(self, root_pid: int, cookie: str, spawned_at: float) -> None:
        self.root_pid = root_pid
        self.cookie = cookie
        self.pids: frozenset[int] = frozenset()  # read lock-free by other runs' trees
        self._lock = threading.RLock()
        self._me = os.getpid()
        self._my_sid = os.getsid(0)
        self._uid = os.getuid()
        self._seen: dict[tuple[int, float], psutil.Process] = {}
        self._names: dict[int, str] = {}
        # Creation times count from boot (whole seconds) + ticks, so compare like with like: a
        # process of the run was created at or after the child. Only when the child is already
        # gone, fall back on the wall clock, with a second of slack.
        self._since = spawned_at - 1.0
        self.root: psutil.Process | None = None
        with contextlib.suppress(psutil.Error):
            self.root = psutil.Process(root_pid)
            self._since = self.root.create_time() - 0.02

    def _remember(self, p: psutil.Process) -> None:
        with contextlib.suppress(psutil.Error):
            key = (p.pid, p.create_time())
            if key not in self._seen:
                self._seen[key] = p
                self.pids = self.pids | {p.pid}
                self._names[p.pid] = p.name()  # while it can still be read

    def describe(self, p: psutil.Process) -> KilledProcess:
        return KilledProcess(p.pid, self._names.get(p.pid, "?"))

    def poll(self) -> None:
        """Snapshot: the child's descendants and those of every process seen before."""
        with self._lock:
            roots = [p for p in self._seen.values() if _alive(p)]
            if self.root is not None:
                roots.append(self.root)
            for r in roots:
                with contextlib.suppress(psutil.Error):
                    for c in r.children(recursive=True):
                        self._remember(c)

    def _belongs(self, p: psutil.Process) -> bool:
        """Rules 2–4 for a process not seen in the tree."""
        try:
            if p.create_time() < self._since or p.uids().real != self._uid:
                return False
            sid = os.getsid(p.pid)
            if sid == self.root_pid:
                return True
            if p.environ().get(COOKIE_VAR) == self.cookie:
                return True
            return (
                bool(_subreaper)
                and p.ppid() == self._me
                and sid not in (self._my_sid, p.pid)
                and p.pid not in _ACTIVE
                and not any(p.pid in t.pids for t in list(_ACTIVE.values()) if t is not self)
            )
        except (psutil.Error, OSError):
            return False

    def find(self) -> list[psutil.Process]:
        """Every live process of the run except the child itself."""
        with self._lock:
            self.poll()
            for pid in psutil.pids():
                if pid in (self._me, self.root_pid):
                    continue
                try:
                    p = psutil.Process(pid)
                    if (pid, p.create_time()) in self._seen:
                        continue
                except psutil.Error:
                    continue
                if self._belongs(p):
                    self._remember(p)
            self.poll()  # and the descendants of what the scan found
            return [p for p in self._seen.values() if p.pid != self.root_pid and _alive(p)]

    def reap(self) -> None:
        """Collect the exit status of run processes that reparented to us and died."""
        with self._lock:
            for p in self._seen.values():
                if p.pid == self.root_pid:
                    continue
                try:
                    if p.is_running() and p.ppid() == self._me:
                        os.waitpid(p.pid, os.WNOHANG)
                except (psutil.Error, ChildProcessError):
                    pass

    def wait_gone(self, procs: Sequence[psutil.Process], timeout: float) -> list[psutil.Process]:
        """Wait until each of ``procs`` is dead (reaping those that are ours); returns the ones
        still alive at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            self.reap()
            left = [p for p in procs if _alive(p)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.01)

    def kill_all(self) -> tuple[list[psutil.Process], list[psutil.Process]]:
        """Freeze, then SIGKILL, every process of the run, in rounds until a search finds none.
        Returns (killed, still alive)."""
        killed: dict[int, psutil.Process] = {}
        left: list[psutil.Process] = []
        for _ in range(_KILL_ROUNDS):
            found = self.find()
            if not found:
                left = []
                break
            for p in found:
                _signal(p, signals.SIGSTOP)
            found = self.find()  # anything forked before the freeze landed
            for p in found:
                _signal(p, signals.SIGKILL)
                killed.setdefault(p.pid, p)
            left = self.wait_gone(found, _KILL_WAIT)
        self.reap()
        return list(killed.values()), left


class ProcessWatch:
    """:func:`open_child`'s survivor rules for a child another module spawns itself (the ACP
    client starts its agent with the stdin/stdout pipes JSON-RPC needs). Blocking methods: call
    them from a worker thread.

    ::

        watch = ProcessWatch()                    # becomes a subreaper; makes the cookie
        proc = spawn(argv, env=watch.env(env), start_new_session=True)
        watch.started(proc.pid)
        …watch.poll() every POLL_INTERVAL while it runs…
        …end the child (TERM, grace, KILL of its group)…
        killed, left = watch.sweep(grace)         # every survivor TERMed, then frozen and killed
    """

    def __init__(self) -> None:
        become_subreaper()
        self.cookie = secrets.token_hex(16)
        self._tree: _Tree | None = None
        self._signalled: list[psutil.Process] = []

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The child's environment with this run's cookie (:data:`COOKIE_VAR`)."""
        return {**env, COOKIE_VAR: self.cookie}

    def started(self, pid: int) -> None:
        self._tree = _Tree(pid, self.cookie, time.time())
        _ACTIVE[pid] = self._tree

    def poll(self) -> None:
        if self._tree is not None:
            self._tree.poll()

    def signal_known(self, sig: int) -> None:
        """Send ``sig`` to every process of the run known so far but the child itself (those
        outside its process group, e.g. a sandbox's init in a session of its own), as
        :func:`open_child`'s teardown does alongside the group signal."""
        if self._tree is not None:
            for p in self._tree.find():
                _signal(p, sig)
                self._signalled.append(p)

    def sweep(self, grace: float) -> tuple[tuple[KilledProcess, ...], tuple[KilledProcess, ...]]:
        """After the child itself has gone: SIGTERM every process of the run, up to ``grace``
        seconds for them to go, then freeze and SIGKILL what is left, in rounds. Returns (the
        survivors killed, those even SIGKILL did not end in time)."""
        tree = self._tree
        if tree is None:
            return (), ()
        try:
            # what the shutdown signalled is ending with the child, not left behind: a
            # sandbox's init may take a moment to take its namespace down
            tree.wait_gone(self._signalled, grace)
            survivors = tree.find()
            for p in survivors:
                _signal(p, signals.SIGTERM)
            if survivors:
                tree.wait_gone(survivors, grace)
            killed, left = tree.kill_all()
            named: dict[int, KilledProcess] = {}
            for p in [*survivors, *killed]:
                named.setdefault(p.pid, tree.describe(p))
            return tuple(named.values()), tuple(tree.describe(p) for p in left)
        finally:
            _ACTIVE.pop(tree.root_pid, None)


@dataclass(slots=True)
class _Pump:
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


class Child:
    """A running child, as yielded by :func:`open_child`. ``result`` is set once it has ended,
    also when the block was left by an error or a cancellation."""

    def __init__(
        self,
        process: anyio.abc.Process,
        tree: _Tree,
        *,
        started: float,
        deadline: float,
        grace: float,
        stderr_tail_bytes: int,
        on_stdout: Callable[[bytes], None],
    ) -> None:
        self._process = process
        self._tree = tree
        self._started = started
        self._deadline = deadline
        self._grace = grace
        self._tail_limit = stderr_tail_bytes
        self._on_stdout = on_stdout
        self._tail = bytearray()
        self._tail_cut = False
        self._first_byte: float | None = None
        self._wake = anyio.Event()
        self._exited = False
        self._status: tuple[int | None, int | None] | None = None
        self._callback_error: Exception | None = None
        self._timed_out = False
        self._canceled = False
        self._ending: anyio.Event | None = None
        self._pumps = (_Pump(), _Pump())
        self._poller = anyio.CancelScope()
        self.result: ChildResult | None = None

    @property
    def pid(self) -> int:
        return self._process.pid

    def cancel(self) -> None:
        """Ask the child to end (SIGTERM, grace, SIGKILL); :meth:`wait` then reports canceled."""
        self._wake.set()

    async def wait(self) -> ChildResult:
        """Wait until the child exits, runs out of budget or is canceled, then end it and every
        process of its run. Re-raises an exception of ``on_stdout``."""
        if self.result is None:
            with anyio.move_on_at(self._deadline) as budget:
                await self._wake.wait()
            if not self._poll_exit():
                self._timed_out = budget.cancelled_caught
                self._canceled = not budget.cancelled_caught
            await self._end()
        error, self._callback_error = self._callback_error, None
        if error is not None:
            raise error
        assert self.result is not None
        return self.result

    # -- exit of the child ----------------------------------------------------------------------

    def _poll_exit(self) -> bool:
        """Has the child exited? Asked without reaping it (the event loop does that): asyncio's
        own ``wait()`` may also wait for the pipes, which a survivor can hold open."""
        if self._exited:
            return True
        if self._process.returncode is None:
            if not hasattr(os, "waitid"):  # then the event loop's return code is all we have
                return False
            try:
                info = os.waitid(os.P_PID, self._process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None  # reaped already: the return code is on its way
            else:
                if info is None:
                    return False
            if info is not None:
                exited = info.si_code == os.CLD_EXITED
                self._status = (info.si_status, None) if exited else (None, info.si_status)
        self._exited = True
        return True

    async def _until_exit(self) -> None:
        while not self._poll_exit():
            await anyio.sleep(_EXIT_POLL)

    async def _watch_exit(self) -> None:
        await self._until_exit()
        self._wake.set()

    def _signal_root(self, sig: int) -> None:
        if not self._poll_exit():  # not reaped, so the pid is still the child's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._process.pid, sig)

    def _signal_group(self, sig: int, members: Sequence[psutil.Process]) -> None:
        """Signal the child's process group while it is certainly ours: the child is not yet
        reaped, or a process of the run is still in it."""
        pgid = self._process.pid
        ours = not self._poll_exit()
        for p in members:
            if ours:
                break
            with contextlib.suppress(OSError):
                ours = os.getpgid(p.pid) == pgid
        if ours:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)

    # -- helper tasks ---------------------------------------------------------------------------

    async def _watch_event(self, event: anyio.Event) -> None:
        await event.wait()
        self.cancel()

    async def _poll_tree(self) -> None:
        with self._poller:
            while True:
                await anyio.to_thread.run_sync(self._tree.poll)
                await anyio.sleep(POLL_INTERVAL)

    async def _pump_stdout(self, stream: anyio.abc.ByteReceiveStream) -> None:
        pump = self._pumps[0]
        with pump.scope:
            try:
                async for chunk in stream:
                    if self._first_byte is None:
                        self._first_byte = anyio.current_time() - self._started
                    try:
                        self._on_stdout(chunk)
                    except Exception as exc:
                        self._callback_error = exc
                        self.cancel()
                        return
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                pump.done.set()

    async def _pump_stderr(self, stream: anyio.abc.ByteReceiveStream) -> None:
        pump = self._pumps[1]
        with pump.scope:
            try:
                async for chunk in stream:
                    self._tail += chunk
                    excess = len(self._tail) - self._tail_limit
                    if excess > 0:
                        del self._tail[:excess]
                        self._tail_cut = True
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                pump.done.set()

    # -- teardown (shielded) --------------------------------------------------------------------

    async def _end(self) -> ChildResult:
        if self._ending is not None:
            await self._ending.wait()
        else:
            self._ending = anyio.Event()
            with anyio.CancelScope(shield=True):
                try:
                    self.result = await self._teardown()
                finally:
                    self._ending.set()
        assert self.result is not None
        return self.result

    async def _stop_root(self) -> float:
        """SIGTERM the group, the child and every known process of the run; wait out the grace;
        SIGKILL. Returns the end of the grace period."""
        deadline = anyio.current_time() + self._grace
        known = await anyio.to_thread.run_sync(self._tree.find)
        self._signal_group(signals.SIGTERM, known)
        self._signal_root(signals.SIGTERM)
        for p in known:
            _signal(p, signals.SIGTERM)
        with anyio.move_on_at(deadline):
            await self._until_exit()
        if not self._poll_exit():
            self._signal_group(signals.SIGKILL, known)
            self._signal_root(signals.SIGKILL)
            with anyio.move_on_after(_KILL_WAIT):
                await self._until_exit()
        return deadline

    async def _teardown(self) -> ChildResult:
        tree = self._tree
        deadline = None if self._poll_exit() else await self._stop_root()
        survivors = await anyio.to_thread.run_sync(tree.find)
        if survivors:
            self._signal_group(signals.SIGTERM, survivors)
            for p in survivors:
                _signal(p, signals.SIGTERM)
            if deadline is None:
                deadline = anyio.current_time() + self._grace
            rest = max(0.0, deadline - anyio.current_time())
            await anyio.to_thread.run_sync(tree.wait_gone, survivors, rest)
        killed, left = await anyio.to_thread.run_sync(tree.kill_all)
        self._poller.cancel()

        returncode: int | None = None
        if self._poll_exit():
            with anyio.move_on_after(_DRAIN_TIMEOUT):
                returncode = await self._process.wait()
                for pump in self._pumps:
                    await pump.done.wait()
        elif tree.root is not None:
            left = [tree.root, *left]
        for pump in self._pumps:
            pump.scope.cancel()

        named: dict[int, KilledProcess] = {}
        for p in [*survivors, *killed]:
            named.setdefault(p.pid, tree.describe(p))
        exit_code, sig = self._exit_status(returncode)
        return ChildResult(
            pid=self._process.pid,
            exit_code=exit_code,
            signal=sig,
            timed_out=self._timed_out,
            canceled=self._canceled,
            stderr_tail=self._stderr_text(),
            wall_time_s=anyio.current_time() - self._started,
            first_byte_s=self._first_byte,
            survivors_killed=tuple(named.values()),
            survivors_left=tuple(tree.describe(p) for p in left),
        )

    def _exit_status(self, returncode: int | None) -> tuple[int | None, int | None]:
        if returncode is None:
            returncode = self._process.returncode
        if returncode is not None:
            return (returncode, None) if returncode >= 0 else (None, -returncode)
        return self._status if self._status is not None else (None, None)

    def _stderr_text(self) -> str:
        data = bytes(self._tail)
        if self._tail_cut:
            # The cut may have split a UTF-8 sequence: drop its orphaned continuation bytes.
            skip = 0
            while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
                skip += 1
            data = data[skip:]
        return data.decode("utf-8", errors="replace")


@asynccontextmanager
async def open_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | Path,
    on_stdout: Callable[[bytes], None],
    max_runtime: float | None = None,
    grace: float = 5.0,
    stderr_tail_bytes: int = 16384,
    cancel: anyio.Event | None = None,
) -> AsyncIterator[Child]:
    """Start ``argv`` as a supervised child and yield it; leaving the block ends it.

    ``env`` is the child's whole environment (plus :data:`COOKIE_VAR`). ``await child.wait()``
    in the block returns the :class:`ChildResult`; if the block leaves without it (an error, a
    cancel scope, Ctrl-C), the child is canceled and ``child.result`` is still filled in.
    A failure of ``on_stdout`` cancels the child and is re-raised by ``wait()``.
    """
    if not argv:
        raise ValueError("argv must name a program")
    if stderr_tail_bytes < 0 or grace < 0:
        raise ValueError("stderr_tail_bytes and grace must not be negative")
    become_subreaper()
    cookie = secrets.token_hex(16)
    child_env = {**env, COOKIE_VAR: cookie}
    started = anyio.current_time()
    try:
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=child_env,
            start_new_session=True,
        )
    except OSError as exc:
        raise ChildSpawnError(
            f"could not start {argv[0]!r} in {str(cwd)!r}: {exc.strerror or exc}; "
            "check that the program is installed and the directory exists"
        ) from exc
    tree = _Tree(process.pid, cookie, time.time())
    _ACTIVE[process.pid] = tree
    child = Child(
        process,
        tree,
        started=started,
        deadline=math.inf if max_runtime is None else started + max_runtime,
        grace=grace,
        stderr_tail_bytes=stderr_tail_bytes,
        on_stdout=on_stdout,
    )
    body_error: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            assert process.stdout is not None
            assert process.stderr is not None
            tg.start_soon(child._watch_exit)
            tg.start_soon(child._pump_stdout, process.stdout)
            tg.start_soon(child._pump_stderr, process.stderr)
            tg.start_soon(child._poll_tree)
            if cancel is not None:
                tg.start_soon(child._watch_event, cancel)
            try:
                yield child
            except Exception as exc:
                body_error = exc  # re-raised below as itself, not wrapped in a group
            finally:
                if child.result is None:
                    child._canceled = not child._poll_exit()
                    await child._end()
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_WAIT):
            await process.aclose()
        _ACTIVE.pop(process.pid, None)
    if body_error is not None:
        raise body_error
    if child._callback_error is not None:
        raise child._callback_error


async def run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | Path,
    on_stdout: Callable[[bytes], None],
    max_runtime: float | None = None,
    grace: float = 5.0,
    stderr_tail_bytes: int = 16384,
    cancel: anyio.Event | None = None,
) -> ChildResult:
    """Run ``argv`` to its end under :func:`open_child` and return how it ended."""
    async with open_child(
        argv,
        env=env,
        cwd=cwd,
        on_stdout=on_stdout,
        max_runtime=max_runtime,
        grace=grace,
        stderr_tail_bytes=stderr_tail_bytes,
        cancel=cancel,
    ) as child:
        return await child.wait()
