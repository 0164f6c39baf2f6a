"""``asup replay``: decode a recorded transcript offline."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from supervisor.codecs import CODECS, decode_transcript

CHUNK = 1 << 20


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    while True:
        block = stream.read(CHUNK)
        if not block:
            return
        yield block


def _fail(reason: str) -> int:
    print(f"asup replay: {reason}", file=sys.stderr)
    return 2


def run_replay(
    *, agent: str, transcript: str, exit_code: int, stderr_path: str | None, as_json: bool
) -> int:
    if agent not in CODECS:
        return _fail(f"unknown agent {agent!r}: known agents are {', '.join(sorted(CODECS))}")
    stderr_tail = ""
    if stderr_path is not None:
        try:
            stderr_tail = Path(stderr_path).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return _fail(f"cannot read the stderr file {stderr_path}: {exc.strerror}")
    try:
        if transcript == "-":
            run = decode_transcript(
                agent,
                _chunks(sys.stdin.buffer),
                exit_code=exit_code,
                stderr_tail=stderr_tail,
                keep_events=False,
            )
        else:
            with open(transcript, "rb") as fh:
                run = decode_transcript(
                    agent,
                    _chunks(fh),
                    exit_code=exit_code,
                    stderr_tail=stderr_tail,
                    keep_events=False,
                )
    except IsADirectoryError:
        return _fail(f"{transcript} is a directory; give the path of a .jsonl transcript")
    except OSError as exc:
        return _fail(f"cannot read the transcript {transcript}: {exc.strerror}")
    data = run.to_dict()
    if as_json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        from supervisor.cli.views import print_replay

        print_replay(data)
    return 0
