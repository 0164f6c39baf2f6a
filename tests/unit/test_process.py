"""The supervised child: streaming, budgets, cancellation, and no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import psutil
import pytest

from supervisor.process import (
    COOKIE_VAR,
    ChildResult,
    ChildSpawnError,
    become_subreaper,
    open_child,
    run_child,
)

T = TypeVar("T")
PY = sys.executable
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn, backend="asyncio")


def py(code: str, *args: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code), *args]


def gone(pid: int) -> bool:
    """True when no process with this pid exists any more (not even as a zombie)."""
    return not psutil.pid_exists(pid)


async def child_run(
    argv: list[str],
    cwd: Path,
    *,
    max_runtime: float | None = None,
    grace: float = 5.0,
    stderr_tail_bytes: int = 16384,
) -> tuple[ChildResult, list[bytes]]:
    chunks: list[bytes] = []
    result = await run_child(
        argv,
        env=ENV,
        cwd=cwd,
        on_stdout=chunks.append,
        max_runtime=max_runtime,
        grace=grace,
        stderr_tail_bytes=stderr_tail_bytes,
    )
    return result, chunks


def test_stdout_streams_in_order_as_it_arrives(tmp_path: Path) -> None:
    code = """
        import time
        for i in range(5):
            print(f"line {i}", flush=True)
            time.sleep(0.08)
    """
    arrivals: list[tuple[float, bytes]] = []

    async def main() -> ChildResult:
        return await run_child(
            py(code),
            env=ENV,
            cwd=tmp_path,
            on_stdout=lambda b: arrivals.append((time.monotonic(), b)),
        )

    result = run(main)
    assert b"".join(b for _, b in arrivals) == b"".join(b"line %d\n" % i for i in range(5))
    assert arrivals[-1][0] - arrivals[0][0] > 0.2  # delivered while the child ran, not at exit
    assert result.exit_code == 0
    assert result.signal is None
    assert not result.timed_out
    assert not result.canceled
    assert result.first_byte_s is not None
    assert result.first_byte_s < result.wall_time_s - 0.2
    assert result.survivors_killed == ()


def test_child_has_its_own_session_devnull_stdin_and_the_cookie(tmp_path: Path) -> None:
    code = f"""
        import os, sys
        print(os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid(),
              repr(sys.stdin.read()), len(os.environ.get("{COOKIE_VAR}", "")), os.getcwd())
    """
    result, chunks = run(lambda: child_run(py(code), tmp_path))
    assert b"".join(chunks).decode().split() == ["True", "True", "''", "32", str(tmp_path)]
    assert result.exit_code == 0


def test_stderr_flood_keeps_a_bounded_tail(tmp_path: Path) -> None:
    code = """
        import sys
        for _ in range(4000):
            sys.stderr.write("é" * 127 + "\\n")
        sys.stderr.write("THE END")
        print("done")
    """
    result, chunks = run(lambda: child_run(py(code), tmp_path, stderr_tail_bytes=1001))
    assert len(result.stderr_tail.encode()) <= 1001
    assert result.stderr_tail.endswith("é\nTHE END")
    assert "\ufffd" not in result.stderr_tail  # a UTF-8 sequence split by the cut is dropped
    assert b"".join(chunks) == b"done\n"
    assert result.exit_code == 0


@pytest.mark.parametrize(
    ("code", "exit_code", "sig"),
    [
        ("raise SystemExit(0)", 0, None),
        ("raise SystemExit(7)", 7, None),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", None, signal.SIGKILL),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", None, signal.SIGTERM),
    ],
)
def test_exit_codes_and_signals(
    tmp_path: Path, code: str, exit_code: int | None, sig: int | None
) -> None:
    result, _ = run(lambda: child_run(py(code), tmp_path))
    assert (result.exit_code, result.signal) == (exit_code, sig)
    assert not result.timed_out
    assert not result.canceled
    if sig is not None:
        assert result.signal_name == signal.Signals(sig).name


def test_timeout_terminates_the_group(tmp_path: Path) -> None:
    result, _ = run(lambda: child_run(["sleep", "30"], tmp_path, max_runtime=0.3, grace=2.0))
    assert result.timed_out
    assert not result.canceled
    assert result.signal == signal.SIGTERM
    assert result.exit_code is None
    assert 0.3 <= result.wall_time_s < 2.0
    assert gone(result.pid)


def test_timeout_escalates_to_sigkill_after_the_grace(tmp_path: Path) -> None:
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(30)
    """
    result, chunks = run(lambda: child_run(py(code), tmp_path, max_runtime=0.5, grace=0.4))
    assert b"".join(chunks) == b"ready\n"
    assert result.timed_out
    assert result.signal == signal.SIGKILL
    assert 0.9 <= result.wall_time_s < 4.0


