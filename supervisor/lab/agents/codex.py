"""The lab half for OpenAI Codex (``codex exec --json``, codex-cli 0.171.0).

Codex reads its whole configuration from ``$CODEX_HOME/config.toml``. Each run gets its own
CODEX_HOME (``<home>/.codex``) holding a provider ``mock`` that points at the fake server's
Responses endpoint (``<base_url>/v1``, wire ``responses``) and reads its key from
``MOCK_API_KEY`` (a dummy), with every phone-home path off: update check, analytics, feedback,
OpenTelemetry exporters, plugins (else ``git ls-remote`` to github), apps, and unbounded
connection retries (else a dead server is retried forever). Provider retries are 0 so a fault
surfaces on its first occurrence.

CODEX_HOME must not sit under ``$TMPDIR``: codex then refuses to create its helper binaries
(``codex-linux-sandbox``, ``apply_patch`` aliases), every sandboxed command fails and the run
still exits 0. The check is ``CODEX_HOME.starts_with(std::env::temp_dir())``, i.e. ``$TMPDIR``
when set (the lab sets it to ``<workdir>/tmp``), else ``/tmp``: ``<home>/.codex`` is safe even
when the work dir itself is under /tmp. A scenario may set ``CODEX_HOME`` in its ``env``
(placeholders such as ``<tmp>`` are bound) to provoke exactly that failure.

The argv comes from :func:`supervisor.codecs.codex_cli.build_argv`, which puts ``resume <id>``
after every ``exec`` option (``codex exec … -s <mode> resume <id> <msg>``): the ``resume``
subcommand of 0.171.0 has no ``-s``, and this order keeps the sandbox mode of the first run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from supervisor.codecs.codex_cli import build_argv
from supervisor.lab.agents.base import AgentLab, RunContext, base_env
from supervisor.lab.scenarios import Step
from supervisor.launch import codex_config

__all__ = ["DUMMY_KEY", "MODEL", "CodexLab", "render_config"]

MODEL = "gpt-5.5"
DUMMY_KEY = "lab-dummy-key"
PROVIDER = "mock"
KEY_ENV = "MOCK_API_KEY"


def _toml_str(value: str) -> str:
    """A TOML basic string (JSON string escapes are valid TOML escapes)."""
    return json.dumps(value)


def render_config(base_url: str) -> str:
    """``config.toml`` for a run against the fake server at ``base_url`` (no path): the
    product's own codex config (:func:`supervisor.launch.codex_config`) with the lab's provider
    and no retries."""
    return codex_config(
        base_url.rstrip("/") + "/v1",
        KEY_ENV,
        provider=PROVIDER,
        provider_name="Lab fake model server",
        model=MODEL,
        retries=0,
    )


def _bind(value: str, ctx: RunContext) -> str:
    for placeholder, path in ctx.placeholders().items():
        value = value.replace(placeholder, path)
    return value


class CodexLab(AgentLab):
    agent_id: ClassVar[str] = "codex-cli"
    binary_name: ClassVar[str] = "codex"
    wire_paths: ClassVar[tuple[str, ...]] = ("/v1/responses",)

    def codex_home(self, ctx: RunContext) -> Path:
        """``<home>/.codex``, or the scenario's ``CODEX_HOME`` with placeholders bound."""
        override = ctx.scenario.env.get("CODEX_HOME")
        if override:
            return Path(_bind(override, ctx))
        return ctx.home / ".codex"

    def prepare_home(self, ctx: RunContext) -> None:
        home = self.codex_home(ctx)
        home.mkdir(parents=True, exist_ok=True)
        ctx.tmpdir.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(render_config(ctx.base_url), encoding="utf-8")

    def env(self, ctx: RunContext) -> dict[str, str]:
        env = base_env(ctx)
        env[KEY_ENV] = DUMMY_KEY
        env.update({name: _bind(value, ctx) for name, value in ctx.scenario.env.items()})
        env["CODEX_HOME"] = str(self.codex_home(ctx))
        return env

    def argv(self, step: Step, ctx: RunContext, *, session_id: str | None) -> list[str]:
        prompt = _bind(step.prompt, ctx)
        resume = None
        if step.session == "resume":
            if session_id is None:
                raise ValueError(f"scenario {ctx.scenario.name!r}: a resume step needs a thread id")
            resume = session_id
        return build_argv(
            prompt, mode=ctx.scenario.mode, model=MODEL, resume=resume, binary=str(self.binary())
        )

    def session_id_from_stdout(self, stdout: bytes) -> str | None:
        """The ``thread_id`` of the first ``thread.started`` line."""
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == "thread.started":
                thread_id = event.get("thread_id")
                return thread_id if isinstance(thread_id, str) else None
        return None
