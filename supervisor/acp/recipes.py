"""How to launch each ACP agent: argv, its own environment and the files it needs under its
per-run HOME. Pure: no I/O, no clock (the caller passes
``now_ms``), no env; the dispatcher writes the files and the client spawns.

What goes here is what the lab measured on the pinned binaries (VENDORS.md, docs/acp.md):

- claude-agent-acp 0.23.1: ``ANTHROPIC_BASE_URL``, a per-run ``CLAUDE_CONFIG_DIR``,
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, telemetry / error reporting / auto-update
  off, and ``$CLAUDE_CONFIG_DIR/plugins/blocklist.json`` with a fresh ``fetchedAt`` (else it
  fetches a plugin blocklist from a code host; the file counts as fresh for an hour).
- codex-acp 0.16.0: ``CODEX_HOME`` holding codex's offline config (as for ``codex exec``) plus
  ``approval_policy = "untrusted"`` (it asks before anything not known to be safe),
  ``supports_websockets = false`` on the provider, ``features.shell_snapshot = false`` (a
  snapshot holds the child's environment, the key included), and a model name it knows (an
  unknown one silently drops ``apply_patch``). Its own sandbox cannot nest inside asup's, so it
  runs with ``sandbox_mode = "danger-full-access"``: asup's sandbox is its boundary, as for
  codex-cli.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from supervisor.errors import Refusal
from supervisor.launch import CODEX_DEFAULT_BASE_URL, codex_config, endpoint_host
from supervisor.registry import AgentSpec, Mode

__all__ = ["CLAUDE_BLOCKLIST", "CODEX_ACP_MODEL", "AcpRecipe", "acp_recipe"]

CLAUDE_BLOCKLIST = ".claude/plugins/blocklist.json"
CODEX_ACP_MODEL = "gpt-5.3-codex"


@dataclass(frozen=True, slots=True)
class AcpRecipe:
    """``argv`` with the bare binary name first; ``env``: variables on top of the allowlisted
    environment; ``home_files``: path relative to the per-run HOME → content."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    home_files: dict[str, str] = field(default_factory=dict)


def _codex_acp_config(base_url: str, key_var: str, model: str) -> str:
    config = codex_config(base_url, key_var)
    # top-level keys must come before the first table
    head = "\n".join(
        [
            f"model = {json.dumps(model)}",
            'approval_policy = "untrusted"',
            'sandbox_mode = "danger-full-access"',
            "",
        ]
    )
    wire = 'wire_api = "responses"\n'
    config = config.replace(wire, wire + "supports_websockets = false\n", 1)
    # [features] is the last table: no shell snapshots (they hold the child's whole
    # environment, the signing key included, in CODEX_HOME, i.e. the run store)
    return head + config + "shell_snapshot = false\n"


def acp_recipe(
    agent: AgentSpec,
    *,
    mode: Mode,
    home: str,
    now_ms: int,
    endpoint: str | None = None,
    model: str | None = None,
    max_turns: int | None = None,
) -> AcpRecipe:
    """The launch recipe of ``agent`` for one run. ``home`` is the per-run HOME as the child
    sees it; ``now_ms`` the wall clock in milliseconds (claude's blocklist timestamp)."""
    if mode not in agent.modes:
        raise Refusal(
            f"{agent.id} does not support {mode.value} runs yet (it supports "
            f"{', '.join(m.value for m in agent.modes)})",
            code="mode_not_implemented",
        )
    if max_turns is not None:
        raise Refusal(
            f"{agent.id} takes no turn limit over ACP; bound the run with --max-runtime instead",
            code="max_turns_unsupported",
        )
    if endpoint is not None:
        endpoint_host(endpoint)
    home = home.rstrip("/")
    match agent.id:
        case "claude-acp":
            env = {
                "CLAUDE_CONFIG_DIR": f"{home}/.claude",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "DISABLE_AUTOUPDATER": "1",
            }
            if endpoint is not None:
                env["ANTHROPIC_BASE_URL"] = endpoint.rstrip("/")
            if model is not None:
                env["ANTHROPIC_MODEL"] = model
            blocklist = json.dumps({"fetchedAt": now_ms, "plugins": []})
            return AcpRecipe([agent.binary], env, {CLAUDE_BLOCKLIST: blocklist})
        case "codex-acp":
            base = endpoint.rstrip("/") + "/v1" if endpoint is not None else CODEX_DEFAULT_BASE_URL
            config = _codex_acp_config(base, agent.signing_key, model or CODEX_ACP_MODEL)
            return AcpRecipe(
                [agent.binary], {"CODEX_HOME": f"{home}/.codex"}, {".codex/config.toml": config}
            )
        case _:
            raise Refusal(
                f"asup has no ACP launch recipe for {agent.id} yet", code="agent_not_implemented"
            )
