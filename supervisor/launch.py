"""How to launch each line-stream agent: argv, the agent's own environment and the files it needs
under its per-run HOME. Pure: the dispatcher writes the files and spawns.

What goes here is what the lab measured on the pinned binaries (docs/lab.md,
docs/lab-codex.md): claude looks up its vendor's hosts for bootstrap, metrics and an MCP
registry unless told not to; codex runs ``git ls-remote`` against a code host unless plugins
are off, sends metrics unless analytics and otel are off, and retries a dead server forever
unless told not to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from supervisor.codecs import claude_cli, codex_cli
from supervisor.errors import Refusal
from supervisor.registry import AgentSpec, Mode

__all__ = ["LaunchPlan", "endpoint_host", "plan_launch"]

CODEX_DEFAULT_BASE_URL = "https://api.openai.com/v1"
CODEX_PROVIDER = "asup"


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """``argv`` with the bare binary name first; ``env``: variables the agent needs on top of the
    allowlisted environment; ``home_files``: path relative to the per-run HOME → content."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    home_files: dict[str, str] = field(default_factory=dict)


def endpoint_host(endpoint: str) -> tuple[str, int]:
    """Host and port of a model endpoint URL; a refusal naming the fix when it is not one."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refusal(
            f"--endpoint {endpoint!r} is not an http(s) URL with a host; "
            "give one like https://gateway.example.com or http://127.0.0.1:8080",
            code="bad_endpoint",
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_config(
    base_url: str,
    key_var: str,
    *,
    provider: str = CODEX_PROVIDER,
    provider_name: str = "model endpoint chosen by asup",
    model: str | None = None,
    retries: int = 1,
) -> str:
    """codex's ``config.toml``: one custom provider (the endpoint and the key's variable) and
    everything that reaches out on its own turned off — plugins (``git ls-remote`` against a
    code host), analytics, feedback, otel exporters, update checks, endless reconnects."""
    head = [f"model = {_toml(model)}"] if model is not None else []
    return "\n".join(
        [
            *head,
            f"model_provider = {_toml(provider)}",
            "check_for_update_on_startup = false",
            "",
            f"[model_providers.{provider}]",
            f"name = {_toml(provider_name)}",
            f"base_url = {_toml(base_url)}",
            'wire_api = "responses"',
            f"env_key = {_toml(key_var)}",
            f"request_max_retries = {retries}",
            f"stream_max_retries = {retries}",
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[feedback]",
            "enabled = false",
            "",
            "[otel]",
            'exporter = "none"',
            'metrics_exporter = "none"',
            'trace_exporter = "none"',
            "",
            "[features]",
            "plugins = false",
            "remote_plugin = false",
            "apps = false",
            "unbounded_connection_retries = false",
            "",
        ]
    )


# Claude Code and the Claude Agent SDK: no traffic but the model API's.
CLAUDE_QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
}


def check_launch(agent: AgentSpec, mode: Mode, endpoint: str | None) -> None:
    """What every launch recipe refuses first: a mode the agent lacks, an unusable endpoint."""
    if mode not in agent.modes:
        raise Refusal(
            f"{agent.id} does not support {mode.value} runs yet (it supports "
            f"{', '.join(m.value for m in agent.modes)})",
            code="mode_not_implemented",
        )
    if endpoint is not None:
        endpoint_host(endpoint)


def plan_launch(
    agent: AgentSpec,
    *,
    prompt: str,
    mode: Mode,
    home: str,
    endpoint: str | None = None,
    model: str | None = None,
    max_turns: int | None = None,
) -> LaunchPlan:
    check_launch(agent, mode, endpoint)
    match agent.id:
        case "claude-cli":
            env = dict(CLAUDE_QUIET_ENV)
            if endpoint is not None:
                env["ANTHROPIC_BASE_URL"] = endpoint.rstrip("/")
            argv = claude_cli.build_argv(
                prompt, mode=mode, model=model, max_turns=max_turns, binary=agent.binary
            )
            return LaunchPlan(argv, env)
        case "codex-cli":
            if max_turns is not None:
                raise Refusal(
                    "codex-cli has no turn limit of its own and asup cannot count its model "
                    "turns from its stream; bound the run with --max-runtime instead",
                    code="max_turns_unsupported",
                )
            base = endpoint.rstrip("/") + "/v1" if endpoint is not None else None
            config = codex_config(base or CODEX_DEFAULT_BASE_URL, agent.signing_key)
            env = {"CODEX_HOME": f"{home.rstrip('/')}/.codex"}
            # asup's sandbox contains codex; codex's own cannot nest inside it.
            argv = codex_cli.build_argv(
                prompt, mode=mode, model=model, binary=agent.binary, own_sandbox=False
            )
            return LaunchPlan(argv, env, {".codex/config.toml": config})
        case _:
            raise Refusal(
                f"asup has no launch recipe for {agent.id} yet", code="agent_not_implemented"
            )
