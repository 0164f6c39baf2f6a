"""Start-up cost of a run, and of ``asup --help``, against raw baselines run side by side.

``python -m benchmarks.run_startup [--repeat 15] [--help-repeat 20] [--files 300]``

**Start to the child's first stdout byte**, on a sample repository the benchmark makes (a few
hundred files, a few commits), three paths alternating, best and median of ``--repeat``:

- *baseline*: ``git worktree add --detach <dir> HEAD`` (the git CLI), then ``bwrap`` with the
  very mounts asup compiles for ``network = "none"`` (its argv, compiled once before the clock
  runs, against the baseline's own fixed paths) running ``/bin/echo x``, until the first byte
  on its stdout; then ``git worktree remove --force <dir>``;
- *asup*: the supervisor's own path up to the child's first byte, as :func:`dispatch_run` takes
  it before the vendor CLI's own start-up: ``open_repository``, ``disposable_worktree_async``
  (``create_worktree`` in a worker thread), the per-run HOME and TMPDIR, ``open_sandbox`` (for
  ``restricted``: the host proxy and, in the sandbox, the bridge in front of the child), and
  ``run_child(sandbox.command(["/bin/echo", "x"]))`` until its first stdout byte; then the
  child's teardown and ``remove_worktree``. Once with ``network = "none"``, once with
  ``restricted``.

The clock starts before the repository is opened and stops when the first byte reaches the
caller (the pipe read for the baseline, ``on_stdout`` for asup). The whole cycle, clean-up
included, is reported beside it, and where the time of each path goes, step by step.
``--profile FILE`` also profiles a few more asup runs with cProfile (worker-thread calls
inlined so the profile sees them) and prints the top entries.

**``asup --help``**: ``python -m supervisor.cli.main --help`` and the installed
``<venv>/bin/asup --help`` as subprocesses, against ``python -c pass`` (the interpreter's own
start-up), alternating, with ``python -c "import supervisor.cli.main"`` beside them (the
imports alone), best and median of ``--help-repeat``; then the heaviest imports of
``--help`` from ``python -X importtime``.

State, XDG and HOME dirs live under a temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervisor.sandbox.profile import SandboxProfile

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHILD = ["/bin/echo", "x"]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def make_repo(where: Path, files: int, commits: int) -> Path:
    """A repository of ``files`` small text files in nested directories, ``commits`` commits."""
    repo = where / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    for c in range(commits):
        for i in range(files):
            if c and i % (commits + 1) != c:
                continue  # later commits touch a slice of the files
            path = repo / f"pkg{i % 10}" / f"mod{i // 10 % 5}" / f"file{i}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            body = "".join(f"def f{k}_{c}():\n    return {i * k + c}\n\n" for k in range(20))
            path.write_text(f"# file {i}, revision {c}\n{body}", encoding="utf-8")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"revision {c}")
    return repo


def _stats(values: list[float]) -> tuple[float, float]:
    return min(values), statistics.median(values)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f}"


# --- 1. start to the child's first byte ---------------------------------------------------------


class StartupBench:
    def __init__(self, tmp: Path, repo: Path) -> None:
        self.tmp = tmp
        self.repo = repo
        self.state = tmp / "state"
        self.host_env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(tmp / "home"),
            "LANG": "C.UTF-8",
        }
        self.base_dir = tmp / "base" / "checkout"
        self.base_home = tmp / "base" / "home"
        self.base_tmp = tmp / "base" / "tmp"
        self.base_argv: list[str] = []
        self.base_env: dict[str, str] = {}
        self.runs = 0
        self.phases: dict[str, dict[str, list[float]]] = {}

    def _profile(self, network: str) -> SandboxProfile:
        from supervisor.sandbox.profile import NetworkMode, load_builtin_profile

        profile = load_builtin_profile("read-only")
        mode = NetworkMode(network)
        if mode is profile.network:
            return profile
        return profile.model_copy(
            update={"network": mode, "allowed_domains": (), "denied_domains": ()}
        )

    async def prepare_baseline(self) -> None:
        """asup's argv for ``network = "none"`` against the baseline's own (fixed) paths,
        compiled once, untimed: the baseline then runs exactly the same bwrap mounts."""
        from supervisor.dispatch import open_sandbox
        from supervisor.registry import get_agent
        from supervisor.worktree import Worktree

        self.base_home.mkdir(parents=True)
        self.base_tmp.mkdir(parents=True)
        _git(self.repo, "worktree", "add", "-q", "--detach", str(self.base_dir), "HEAD")
        try:
            common = (self.repo / ".git").resolve()
            wt = Worktree.__new__(Worktree)  # only .path and .common_dir are read
            object.__setattr__(wt, "path", self.base_dir.resolve())
            object.__setattr__(wt, "common_dir", common)
            async with open_sandbox(
                self._profile("none"),
                agent=get_agent("claude-cli"),
                worktree=wt,
                home=self.base_home,
                tmpdir=self.base_tmp,
                host_env=self.host_env,
                install_dirs=[],
            ) as sandbox:
                self.base_argv = sandbox.command(CHILD)
                self.base_env = sandbox.launcher_env
        finally:
            _git(self.repo, "worktree", "remove", "--force", str(self.base_dir))

    def _record(self, path: str, start: float, stamps: list[tuple[str, float]]) -> None:
        phases = self.phases.setdefault(path, {})
        prev = start
        for name, at in stamps:
            phases.setdefault(name, []).append(at - prev)
            prev = at

    def baseline(self) -> tuple[float, float]:
        start = time.perf_counter()
        _git(self.repo, "worktree", "add", "-q", "--detach", str(self.base_dir), "HEAD")
        added = time.perf_counter()
        proc = subprocess.Popen(
            self.base_argv,
            env=self.base_env,
            cwd=self.base_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdout is not None
        first = os.read(proc.stdout.fileno(), 1)
        first_at = time.perf_counter()
        out, err = proc.communicate()
        ended = time.perf_counter()
        if first + out != b"x\n" or proc.returncode != 0:
            raise SystemExit(f"baseline bwrap failed ({proc.returncode}): {err.decode()}")
        _git(self.repo, "worktree", "remove", "--force", str(self.base_dir))
        end = time.perf_counter()
        self._record(
            "baseline",
            start,
            [
                ("git worktree add", added),
                ("spawn to first byte", first_at),
                ("first byte to child end", ended),
                ("git worktree remove", end),
            ],
        )
        return first_at - start, end - start

    async def asup(self, network: str) -> tuple[float, float]:
        from supervisor.dispatch import open_sandbox
        from supervisor.process import run_child
        from supervisor.registry import get_agent
        from supervisor.worktree import disposable_worktree_async, open_repository

        self.runs += 1
        run_id = f"bench-{self.runs}"
        profile = self._profile(network)
        agent = get_agent("claude-cli")
        stamps: list[tuple[str, float]] = []
        first: list[float] = []
        out: list[bytes] = []

        def on_stdout(data: bytes) -> None:
            if not first:
                first.append(time.perf_counter())
            out.append(data)

        def stamp(name: str) -> None:
            stamps.append((name, time.perf_counter()))

        start = time.perf_counter()
        repo = open_repository(self.repo)
        stamp("open_repository")
        async with disposable_worktree_async(repo, run_id=run_id, state_dir=self.state) as wt:
            stamp("create_worktree")
            run_dir = self.state / "runs" / run_id
            home, tmpdir = run_dir / "home", run_dir / "tmp"
            home.mkdir(mode=0o700, parents=True)
            tmpdir.mkdir(mode=0o700)
            async with open_sandbox(
                profile,
                agent=agent,
                worktree=wt,
                home=home,
                tmpdir=tmpdir,
                host_env=self.host_env,
                install_dirs=[],
            ) as sandbox:
                stamp("open_sandbox (+HOME/TMPDIR)")
                argv = sandbox.command(CHILD)
                env = sandbox.launcher_env
                stamp("compile argv + env")
                result = await run_child(argv, env=env, cwd=wt.path, on_stdout=on_stdout, grace=1.0)
                if first:
                    stamps.append(("spawn to first byte", first[0]))
                stamp("first byte to child end + sweep")
            stamp("close sandbox (proxy)")
        stamp("remove_worktree")
        shutil.rmtree(run_dir)
        end = time.perf_counter()
        if b"".join(out) != b"x\n" or result.exit_code != 0 or not first:
            raise SystemExit(f"asup child failed ({result.exit_code}): {result.stderr_tail}")
        self._record(f"asup, network={network}", start, stamps)
        return first[0] - start, end - start


PATHS = ("baseline", "none", "restricted")


def _label(path: str) -> str:
    return "baseline (git + bwrap)" if path == "baseline" else f"asup, network={path}"


def run_startup(args: argparse.Namespace, tmp: Path) -> None:
    import anyio

    repo = make_repo(tmp, args.files, args.commits)
    bench = StartupBench(tmp, repo)

    async def main() -> dict[str, list[tuple[float, float]]]:
        await bench.prepare_baseline()
        timings: dict[str, list[tuple[float, float]]] = {path: [] for path in PATHS}
        for i in range(args.warmup + args.repeat):
            order = PATHS[i % len(PATHS) :] + PATHS[: i % len(PATHS)]  # rotate who goes first
            for path in order:
                t = bench.baseline() if path == "baseline" else await bench.asup(path)
                if i >= args.warmup:
                    timings[path].append(t)
        return timings

    timings = anyio.run(main)
    warm = {name: {k: v[args.warmup :] for k, v in ph.items()} for name, ph in bench.phases.items()}
    print(
        f"\nstart to the child's first stdout byte; {args.files} files, {args.commits} commits;"
        f" best and median of {args.repeat} (ms)"
    )
    print(
        f"{'path':<26} {'best':>7} {'median':>7} {'ratio':>6} {'ratio':>6} {'+ms':>6}"
        f" | {'cycle':>7} {'median':>7} {'ratio':>6} {'ratio':>6} {'+ms':>6}"
    )
    base = timings["baseline"]
    for path in PATHS:
        runs = timings[path]
        cells = []
        for k in (0, 1):  # first byte, whole cycle
            lo, med = _stats([t[k] for t in runs])
            base_lo, base_med = _stats([t[k] for t in base])
            paired = statistics.median(t[k] - b[k] for t, b in zip(runs, base, strict=True))
            cells.append(
                f"{_ms(lo)} {_ms(med)} {lo / base_lo:>5.2f}x {med / base_med:>5.2f}x"
                f" {paired * 1000:>6.1f}"
            )
        print(f"{_label(path):<26} {cells[0]} | {cells[1]}")
    print(
        "ratio: asup / baseline, best / best and median / median; +ms: the median of the"
        " differences between the two in the same round"
    )
    print("cycle: the same, up to the worktree's removal")
    for name, phases in warm.items():
        print(f"\n{name}: where the time goes (ms, best / median)")
        for phase, values in phases.items():
            lo, med = _stats(values)
            print(f"  {phase:<32} {_ms(lo)} {_ms(med)}")
    if args.profile:
        profile_asup(bench, args)


def profile_asup(bench: StartupBench, args: argparse.Namespace) -> None:
    """cProfile of extra asup runs (not in the table above), with every ``to_thread`` call
    inlined on the event loop's thread so the profile sees the worktree's git work and the
    process-tree sweeps too."""
    import anyio
    import anyio.to_thread

    real = anyio.to_thread.run_sync

    async def inline(fn: Callable[..., object], *fn_args: object, **_: object) -> object:
        return fn(*fn_args)

    profiler = cProfile.Profile()

    async def main() -> None:
        for network in ("none", "restricted"):
            for _ in range(args.profile_runs):
                profiler.enable()
                await bench.asup(network)
                profiler.disable()

    anyio.to_thread.run_sync = inline  # type: ignore[assignment]
    try:
        anyio.run(main)
    finally:
        anyio.to_thread.run_sync = real
    profiler.dump_stats(args.profile)
    print(
        f"\ncProfile of {args.profile_runs} asup runs per network mode (to_thread inlined),"
        f" top by cumulative time; written to {args.profile}"
    )
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(r"supervisor/(worktree|process|dispatch)", args.top)
    print("top by own time (the costs themselves)")
    stats.sort_stats("tottime").print_stats(args.top)


def run_probe(args: argparse.Namespace, env: dict[str, str]) -> None:
    """``dispatch_run`` also runs the vendor CLI's ``--version`` (``probe_agent``) before every
    run, outside the path timed above; how long that takes, for the agents installed."""
    from supervisor.probe import ProbeState, probe_agent
    from supervisor.registry import get_agent

    path = f"{ROOT / 'vendor' / 'node_modules' / '.bin'}:{env.get('PATH', '')}"
    host_env = {**env, "PATH": path}
    lines = []
    for agent_id in ("claude-cli", "codex-cli"):
        agent = get_agent(agent_id)
        times = []
        for _ in range(args.probe_repeat):
            start = time.perf_counter()
            probe = probe_agent(agent, host_env)
            times.append(time.perf_counter() - start)
            if probe.state is not ProbeState.INSTALLED:
                break
        else:
            lo, med = _stats(times)
            lines.append(f"  probe_agent({agent_id}) {probe.version}: {_ms(lo)} {_ms(med)}")
    if lines:
        print(
            f"\nper run, before the worktree (dispatch_run, not in the table above):"
            f" best / median of {args.probe_repeat} (ms)"
        )
        print("\n".join(lines))


# --- 2. asup --help -----------------------------------------------------------------------------


def _wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def run_help(args: argparse.Namespace, env: dict[str, str]) -> None:
    py = sys.executable
    commands = {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import supervisor.cli.main'": [py, "-c", "import supervisor.cli.main"],
        "python -m supervisor.cli.main --help": [py, "-m", "supervisor.cli.main", "--help"],
        "asup --help": [str(BIN / "asup"), "--help"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for i in range(1 + args.help_repeat):  # round 0 warms the page cache, not counted
        for name in names[i % len(names) :] + names[: i % len(names)]:
            t = _wall(commands[name])
            if i:
                times[name].append(t)
    base = _stats(times["python -c pass"])
    print(f"\n`--help` wall time, best and median of {args.help_repeat} (ms)")
    print(f"{'command':<40} {'best':>7} {'median':>7} {'ratio best':>10} {'ratio med':>10}")
    for name in names:
        lo, med = _stats(times[name])
        print(f"{name:<40} {_ms(lo)} {_ms(med)} {lo / base[0]:>9.2f}x {med / base[1]:>9.2f}x")

    proc = subprocess.run(
        [py, "-X", "importtime", "-m", "supervisor.cli.main", "--help"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    imports: list[tuple[int, int, str]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        imports.append((int(cumulative), int(own), name.rstrip()))
    top = [i for i in imports if not i[2].startswith("  ")]  # top-level imports only
    total = sum(i[0] for i in top) / 1000
    print(
        f"\nheaviest top-level imports of `--help` (python -X importtime, one run, ms);"
        f" all, the interpreter's own included: {total:.1f} ms"
    )
    for cumulative_us, own_us, name in sorted(top, reverse=True)[: args.top]:
        print(f"  {cumulative_us / 1000:7.1f} cumulative {own_us / 1000:6.1f} self  {name.strip()}")


def _version(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_startup")
    parser.add_argument("--repeat", type=int, default=15, help="measured rounds of each path")
    parser.add_argument("--warmup", type=int, default=2, help="uncounted rounds first")
    parser.add_argument("--help-repeat", type=int, default=20)
    parser.add_argument("--files", type=int, default=300, help="files in the sample repo")
    parser.add_argument("--commits", type=int, default=3)
    parser.add_argument("--top", type=int, default=12, help="imports to list")
    parser.add_argument("--profile", metavar="FILE", help="also profile asup runs (cProfile)")
    parser.add_argument("--profile-runs", type=int, default=5)
    parser.add_argument("--probe-repeat", type=int, default=5, help="probe_agent rounds")
    parser.add_argument(
        "--tmp", metavar="DIR", help="where the sample repo and state go (default: $TMPDIR)"
    )
    parser.add_argument("--only", choices=("startup", "help"), help="run one part")
    args = parser.parse_args()

    if not shutil.which("bwrap") or not shutil.which("git"):
        raise SystemExit("this benchmark needs bwrap and git on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="asup-bench-", dir=args.tmp)).resolve()
    env = {**os.environ, **GIT_ENV}
    for var, sub in (
        ("HOME", "home"),
        ("XDG_STATE_HOME", "xdg/state"),
        ("XDG_CONFIG_HOME", "xdg/config"),
        ("XDG_CACHE_HOME", "xdg/cache"),
        ("XDG_DATA_HOME", "xdg/data"),
    ):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(tmp / sub)
    os.environ.update(env)
    versions = [_version(["bwrap", "--version"]), _version(["git", "--version"])]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {', '.join(versions)}")
    print(f"sample repo and state under {tmp}")
    try:
        if args.only in (None, "startup"):
            run_startup(args, tmp)
            run_probe(args, env)
        if args.only in (None, "help"):
            run_help(args, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
