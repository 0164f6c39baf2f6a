"""``python -m supervisor.lab.acp_record_opencode [--scenario NAME]… [--out DIR] [--keep]``: the
ACP recorder (:mod:`supervisor.lab.acp_record`) for ``opencode acp --pure``, the same as
``acp_record --agent opencode-acp``. The agent's half is
:mod:`supervisor.lab.acp_agents.opencode`."""

from __future__ import annotations

import sys

from supervisor.lab.acp_record import main as _main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return _main(
        ["--agent", "opencode-acp", *args], prog="python -m supervisor.lab.acp_record_opencode"
    )


if __name__ == "__main__":
    sys.exit(main())
