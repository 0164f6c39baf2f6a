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
- gemini 0.61.0 (``gemini --acp``): ``GOOGLE_GEMINI_BASE_URL`` (from ``--endpoint``) and
  ``$HOME/.gemini/settings.json`` as the lab wrote it: auto-update, usage statistics and
  telemetry off, ``general.maxAttempts = 1``, the ``gateway`` auth type when an endpoint is
  given, and a pinned model (under the default "auto" it first asks a router model and
  retries a failing request 3 times whatever ``maxAttempts`` says). Unlike the lab, folder
  trust is on: the worktree is then an untrusted folder, and gemini does not read its
  ``.gemini/settings.json`` (which it merges over the user settings otherwise: a repository
  could change the model, the retries or the tools). It writes only through
  ``fs/write_text_file`` after a permission request.
- opencode 1.18.33 (``opencode acp --pure``: no external plugins): ``OPENCODE_CONFIG`` naming
  a per-run config under HOME (one ``@ai-sdk/openai-compatible`` provider at
  ``<endpoint>/v1``, its key as ``{env:OPENAI_API_KEY}`` so the value never lands in a file,
  only that provider enabled, ``permission`` edit / bash / webfetch ``ask`` so writes come to
  the client as permission requests, no auto-update, sharing or snapshots), the
  ``OPENCODE_DISABLE_*`` switches, ``OPENCODE_DISABLE_PROJECT_CONFIG=1`` (a worktree's own
  ``opencode.json`` / ``.opencode`` would be merged over ours and could loosen it) and
  ``npm_config_offline=true`` (its background plugin install fails locally). The XDG dirs are
  already under the per-run HOME (:mod:`supervisor.env`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from supervisor.errors import Refusal
from supervisor.launch import (
    CLAUDE_QUIET_ENV,
    CODEX_DEFAULT_BASE_URL,
    check_launch,
    codex_config,
)
from supervisor.registry import AgentSpec, Mode

__all__ = [
    "CLAUDE_BLOCKLIST",
    "CODEX_ACP_MODEL",
    "GEMINI_ACP_MODEL",
    "GEMINI_SETTINGS",
    "OPENCODE_ACP_MODEL",
    "OPENCODE_CONFIG",
    "OPENCODE_ENV",
    "OPENCODE_PROVIDER",
    "AcpRecipe",
    "acp_recipe",
    "gemini_settings",
    "opencode_config",
]

CLAUDE_BLOCKLIST = ".claude/plugins/blocklist.json"
CODEX_ACP_MODEL = "gpt-5.3-codex"
GEMINI_ACP_MODEL = "gemini-2.5-pro"
GEMINI_SETTINGS = ".gemini/settings.json"
OPENCODE_ACP_MODEL = "gpt-5"
OPENCODE_CONFIG = ".asup/opencode.json"
OPENCODE_PROVIDER = "asup"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

# opencode's switches for what it would otherwise fetch, install or read from elsewhere
# (VENDORS.md, and OPENCODE_DISABLE_PROJECT_CONFIG from the 1.18.33 binary).
OPENCODE_ENV: dict[str, str] = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "npm_config_offline": "true",
}


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


def gemini_settings(model: str, *, gateway: bool) -> dict[str, Any]:
    """``$HOME/.gemini/settings.json``: nothing phones home, one attempt per model request,
    the model pinned, folder trust on (the worktree is untrusted, so its own
    ``.gemini/settings.json`` is not merged over these). ``gateway``: an endpoint was given
    (``GOOGLE_GEMINI_BASE_URL``); else gemini picks its auth type from the environment."""
    security: dict[str, Any] = {"folderTrust": {"enabled": True}}
    if gateway:
        security["auth"] = {"selectedType": "gateway"}
    return {
        "model": {"name": model},
        "general": {
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "maxAttempts": 1,
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "security": security,
    }


def opencode_config(base_url: str, key_var: str, model: str) -> dict[str, Any]:
    """The per-run ``opencode.json``: one OpenAI-compatible provider, the key read from the
    environment by opencode's own ``{env:NAME}`` substitution."""
    ref = f"{OPENCODE_PROVIDER}/{model}"
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            OPENCODE_PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "asup",
                "options": {"baseURL": base_url, "apiKey": f"{{env:{key_var}}}"},
                "models": {model: {"name": model, "tool_call": True, "reasoning": True}},
            }
        },
        "model": ref,
        "small_model": ref,
        "enabled_providers": [OPENCODE_PROVIDER],
        "permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
    }


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
    check_launch(agent, mode, endpoint)
    if max_turns is not None:
        raise Refusal(
            f"{agent.id} takes no turn limit over ACP; bound the run with --max-runtime instead",
            code="max_turns_unsupported",
        )
    home = home.rstrip("/")
    match agent.id:
        case "claude-acp":
            env = {"CLAUDE_CONFIG_DIR": f"{home}/.claude", **CLAUDE_QUIET_ENV}
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
        case "gemini-acp":
            env = {}
            if endpoint is not None:
                env["GOOGLE_GEMINI_BASE_URL"] = endpoint.rstrip("/")
            settings = gemini_settings(model or GEMINI_ACP_MODEL, gateway=endpoint is not None)
            return AcpRecipe(
                [agent.binary, "--acp"], env, {GEMINI_SETTINGS: json.dumps(settings, indent=2)}
            )
        case "opencode-acp":
            base = endpoint.rstrip("/") + "/v1" if endpoint is not None else OPENAI_DEFAULT_BASE_URL
            oc = opencode_config(base, agent.signing_key, model or OPENCODE_ACP_MODEL)
            env = {"OPENCODE_CONFIG": f"{home}/{OPENCODE_CONFIG}", **OPENCODE_ENV}
            return AcpRecipe(
                [agent.binary, "acp", "--pure"],
                env,
                {OPENCODE_CONFIG: json.dumps(oc, indent=2)},
            )
        case _:
            raise Refusal(
                f"asup has no ACP launch recipe for {agent.id} yet", code="agent_not_implemented"
            )
