"""Claude Code (``claude -p``) in the lab.

The argv comes from :func:`supervisor.codecs.claude_cli.build_argv`; the env points the CLI at
the fake server with a dummy key and turns off every kind of non-essential traffic.
"""

from __future__ import annotations

import json
import uuid
from typing import ClassVar

from supervisor.codecs.claude_cli import build_argv
from supervisor.lab.agents.base import AgentLab, RunContext, base_env
from supervisor.lab.scenarios import Step

__all__ = ["DUMMY_KEY", "MODEL", "ClaudeLab"]

MODEL = "claude-sonnet-4-5"
DUMMY_KEY = "sk-ant-lab-dummy-key-not-a-secret"


class ClaudeLab(AgentLab):
    agent_id: ClassVar[str] = "claude-cli"
    binary_name: ClassVar[str] = "claude"
    wire_paths: ClassVar[tuple[str, ...]] = ("/v1/messages",)

    def prepare_home(self, ctx: RunContext) -> None:
        ctx.home.mkdir(parents=True, exist_ok=True)
        ctx.tmpdir.mkdir(parents=True, exist_ok=True)

    def env(self, ctx: RunContext) -> dict[str, str]:
        env = base_env(ctx)
        env.update(
            {
                "ANTHROPIC_BASE_URL": ctx.base_url,
                "ANTHROPIC_API_KEY": DUMMY_KEY,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "DISABLE_AUTOUPDATER": "1",
            }
        )
        env.update(ctx.scenario.env)
        return env

    def argv(self, step: Step, ctx: RunContext, *, session_id: str | None) -> list[str]:
        return build_argv(
            step.prompt,
            mode=ctx.scenario.mode,
            model=MODEL,
            session_id=session_id if step.session == "new" else None,
            resume=session_id if step.session == "resume" else None,
            binary=str(self.binary()),
        )

    def new_session_id(self) -> str | None:
        return str(uuid.uuid4())

    def session_id_from_stdout(self, stdout: bytes) -> str | None:
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("session_id"), str):
                return str(event["session_id"])
        return None
