"""Agent records: what the supervisor knows about each vendor CLI, as data.

A record says which binary to look for, how to read its ``--version`` output, the version range
the lab recorded fixtures against (outside it is a warning, never a refusal), the modes the agent
supports, its transport, the environment-variable prefixes it needs and the single variable that
carries the key it signs in with. The registry is a plain dict keyed by agent id.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AGENTS",
    "AgentSpec",
    "Mode",
    "UnknownAgentError",
    "VersionRange",
    "get_agent",
    "parse_version",
]


class Mode(StrEnum):
    READ_ONLY = "read-only"
    WORKTREE_WRITE = "worktree-write"


Version = tuple[int, ...]


def parse_version(text: str) -> Version | None:
    """``"1.2.3"`` → ``(1, 2, 3)``; anything that is not dotted digits → None."""
    if not re.fullmatch(r"\d+(\.\d+)*", text):
        return None
    return tuple(int(p) for p in text.split("."))


class VersionRange(BaseModel):
    """Inclusive range of vendor versions the lab recorded fixtures against."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min: str
    max: str

    def contains(self, version: str) -> bool:
        v, lo, hi = parse_version(version), parse_version(self.min), parse_version(self.max)
        if v is None or lo is None or hi is None:
            return False
        return lo <= v <= hi


