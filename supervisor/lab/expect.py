"""Expected folded runs of the recorded fixtures, and the scenario check shared by tests.

Every recorded transcript ``<stem>.jsonl`` has a ``<stem>.expected.json`` beside it::

    {"transcript": "<stem>.jsonl", "exit_code": 1, "decoded": {…DecodedRun.to_dict()…},
     "unknown_lines": [{"sample": "…", "reason": "why this line is not decoded"}]}

``decoded`` pins what the codec makes of the real bytes (a regression net); ``unknown_lines``
lists every line the codec does not know, each with a reason a person wrote — an entry without a
reason fails the replay suite. Regenerate after a deliberate codec change and review the diff:

``python -m supervisor.lab.expect [--agent ID] [--check]``

:func:`scenario_mismatches` checks decoded runs against a scenario's own expectations (written
with the scenario, independent of any codec); the offline replay suite and the live e2e suite
both use it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from supervisor.codecs import CODECS, DecodedRun, decode_transcript
from supervisor.events import Unrecognized

__all__ = [
    "FIXTURES",
    "Transcript",
    "decode_fixture",
    "expected_for",
    "scenario_mismatches",
    "transcripts",
]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "external"


class Transcript:
    """One recorded stdout file and what its meta says about the invocation that printed it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.agent = path.parents[1].name
        self.version = path.parent.name
        stem = path.name.removesuffix(".jsonl")
        self.scenario, _, step = stem.partition(".step")
        self.meta_path = path.with_name(f"{self.scenario}.meta.json")
        self.expected_path = path.with_name(f"{stem}.expected.json")
        meta: dict[str, Any] = json.loads(self.meta_path.read_text())
        self.meta = meta
        step_meta = meta["steps"][int(step) - 1] if step else meta
        self.exit_code: int = step_meta["exit_code"]
        self.stderr_tail: str = step_meta["stderr_tail"]
        self.is_last_step = not step

    def __repr__(self) -> str:
        return f"{self.agent}/{self.version}/{self.path.name}"


def transcripts(root: Path = FIXTURES, agent: str | None = None) -> list[Transcript]:
    """The recorded stdout transcripts of the line-stream agents (those with a codec). ACP
    recordings (JSON-RPC both ways) sit beside them and are replayed by their own tests."""
    pattern = f"{agent}/*/*.jsonl" if agent else "*/*/*.jsonl"
    return [Transcript(p) for p in sorted(root.glob(pattern)) if p.parents[1].name in CODECS]


def decode_fixture(t: Transcript) -> DecodedRun:
    return decode_transcript(
        t.agent, t.path.read_bytes(), exit_code=t.exit_code, stderr_tail=t.stderr_tail
    )


def expected_for(t: Transcript, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The expectation file's content for ``t``, keeping reasons already written by a person."""
    run = decode_fixture(t)
    reasons = {u["sample"]: u.get("reason", "") for u in (previous or {}).get("unknown_lines", [])}
    unknown = [
        {"sample": e.raw[:500], "reason": reasons.get(e.raw[:500], "")}
        for e in run.events
        if isinstance(e, Unrecognized)
    ]
    return {
        "transcript": t.path.name,
        "exit_code": t.exit_code,
        "decoded": run.to_dict(),
        "unknown_lines": unknown,
    }


def _path_matches(decoded: str, expected: str) -> bool:
    return decoded == expected or decoded.endswith("/" + expected)


def scenario_mismatches(expect: dict[str, Any], runs: list[DecodedRun]) -> list[str]:
    """How the decoded runs of a scenario (every step, in order) differ from what the scenario
    says a correct run shows. Empty when they agree."""
    last = runs[-1]
    out: list[str] = []
    if last.outcome.status.value != expect["status"]:
        out.append(f"outcome {last.outcome.status.value}, expected {expect['status']}")
    kind = last.outcome.failure_kind.value if last.outcome.failure_kind else None
    if kind != expect["failure_kind"]:
        out.append(f"failure kind {kind}, expected {expect['failure_kind']}")
    calls = [c for r in runs for c in r.summary.tool_calls]
    names = [c.name for c in calls]
    if names != list(expect["tools"]):
        out.append(f"tool calls {names}, expected {expect['tools']}")
    failed = [c.name for c in calls if c.ok is False]
    if failed != list(expect["failed_tools"]):
        out.append(f"failed tool calls {failed}, expected {expect['failed_tools']}")
    # A change the stream reports must be one the scenario expects on disk, of the same kind.
    # (Not every change on disk is in the stream: a file a shell command wrote is not.)
    for p, k in ((p, k) for r in runs for p, k in r.summary.file_changes):
        kinds = [c for path, c in expect["files"].items() if _path_matches(p, path)]
        if kinds != [k]:
            out.append(f"decoded change {k} {p}; the scenario expects {kinds or 'none'}")
    final = last.summary.final_text or ""
    for fragment in expect["final_text_contains"]:
        if fragment not in final:
            out.append(f"final text {final!r} lacks {fragment!r}")
    denied = sorted(d.tool for r in runs for d in r.summary.permission_denials)
    if denied != sorted(expect["denied_tools"]):
        out.append(f"permission denials {denied}, expected {sorted(expect['denied_tools'])}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m supervisor.lab.expect")
    parser.add_argument("--agent")
    parser.add_argument("--check", action="store_true", help="only report stale expectations")
    args = parser.parse_args(argv)
    stale = 0
    for t in transcripts(agent=args.agent):
        previous = json.loads(t.expected_path.read_text()) if t.expected_path.exists() else None
        fresh = expected_for(t, previous)
        if fresh == previous:
            continue
        stale += 1
        print(f"{'stale' if args.check else 'wrote'}: {t.expected_path}")
        if not args.check:
            t.expected_path.write_text(json.dumps(fresh, indent=2, ensure_ascii=False) + "\n")
        missing = [u for u in fresh["unknown_lines"] if not u["reason"]]
        if missing:
            print(f"  {len(missing)} unknown line(s) need a reason in {t.expected_path.name}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