def test_cancel_event_ends_the_child(tmp_path: Path) -> None:
    async def main() -> ChildResult:
        cancel = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: set_later(cancel, 0.3))
            return await run_child(
                ["sleep", "30"], env=ENV, cwd=tmp_path, on_stdout=print, cancel=cancel, grace=2
            )
        raise AssertionError("unreachable")

    result = run(main)
    assert result.canceled
    assert not result.timed_out
    assert result.signal == signal.SIGTERM
    assert result.wall_time_s < 2.0
    assert gone(result.pid)


async def set_later(event: anyio.Event, delay: float) -> None:
    await anyio.sleep(delay)
    event.set()


def test_a_cancel_scope_around_the_block_ends_the_child_shielded(tmp_path: Path) -> None:
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(30)
    """

    async def main() -> ChildResult | None:
        with anyio.move_on_after(0.3) as scope:
            async with open_child(
                py(code), env=ENV, cwd=tmp_path, on_stdout=print, grace=0.3
            ) as child:
                await child.wait()
        assert scope.cancelled_caught
        return child.result

    result = run(main)
    assert result is not None
    assert result.canceled
    assert result.signal == signal.SIGKILL  # the teardown ran to the end despite the cancel
    assert gone(result.pid)


def test_leaving_the_block_without_waiting_cancels(tmp_path: Path) -> None:
    async def main() -> ChildResult | None:
        async with open_child(["sleep", "30"], env=ENV, cwd=tmp_path, on_stdout=print) as child:
            await anyio.sleep(0.1)
        return child.result

    result = run(main)
    assert result is not None
    assert result.canceled
    assert result.signal == signal.SIGTERM


def test_an_error_in_the_block_propagates_unwrapped_and_ends_the_child(tmp_path: Path) -> None:
    pids: list[int] = []

    async def main() -> None:
        async with open_child(["sleep", "30"], env=ENV, cwd=tmp_path, on_stdout=print) as child:
            pids.append(child.pid)
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        run(main)
    assert gone(pids[0])


def test_a_failing_stdout_callback_cancels_and_is_reraised(tmp_path: Path) -> None:
    code = """
        import time
        print("one", flush=True)
        time.sleep(30)
    """

    def explode(data: bytes) -> None:
        raise ValueError(f"cannot take {data!r}")

    async def main() -> ChildResult:
        return await run_child(py(code), env=ENV, cwd=tmp_path, on_stdout=explode, grace=1)

    started = time.monotonic()
    with pytest.raises(ValueError, match="cannot take b'one"):
        run(main)
    assert time.monotonic() - started < 3


def test_missing_program_is_a_spawn_error(tmp_path: Path) -> None:
    async def main() -> ChildResult:
        return await run_child(
            [str(tmp_path / "no-such-agent")], env=ENV, cwd=tmp_path, on_stdout=print
        )

    with pytest.raises(ChildSpawnError, match=r"could not start .*no-such-agent") as err:
        run(main)
    assert "installed" in str(err.value)


def test_a_background_process_holding_stdout_does_not_outlive_the_child(tmp_path: Path) -> None:
    script = "sleep 30 & echo started"
    result, chunks = run(lambda: child_run(["sh", "-c", script], tmp_path, grace=1.0))
    assert b"".join(chunks) == b"started\n"
    assert result.exit_code == 0
    assert not result.timed_out
    assert result.wall_time_s < 15.0  # not the 30 s the background sleep would hold stdout
    assert [k.name for k in result.survivors_killed] == ["sleep"]
    assert all(gone(k.pid) for k in result.survivors_killed)
    assert result.survivors_left == ()


ESCAPER = """
    import os, sys, signal, time

    pidfile = sys.argv[1]
    STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"

    def escape(scrub_env):
        pid = os.fork()
        if pid == 0:
            os.setsid()               # leave the child's session and process group
            if os.fork() != 0:
                os._exit(0)           # double fork: the grandchild is orphaned
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(pidfile, "a") as f:
                f.write(f"{os.getpid()}\\n")
            if scrub_env:             # and forget the run's environment
                os.execve(sys.executable, [sys.executable, "-c", STUBBORN], {})
            time.sleep(60)
            os._exit(0)
        os.waitpid(pid, 0)

    escape(False)
    escape(True)
    while open(pidfile).read().count("\\n") < 2:
        time.sleep(0.01)
    print("escaped", flush=True)
