"""The allowlisted child environment: a pure function of the host environment and the agent spec.

:func:`build_child_env` starts from nothing and adds variables in numbered steps; a host variable
no step names is absent from the child. The result is a :class:`ChildEnv`: the variables and a
record of every host variable that was left out and why (names only, never values).

1. ``PATH`` from the host, keeping only absolute entries (an empty or relative entry would run
   programs out of the worktree, which the agent controls); ``/usr/local/bin:/usr/bin:/bin`` when
   nothing usable is left.
2. Per-run ``HOME`` and ``TMPDIR`` from the caller, and ``XDG_CONFIG_HOME``, ``XDG_CACHE_HOME``,
   ``XDG_DATA_HOME``, ``XDG_STATE_HOME`` under that ``HOME``; the per-run ``TMPDIR`` also in
   each variable the agent's record names in ``tmpdir_env`` (Claude Code's
   ``CLAUDE_CODE_TMPDIR``: its Bash tool ignores ``TMPDIR`` and the sandbox has no ``/tmp``).
3. Identity: ``USER``, ``LOGNAME`` and ``SHELL`` (only an absolute ``SHELL``; agents run their
   shell tool with it).
4. Locale and terminal: ``LANG``, ``LANGUAGE``, the ``LC_*`` categories, ``TZ``, ``TERM``.
5. CA bundles: ``SSL_CERT_FILE``, ``SSL_CERT_DIR``, ``NODE_EXTRA_CA_CERTS``, ``REQUESTS_CA_BUNDLE``.
6. Proxy variables never come from the host: the sandbox sets them through ``extra`` (step 8).
7. The agent's own variables: host names that start with one of ``agent.env_prefixes``, except
   credential-shaped names and harness markers, and the one key the agent signs in with
   (``agent.signing_key``) by its exact name.
8. ``extra``: the supervisor's own variables (proxy, base URL, per-run config dirs, a dummy key
   for the fake model server). They are written last and win; they are never read from the host.
9. The nesting marker ``ASUP_DEPTH`` = host depth + 1.

A credential-shaped name contains ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``PASSWD``,
``PASSPHRASE``, ``CREDENTIAL``, ``AUTH`` or ``COOKIE`` (any case), starts with ``AWS_``, or is one
of ``SSH_AUTH_SOCK``, ``SSH_ASKPASS``, ``GIT_ASKPASS``, ``GOOGLE_APPLICATION_CREDENTIALS``. The
match is deliberately wide: ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` is configuration but matches
``*TOKEN*`` and is dropped; the supervisor passes such a setting through ``extra`` when it wants it.
The keys other vendors sign in with (:data:`OTHER_VENDOR_KEYS`) are named as such in the record.

Harness markers are variables another harness (or an IDE or remote host driving it) sets on the
processes it spawns; passing them would make the child believe it runs inside that harness.
For Claude Code the prefix ``CLAUDE_CODE_`` carries both user configuration (passed:
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``, ``CLAUDE_CODE_MAX_RETRIES``,
``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` …) and markers of a running session (dropped: the names in
:data:`HARNESS_MARKERS`, every ``CLAUDE_CODE_REMOTE*`` and ``CLAUDE_CODE_HOST_*`` name, and every
``*_FILE_DESCRIPTOR`` name, since an inherited descriptor number means nothing in the child). The
marker list was read from what Claude Code 2.1.197 sets on its own children (``CLAUDECODE``,
``CLAUDE_CODE_SESSION_ID``, ``CLAUDE_CODE_CHILD_SESSION``, ``CLAUDE_CODE_EXECPATH`` …) and what
its IDE and remote integrations set for it (``CLAUDE_CODE_ENTRYPOINT``, ``CLAUDE_CODE_SSE_PORT`` …).
Codex's ``CODEX_HOME`` (the host's codex config and login) and the markers codex sets on sandboxed
commands are dropped too, and so is our own namespace ``ASUP_*``.

Errors (the tree is in :mod:`supervisor.errors`)::

    SupervisorError
    ├── Refusal
    │   └── NestedRunRefused      ASUP_DEPTH says we already run inside a supervised child
    └── ReservedVariableError     ``extra`` tried to set a name the builder owns (also ValueError)
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from supervisor.errors import NestedRunRefused, SupervisorError
from supervisor.registry import AGENTS, AgentSpec

__all__ = [
    "CA_VARS",
    "CREDENTIAL_EXACT",
    "CREDENTIAL_PARTS",
    "CREDENTIAL_PREFIXES",
    "DEFAULT_PATH",
    "DEPTH_VAR",
    "HARNESS_MARKERS",
    "HARNESS_MARKER_PREFIXES",
    "HARNESS_MARKER_SUFFIXES",
    "IDENTITY_VARS",
    "LOCALE_VARS",
    "OTHER_VENDOR_KEYS",
    "OWN_PREFIX",
    "PROXY_VARS",
    "XDG_SUBDIRS",
    "ChildEnv",
    "DropReason",
    "Dropped",
    "ReservedVariableError",
    "build_child_env",
    "check_not_nested",
    "host_depth",
    "is_credential_shaped",
    "is_harness_marker",
]

DEPTH_VAR = "ASUP_DEPTH"
OWN_PREFIX = "ASUP_"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

IDENTITY_VARS = ("USER", "LOGNAME")
LOCALE_VARS = (
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_ADDRESS",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NAME",
    "LC_NUMERIC",
    "LC_PAPER",
    "LC_TELEPHONE",
    "LC_TIME",
    "TZ",
    "TERM",
)
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE")
PROXY_VARS = frozenset(
    name
    for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY")
    for name in (base, base.lower())
)
XDG_SUBDIRS = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_CACHE_HOME": ".cache",
    "XDG_DATA_HOME": ".local/share",
    "XDG_STATE_HOME": ".local/state",
}

CREDENTIAL_PARTS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
)
CREDENTIAL_EXACT = frozenset(
    {"SSH_AUTH_SOCK", "SSH_ASKPASS", "GIT_ASKPASS", "GOOGLE_APPLICATION_CREDENTIALS"}
)
CREDENTIAL_PREFIXES = ("AWS_",)

OTHER_VENDOR_KEYS = frozenset(
    {spec.signing_key for spec in AGENTS.values()}
    | {
        "AZURE_OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "OPENROUTER_API_KEY",
        "XAI_API_KEY",
    }
)

HARNESS_MARKERS = frozenset(
    {
        # Claude Code, set on the processes a running session spawns.
        "CLAUDECODE",
        "CLAUDE_CODE_SESSION_ID",
        "CLAUDE_CODE_CHILD_SESSION",
        "CLAUDE_CODE_EXECPATH",
        "CLAUDE_CODE_TMPDIR",
        "CLAUDE_CODE_SESSION_KIND",
        "CLAUDE_CODE_SESSION_NAME",
        "CLAUDE_CODE_TASK_LIST_ID",
        "CLAUDE_CODE_SPAWN_TIMESTAMP_MS",
        "CLAUDE_CODE_WORKER_EPOCH",
        "CLAUDE_CODE_AGENT",
        "CLAUDE_PROJECT_DIR",
        "CLAUDE_EFFORT",
        "AI_AGENT",
        # Claude Code, set for it by an IDE, a GitHub action, the SDK or a remote host.
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_CODE_SSE_PORT",
        "CLAUDE_CODE_ACTION",
        "CLAUDE_CODE_CONTAINER_ID",
        "CLAUDE_CODE_ENVIRONMENT_KIND",
        "CLAUDE_CODE_ENVIRONMENT_RUNNER_VERSION",
        "CLAUDE_CODE_IS_COWORK",
        "CLAUDE_CODE_PROVIDER_MANAGED_BY_HOST",
        "CLAUDE_AGENT_SDK_VERSION",
        # Codex: the host's config/login dir, and markers set on its sandboxed commands.
        "CODEX_HOME",
        "CODEX_SANDBOX",
        "CODEX_SANDBOX_NETWORK_DISABLED",
        "CODEX_THREAD_ID",
        "CODEX_CI",
        "CODEX_MANAGED_PACKAGE_ROOT",
        "CODEX_MANAGED_BY_NPM",
        "CODEX_MANAGED_BY_BUN",
        "CODEX_MANAGED_BY_PNPM",
        "CODEX_MANAGED_BY_VITE_PLUS",
    }
)
HARNESS_MARKER_PREFIXES = ("CLAUDE_CODE_REMOTE", "CLAUDE_CODE_HOST_", "CODEX_INTERNAL_")
HARNESS_MARKER_SUFFIXES = ("_FILE_DESCRIPTOR",)


class ReservedVariableError(SupervisorError, ValueError):
    """``extra`` named a variable the builder sets itself, or cannot be an environment."""


class DropReason(StrEnum):
    """Why a host variable is absent from the child."""

    NOT_ALLOWLISTED = "not-allowlisted"
    CREDENTIAL = "credential-shaped"
    OTHER_VENDOR_KEY = "other-vendor-key"
    HARNESS_MARKER = "harness-marker"
    OWN_NAMESPACE = "asup-namespace"
    PROXY_FROM_SANDBOX = "proxy-from-sandbox"
    REPLACED_PER_RUN = "replaced-per-run"
    NOT_ABSOLUTE = "not-absolute"


@dataclass(frozen=True, slots=True)
class Dropped:
    """A host variable left out of the child: its name and why. Never its value."""

    name: str
    reason: DropReason


@dataclass(frozen=True, slots=True)
class ChildEnv:
    """The child's environment and the record of what was left out.

    ``vars`` is read-only. ``path_entries_removed`` counts the empty or relative ``PATH`` entries
    dropped in step 1. The ``repr`` shows names only, so logging a ChildEnv leaks no value.
    """

    vars: Mapping[str, str] = field(repr=False)
    dropped: tuple[Dropped, ...]
    path_entries_removed: int = 0

    def names(self) -> list[str]:
        return sorted(self.vars)

    def dropped_names(self) -> dict[str, DropReason]:
        return {d.name: d.reason for d in self.dropped}

    def __repr__(self) -> str:
        dropped = ", ".join(f"{d.name}:{d.reason.value}" for d in self.dropped)
        return f"ChildEnv(names=[{', '.join(self.names())}], dropped=[{dropped}])"


def is_credential_shaped(name: str) -> bool:
    """True when the name looks like it carries a secret (see the module docstring)."""
    upper = name.upper()
    return (
        upper in CREDENTIAL_EXACT
        or upper.startswith(CREDENTIAL_PREFIXES)
        or any(part in upper for part in CREDENTIAL_PARTS)
    )


def is_harness_marker(name: str) -> bool:
    """True when another harness sets this name on its children (see the module docstring)."""
    return (
        name in HARNESS_MARKERS
        or name.startswith(HARNESS_MARKER_PREFIXES)
        or name.endswith(HARNESS_MARKER_SUFFIXES)
    )


def host_depth(host_env: Mapping[str, str], depth_var: str = DEPTH_VAR) -> int:
    """The nesting depth the host environment declares: 0 when unset.

    A value that is not a whole number ≥ 0 refuses (fail closed: we cannot tell whether we are
    nested). The raw value is not echoed in the message.
    """
    raw = host_env.get(depth_var)
    if raw is None or raw == "":
        return 0
    if not raw.isascii() or not raw.isdigit():
        raise NestedRunRefused(
            f"refusing to start: {depth_var} is set but is not a whole number ≥ 0, so it cannot"
            f" be told whether this process runs inside a supervised agent; unset {depth_var}"
            " if you set it by hand"
        )
    return int(raw)


def check_not_nested(host_env: Mapping[str, str], depth_var: str = DEPTH_VAR) -> None:
    """Refuse when this process runs inside a supervised child (``ASUP_DEPTH`` ≥ 1)."""
    depth = host_depth(host_env, depth_var)
    if depth >= 1:
        raise NestedRunRefused(
            f"refusing to start: {depth_var}={depth} says this process runs inside an agent that"
            " agent-supervisor started, and a supervised agent may not start another supervised"
            " run; run asup from your own shell instead"
        )


def build_child_env(
    host_env: Mapping[str, str],
    agent: AgentSpec,
    *,
    home: str,
    tmpdir: str,
    extra: Mapping[str, str] = MappingProxyType({}),
    depth_var: str = DEPTH_VAR,
) -> ChildEnv:
    """Build the child's environment from nothing, in the numbered steps of the module docstring.

    ``home`` and ``tmpdir`` are the per-run directories as the child sees them (absolute).
    ``extra`` is the supervisor's own variables, written last; it may not set the per-run
    directories, the depth marker or any ``ASUP_*`` name.
    """
    for path, what in ((home, "home"), (tmpdir, "tmpdir")):
        if not posixpath.isabs(path):
            raise ValueError(f"{what} must be an absolute path")
    per_run = {"HOME": home, "TMPDIR": tmpdir}
    per_run |= dict.fromkeys(agent.tmpdir_env, tmpdir)
    per_run |= {name: posixpath.join(home, sub) for name, sub in XDG_SUBDIRS.items()}
    _check_extra(extra, reserved=set(per_run) | {depth_var})
    depth = host_depth(host_env, depth_var)

    out: dict[str, str] = {}
    dropped: list[Dropped] = []

    # 1. PATH, absolute entries only.
    entries = host_env.get("PATH", "").split(":")
    kept_entries = _dedupe(e for e in entries if posixpath.isabs(e))
    removed = 0 if "PATH" not in host_env else len([e for e in entries if not posixpath.isabs(e)])
    out["PATH"] = ":".join(kept_entries) if kept_entries else DEFAULT_PATH

    # 2. Per-run HOME, TMPDIR and XDG base directories.
    out.update(per_run)

    for name in sorted(host_env):
        if name == "PATH" or name in extra:
            continue
        value = host_env[name]
        reason = _classify(name, value, agent, depth_var)
        if reason is None:
            out[name] = value  # steps 3, 4, 5 and 7
        else:
            dropped.append(Dropped(name, reason))

    # 8. The supervisor's own variables.
    out.update(extra)

    # 9. Nesting marker.
    out[depth_var] = str(depth + 1)

    return ChildEnv(
        vars=MappingProxyType(dict(sorted(out.items()))),
        dropped=tuple(dropped),
        path_entries_removed=removed,
    )


def _classify(name: str, value: str, agent: AgentSpec, depth_var: str) -> DropReason | None:
    """None when the host variable passes; otherwise why it is dropped."""
    if name == depth_var or name.startswith(OWN_PREFIX):
        return DropReason.OWN_NAMESPACE
    if name in ("HOME", "TMPDIR") or name in XDG_SUBDIRS:
        return DropReason.REPLACED_PER_RUN
    if name in IDENTITY_VARS or name in LOCALE_VARS or name in CA_VARS:  # steps 3-5
        return None
    if name == "SHELL":
        return None if posixpath.isabs(value) else DropReason.NOT_ABSOLUTE
    if name in PROXY_VARS:  # step 6
        return DropReason.PROXY_FROM_SANDBOX
    if is_harness_marker(name):
        return DropReason.HARNESS_MARKER
    if name == agent.signing_key:  # step 7, by exact name
        return None
    if name in OTHER_VENDOR_KEYS:
        return DropReason.OTHER_VENDOR_KEY
    if is_credential_shaped(name):
        return DropReason.CREDENTIAL
    if agent.env_prefixes and name.startswith(agent.env_prefixes):  # step 7, by prefix
        return None
    return DropReason.NOT_ALLOWLISTED


def _check_extra(extra: Mapping[str, str], *, reserved: set[str]) -> None:
    for name, value in extra.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise ReservedVariableError(
                "extra holds a variable whose name is empty or contains '=' or NUL, or whose"
                " value contains NUL; the child's environment cannot carry it"
            )
        if name in reserved or name.startswith(OWN_PREFIX):
            raise ReservedVariableError(
                f"extra may not set {name}: the environment builder sets the per-run"
                " directories, the nesting marker and every ASUP_* name itself"
            )


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