class AgentSpec(BaseModel):
    """One vendor CLI.

    ``version_regex`` is applied to the stripped ``--version`` output; its group ``v`` is the
    version. ``env_prefixes`` are passed to the child by prefix (never a credential-shaped name);
    ``signing_key`` is the one credential variable passed, by exact name.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    display_name: str
    binary: str
    version_args: tuple[str, ...] = ("--version",)
    version_regex: str
    recorded_range: VersionRange
    modes: tuple[Mode, ...]
    transport: Literal["line-stream", "acp"]
    env_prefixes: tuple[str, ...] = ()
    signing_key: str
    base_url_env: str | None = Field(
        default=None, description="Variable that points the CLI at another model endpoint."
    )
    tmpdir_env: tuple[str, ...] = Field(
        default=(),
        description="Variables the CLI reads instead of TMPDIR for its scratch files; the "
        "child gets the per-run TMPDIR in each (the sandbox has no /tmp).",
    )
    write_needs_recorded_version: bool = Field(
        default=False,
        description="Refuse a worktree-write run unless the installed version is inside "
        "recorded_range: the CLI ignores unknown settings silently, so an untested version "
        "could run with a looser configuration than asup asked for.",
    )

    def parse_version_output(self, output: str) -> str | None:
        m = re.search(self.version_regex, output.strip())
        return m.group("v") if m else None


AGENTS: dict[str, AgentSpec] = {
    "claude-cli": AgentSpec(
        id="claude-cli",
        display_name="Claude Code",
        binary="claude",
        version_regex=r"^(?P<v>\d+\.\d+\.\d+) \(Claude Code\)",
        recorded_range=VersionRange(min="2.1.197", max="2.1.197"),
        modes=(Mode.READ_ONLY, Mode.WORKTREE_WRITE),
        transport="line-stream",
        env_prefixes=("ANTHROPIC_", "CLAUDE_CODE_", "DISABLE_"),
        signing_key="ANTHROPIC_API_KEY",
        base_url_env="ANTHROPIC_BASE_URL",
        # its Bash tool makes CLAUDE_CODE_TMPDIR (else /tmp) /claude-<uid>
        tmpdir_env=("CLAUDE_CODE_TMPDIR",),
    ),
    "codex-cli": AgentSpec(
        id="codex-cli",
        display_name="OpenAI Codex",
        binary="codex",
        version_regex=r"^codex-cli (?P<v>\d+\.\d+\.\d+)",
        recorded_range=VersionRange(min="0.171.0", max="0.171.0"),
        modes=(Mode.READ_ONLY, Mode.WORKTREE_WRITE),
        write_needs_recorded_version=True,
        transport="line-stream",
        env_prefixes=("CODEX_", "OPENAI_"),
        signing_key="OPENAI_API_KEY",
        base_url_env=None,
    ),
    # ACP agents: no --version of their own; the version is the npm package's (see
    # supervisor.acp.client.probe_acp_agent), so version_regex reads a bare version.
    "claude-acp": AgentSpec(
        id="claude-acp",
        display_name="Claude Agent (ACP)",
        binary="claude-agent-acp",
        version_regex=r"^(?P<v>\d+\.\d+\.\d+)$",
        recorded_range=VersionRange(min="0.23.1", max="0.23.1"),
        modes=(Mode.READ_ONLY, Mode.WORKTREE_WRITE),
        transport="acp",
        env_prefixes=("ANTHROPIC_", "CLAUDE_CODE_", "DISABLE_"),
        signing_key="ANTHROPIC_API_KEY",
        base_url_env="ANTHROPIC_BASE_URL",
        # its Bash tool makes CLAUDE_CODE_TMPDIR (else /tmp) /claude-<uid>
        tmpdir_env=("CLAUDE_CODE_TMPDIR",),
    ),
    "codex-acp": AgentSpec(
        id="codex-acp",
        display_name="OpenAI Codex (ACP)",
        binary="codex-acp",
        version_regex=r"^(?P<v>\d+\.\d+\.\d+)$",
        recorded_range=VersionRange(min="0.16.0", max="0.16.0"),
        modes=(Mode.READ_ONLY, Mode.WORKTREE_WRITE),
        write_needs_recorded_version=True,
        transport="acp",
        env_prefixes=("CODEX_", "OPENAI_"),
        signing_key="OPENAI_API_KEY",
        base_url_env=None,
    ),
    # gemini and opencode have a --version, but it is read from their npm package like the
    # others (nothing runs). No GEMINI_ / OPENCODE_ prefix is passed from the host: both
    # families hold switches that would undo the recipe (GEMINI_MODEL=auto brings back the
    # router request, GEMINI_CLI_APPROVAL_MODE, GEMINI_CLI_SYSTEM_SETTINGS_PATH;
    # OPENCODE_PERMISSION, OPENCODE_CONFIG_CONTENT, OPENCODE_CONFIG_DIR) and markers a running
    # gemini sets on its children (GEMINI_CLI, GEMINI_CLI_IDE_*). The recipe sets what it needs.
    "gemini-acp": AgentSpec(
        id="gemini-acp",
        display_name="Gemini CLI (ACP)",
        binary="gemini",
        version_regex=r"^(?P<v>\d+\.\d+\.\d+)$",
        recorded_range=VersionRange(min="0.61.0", max="0.61.0"),
        modes=(Mode.READ_ONLY, Mode.WORKTREE_WRITE),
        write_needs_recorded_version=True,
        transport="acp",
        env_prefixes=("GOOGLE_GEMINI_",),
        signing_key="GEMINI_API_KEY",
        base_url_env="GOOGLE_GEMINI_BASE_URL",
    ),
    "opencode-acp": AgentSpec(
        id="opencode-acp",
        display_name="opencode (ACP)",
        binary="opencode",
        version_regex=r"^(?P<v>\d+\.\d+\.\d+)$",
        recorded_range=VersionRange(min="1.18.33", max="1.18.33"),
        modes=(Mode.READ_ONLY, Mode.WORKTREE_WRITE),
        write_needs_recorded_version=True,
        transport="acp",
        env_prefixes=(),
        signing_key="OPENAI_API_KEY",
        base_url_env=None,
    ),
}


class UnknownAgentError(LookupError):
    def __init__(self, agent_id: str) -> None:
        known = ", ".join(sorted(AGENTS))
        super().__init__(f"unknown agent {agent_id!r}: known agents are {known}")


def get_agent(agent_id: str) -> AgentSpec:
    try:
        return AGENTS[agent_id]
    except KeyError:
        raise UnknownAgentError(agent_id) from None