"""


def test_escaped_grandchildren_that_ignore_sigterm_are_found_and_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pidfile.touch()
    result, chunks = run(lambda: child_run(py(ESCAPER, str(pidfile)), tmp_path, grace=0.3))
    escaped = [int(line) for line in pidfile.read_text().split()]
    assert b"".join(chunks) == b"escaped\n"
    assert result.exit_code == 0
    assert len(escaped) == 2
    assert set(escaped) <= {k.pid for k in result.survivors_killed}
    assert result.survivors_left == ()
    assert all(gone(pid) for pid in escaped)  # killed, and reaped: no zombie either


def test_escapees_die_with_a_timed_out_child(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pidfile.touch()
    argv = [PY, "-c", textwrap.dedent(ESCAPER) + "time.sleep(30)\n", str(pidfile)]
    result, _ = run(lambda: child_run(argv, tmp_path, max_runtime=1.0, grace=0.3))
    escaped = [int(line) for line in pidfile.read_text().split()]
    assert result.timed_out
    assert result.signal == signal.SIGTERM
    assert len(escaped) == 2
    assert all(gone(pid) for pid in escaped)


def test_the_supervisor_is_a_subreaper_on_linux() -> None:
    assert become_subreaper() is (sys.platform == "linux")


SUPERVISOR = """
    import os, signal, sys
    import anyio
    from supervisor.process import run_child

    CHILD = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \\
            "print(os.getpid(), flush=True); time.sleep(60)"

    def show(data):
        sys.stdout.write(data.decode())
        sys.stdout.flush()

    async def main():
        await run_child([sys.executable, "-c", CHILD], env={}, cwd=".", on_stdout=show, grace=0.3)

    try:
        anyio.run(main, backend="asyncio")
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def test_ctrl_c_of_the_supervisor_kills_the_child(tmp_path: Path) -> None:
    sup = subprocess.Popen(
        [PY, "-c", textwrap.dedent(SUPERVISOR)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert sup.stdout is not None
        child_pid = int(sup.stdout.readline())
        assert psutil.Process(child_pid).status() != psutil.STATUS_ZOMBIE
        sup.send_signal(signal.SIGINT)
        rest, _ = sup.communicate(timeout=10)
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
    assert rest == "interrupted\n"
    assert gone(child_pid)


def test_the_cookie_alone_marks_a_process_of_the_run() -> None:
    # Neither in the run's session nor an orphan we adopted: only the inherited cookie tells.
    from supervisor.process import _Tree

    sleeper = [PY, "-c", "import time; time.sleep(30)"]
    marked = subprocess.Popen(sleeper, env={**ENV, COOKIE_VAR: "c00k1e"})
    unmarked = subprocess.Popen(sleeper, env={**ENV, COOKIE_VAR: "other"})
    try:
        tree = _Tree(root_pid=2**22 + 1, cookie="c00k1e", spawned_at=time.time() - 5)
        found = {p.pid for p in tree.find()}
        assert marked.pid in found
        assert unmarked.pid not in found
        assert os.getpid() not in found
    finally:
        for p in (marked, unmarked):
            p.kill()
            p.wait()
