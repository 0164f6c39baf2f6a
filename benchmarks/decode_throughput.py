"""Decode+fold throughput against a bare ``json.loads`` loop over the same transcript.

``python -m benchmarks.decode_throughput [--sizes 1,200] [--agents claude-cli,codex-cli]``

A large transcript is built by repeating every recorded transcript of an agent (real vendor
output from ``fixtures/external``) until it reaches the size. Each measurement runs in a fresh
child process, so its peak RSS is its own: the baseline reads the file in 1 MiB blocks, splits
lines and ``json.loads`` each one; the codec path reads the same blocks and runs
``decode_transcript(..., keep_events=False)`` (codec + fold, constant memory). For an ACP agent
(``claude-acp``, ``codex-acp``, ``gemini-acp``, ``opencode-acp``) the transcript is recorded
JSON-RPC (one ``{"direction", "message"}`` record a line) and the path is ``json.loads`` of each
line, ``AcpFold.feed_record`` and the run summary's ``Folder``: the same work ``asup run`` does
for each message. The runs of both alternate, best of ``--repeat`` counts. The ratio is codec
throughput / baseline throughput.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "external"
OUT = ROOT / "benchmarks" / "out"
BLOCK = 1 << 20


def build_transcript(agent: str, size_mb: int) -> Path:
    target = OUT / f"{agent}-{size_mb}MB.jsonl"
    want = size_mb * 1_000_000
    if target.exists() and target.stat().st_size >= want:
        return target
    parts = []
    for path in sorted((FIXTURES / agent).glob("*/*.jsonl")):
        data = path.read_bytes()
        if not data.endswith(b"\n"):
            data += b"\n"
        parts.append(data)
    unit = b"".join(parts)
    if not unit:
        raise SystemExit(f"no recorded transcripts for {agent} under {FIXTURES}")
    OUT.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as fh:
        written = 0
        while written < want:
            fh.write(unit)
            written += len(unit)
    return target


def _blocks(path: Path):  # type: ignore[no-untyped-def]
    with path.open("rb") as fh:
        while block := fh.read(BLOCK):
            yield block


def child(mode: str, agent: str, path: Path) -> dict[str, float | int]:
    """Runs in a fresh process: one measurement (imports happen before the clock starts)."""
    from supervisor.codecs import decode_transcript

    start = time.perf_counter()
    if mode == "baseline":
        loads = json.loads
        rest = b""
        lines = 0
        for block in _blocks(path):
            chunk = rest + block
            parts = chunk.split(b"\n")
            rest = parts.pop()
            for line in parts:
                if line:
                    loads(line)
                    lines += 1
        if rest:
            loads(rest)
        count = lines
    elif agent.endswith("-acp"):
        import orjson

        from supervisor.acp.fold import AcpFold
        from supervisor.summary import Folder

        fold, folder = AcpFold(), Folder()
        rest = b""
        for block in _blocks(path):
            chunk = rest + block
            parts = chunk.split(b"\n")
            rest = parts.pop()
            for line in parts:
                if line:
                    for ev in fold.feed_record(orjson.loads(line)):
                        folder.add(ev)
        for ev in fold.close():
            folder.add(ev)
        count = folder.summary().events
    else:
        run = decode_transcript(agent, _blocks(path), exit_code=0, keep_events=False)
        count = run.summary.events
    elapsed = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": elapsed, "peak_rss_mb": peak_kb / 1024, "count": count}


def measure(mode: str, agent: str, path: Path) -> dict[str, float | int]:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.decode_throughput", "--child", mode, agent, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    result: dict[str, float | int] = json.loads(proc.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.decode_throughput")
    parser.add_argument("--sizes", default="1,200", help="transcript sizes in MB")
    parser.add_argument("--agents", default="claude-cli,codex-cli")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--child", nargs=3, metavar=("MODE", "AGENT", "PATH"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        mode, agent, path = args.child
        print(json.dumps(child(mode, agent, Path(path))))
        return 0
    print(f"python {sys.version.split()[0]}, best of {args.repeat}, 1 MiB reads")
    header = (
        f"{'agent':<10} {'size':>6} {'baseline MB/s':>14} {'codec MB/s':>11} {'ratio':>6} "
        f"{'base RSS':>9} {'codec RSS':>10} {'events':>10}"
    )
    print(header)
    for agent in args.agents.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            path = build_transcript(agent, size)
            mb = path.stat().st_size / 1e6
            best: dict[str, dict[str, float | int]] = {}
            for _ in range(args.repeat):
                for mode in ("baseline", "codec"):
                    r = measure(mode, agent, path)
                    if mode not in best or r["seconds"] < best[mode]["seconds"]:
                        best[mode] = r
            base, codec = best["baseline"], best["codec"]
            base_tp, codec_tp = mb / base["seconds"], mb / codec["seconds"]
            print(
                f"{agent:<10} {mb:>5.0f}M {base_tp:>14.1f} {codec_tp:>11.1f} "
                f"{codec_tp / base_tp:>5.2f}x {base['peak_rss_mb']:>7.1f}MB "
                f"{codec['peak_rss_mb']:>8.1f}MB {codec['count']:>10}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
