"""Sandbox profiles as data, and the one step that looks at the host: :func:`resolve`.

A :class:`SandboxProfile` is loaded from TOML (``sandbox_profiles/*.toml``). :func:`resolve`
checks the run's directories exist, resolves symlinks, finds the launcher binary and the system
paths this host has, and returns a :class:`ResolvedSandbox`: plain absolute paths the pure
compilers (:mod:`supervisor.sandbox.bwrap`, :mod:`supervisor.sandbox.seatbelt`) turn into an argv
or a Seatbelt profile without touching the disk.

Errors (the tree is in :mod:`supervisor.errors`)::

    SupervisorError
    ├── Refusal
    │   ├── SandboxUnavailable    this host cannot contain a child (no bwrap, no sandbox-exec)
    │   └── SandboxRefused        the run's paths or options would widen the sandbox; nothing runs
    └── ConfigError
        └── ProfileError          a profile file is missing, not TOML, or not a valid profile
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import sys
import tomllib
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from supervisor.errors import ConfigError, Refusal, SandboxUnavailable

__all__ = [
    "BUILTIN_PROFILES",
    "NETWORK_PATHS",
    "PROFILES_DIR",
    "SEATBELT_LAUNCHER",
    "SYSTEM_PATHS",
    "Backend",
    "Bind",
    "LauncherMissing",
    "NetworkMode",
    "ProfileError",
    "ResolvedSandbox",
    "SandboxProfile",
    "SandboxRefused",
    "Symlink",
    "WorktreeAccess",
    "check_abs_path",
    "is_within",
    "load_builtin_profile",
    "load_profile",
    "parse_profile",
    "resolve",
]

# In a source checkout the profiles sit at the top of the repository; a built wheel carries
# them inside the package (pyproject's force-include).
_PACKAGED_PROFILES = Path(__file__).resolve().parents[1] / "sandbox_profiles"
PROFILES_DIR = (
    _PACKAGED_PROFILES
    if _PACKAGED_PROFILES.is_dir()
    else Path(__file__).resolve().parents[2] / "sandbox_profiles"
)
BUILTIN_PROFILES = ("read-only", "worktree-write")
SEATBELT_LAUNCHER = "/usr/bin/sandbox-exec"

# Host paths offered read-only to a bubblewrap child, each only if it exists on this host.
# /etc is never mounted whole: only the pieces programs need, none that holds a secret
# (no shadow, no ssl/private, no gitconfig, npmrc or pip.conf, which can carry credentials).
SYSTEM_PATHS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/alternatives",  # Debian: /usr/bin/awk → /etc/alternatives/awk → …
    "/etc/ssl/certs",  # CA bundle and hashed certs (not /etc/ssl/private)
    "/etc/ssl/openssl.cnf",
    "/etc/pki/tls/certs",  # RHEL family CA bundle (not /etc/pki/tls/private)
    "/etc/pki/ca-trust/extracted",
    "/etc/crypto-policies",  # RHEL family: openssl.cnf includes its back-ends
    "/etc/passwd",  # getpwuid: git, node os.userInfo(), python getpass
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",  # localhost → 127.0.0.1 (the proxy bridge, local test servers)
    "/etc/resolv.conf",  # DNS: only with network = "open", see NETWORK_PATHS
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/locale.alias",
    "/etc/protocols",
    "/etc/services",
    "/etc/os-release",
)
# System paths mounted only when the child has the host's network. Under "restricted" the
# host-side proxy resolves names, under "none" there is nothing to resolve.
NETWORK_PATHS: frozenset[str] = frozenset({"/etc/resolv.conf"})

Backend = Literal["bwrap", "seatbelt"]

_DOMAIN = re.compile(
    r"^(\*\.)?[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$"
)


class ProfileError(ConfigError, ValueError):
    """A profile file is missing, is not TOML, or does not describe a valid profile."""


class LauncherMissing(SandboxUnavailable):
    """The sandbox's launcher (bwrap, sandbox-exec) is not installed."""

    code = "launcher_missing"


class SandboxRefused(Refusal):
    """The run's paths or options would make the sandbox wider than its profile; nothing runs."""

    code = "sandbox_refused"


class NetworkMode(StrEnum):
    NONE = "none"
    OPEN = "open"
    RESTRICTED = "restricted"


class WorktreeAccess(StrEnum):
    READ_ONLY = "read-only"
    READ_WRITE = "read-write"


class SandboxProfile(BaseModel):
    """What a child may touch, as data. The per-run HOME and TMPDIR are always writable, the
    worktree's git metadata is always read-only, and nothing else of the host is writable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="The profile's name; a built-in profile's name is its file stem.")
    description: str = Field(default="", description="One line for humans. Empty means none.")
    worktree: WorktreeAccess = Field(
        description="Whether the child may write inside the worktree (its git metadata stays"
        " read-only either way)."
    )
    network: NetworkMode = Field(
        description='"none": only a loopback interface of its own. "open": the host\'s network,'
        ' unfiltered. "restricted": no network of its own; one bridge to the host-side proxy,'
        " which lets through allowed_domains minus denied_domains."
    )
    allowed_domains: tuple[str, ...] = Field(
        default=(),
        description='Only for "restricted": the destinations the proxy lets through, as host'
        ' names or "*.example.com" (any subdomain). Empty means the proxy lets nothing through.',
    )
    denied_domains: tuple[str, ...] = Field(
        default=(),
        description='Only for "restricted": destinations refused even when allowed_domains'
        " matches them (denied wins). Empty means no exception to allowed_domains.",
    )

    @field_validator("allowed_domains", "denied_domains")
    @classmethod
    def _domains_are_host_names(cls, domains: tuple[str, ...]) -> tuple[str, ...]:
        for domain in domains:
            if not _DOMAIN.fullmatch(domain):
                raise ValueError(
                    f"{domain!r} is not a lower-case host name or '*.' wildcard"
                    " (no scheme, port or path)"
                )
        if len(set(domains)) != len(domains):
            raise ValueError("a domain is listed twice")
        return domains

    @model_validator(mode="after")
    def _domains_only_when_restricted(self) -> SandboxProfile:
        if self.network is not NetworkMode.RESTRICTED and (
            self.allowed_domains or self.denied_domains
        ):
            raise ValueError(
                f'allowed_domains and denied_domains only apply to network = "restricted",'
                f' not "{self.network.value}"'
            )
        return self


def parse_profile(text: str, *, source: str = "<text>") -> SandboxProfile:
    """TOML text → profile. Pure; ``source`` only names the text in the error message."""
    try:
        return SandboxProfile.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"sandbox profile {source} is not valid TOML: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'profile'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ProfileError(f"sandbox profile {source} is not a valid profile: {problems}") from exc


def load_profile(path: str | os.PathLike[str]) -> SandboxProfile:
    """Read and parse one profile file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"sandbox profile {p} cannot be read: {exc.strerror}") from exc
    return parse_profile(text, source=str(p))


def load_builtin_profile(name: str) -> SandboxProfile:
    """One of :data:`BUILTIN_PROFILES` from :data:`PROFILES_DIR`."""
    if name not in BUILTIN_PROFILES:
        raise ProfileError(
            f"there is no built-in sandbox profile {name!r}; the built-in profiles are "
            + ", ".join(BUILTIN_PROFILES)
        )
    profile = load_profile(PROFILES_DIR / f"{name}.toml")
    if profile.name != name:
        raise ProfileError(
            f"sandbox profile file {name}.toml names itself {profile.name!r}; make them agree"
        )
    return profile


def check_abs_path(path: str) -> str:
    """Accept an absolute, normalised POSIX path (no ``..``, no trailing slash)."""
    if not posixpath.isabs(path) or posixpath.normpath(path) != path or path.startswith("//"):
        raise ValueError(f"{path!r} is not an absolute, normalised path")
    if "\0" in path:
        raise ValueError("a path may not contain NUL")
    return path


def is_within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or lies below it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


class Bind(BaseModel):
    """A host path (``source``, symlinks resolved) that appears read-only at ``dest``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    dest: str

    @field_validator("source", "dest")
    @classmethod
    def _abs(cls, v: str) -> str:
        return check_abs_path(v)


class Symlink(BaseModel):
    """A symlink created inside the sandbox at ``path``, pointing to ``target``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str
    path: str

    @field_validator("target", "path")
    @classmethod
    def _abs(cls, v: str) -> str:
        return check_abs_path(v)


class ResolvedSandbox(BaseModel):
    """A profile bound to one run's paths on one host. Every path is absolute with symlinks
    resolved, so the compilers can place them verbatim. Built by :func:`resolve` (or by hand in
    tests); the compilers read it and never look at the disk."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Backend
    launcher: str = Field(description="Absolute path of bwrap, or /usr/bin/sandbox-exec.")
    profile: SandboxProfile
    worktree: str
    git_dir: str = Field(description="The repository's git directory (common dir), read-only.")
    git_file: str | None = Field(
        default=None,
        description="The worktree's '.git' file of a linked worktree, read-only so the child"
        " cannot point git elsewhere; None when '.git' is the directory itself.",
    )
    git_binds: tuple[Bind, ...] | None = Field(
        default=None,
        description="bwrap only: the parts of the git directory git needs, read-only, instead"
        " of the whole of it (its config may hold credentials); a Bind whose dest is"
        " <git_dir>/config carries a sanitized copy. None mounts git_dir whole.",
    )
    home: str
    tmpdir: str
    agent_dirs: tuple[str, ...] = Field(
        default=(), description="The vendor CLI's install dirs, read-only. Empty means none."
    )
    system_binds: tuple[Bind, ...] = Field(
        default=(), description="bwrap only: system paths of this host, read-only."
    )
    system_symlinks: tuple[Symlink, ...] = Field(
        default=(),
        description="bwrap only: system paths that are symlinks into a bound path on this host"
        " (e.g. /bin → /usr/bin on a merged-/usr system), recreated as symlinks.",
    )

    @field_validator("launcher", "worktree", "git_dir", "home", "tmpdir")
    @classmethod
    def _abs(cls, v: str) -> str:
        return check_abs_path(v)

    @field_validator("git_file")
    @classmethod
    def _abs_opt(cls, v: str | None) -> str | None:
        return None if v is None else check_abs_path(v)

    @field_validator("agent_dirs")
    @classmethod
    def _abs_all(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_abs_path(p) for p in v)

    @property
    def writable(self) -> tuple[str, ...]:
        """The paths the child may write: HOME, TMPDIR, and the worktree under read-write."""
        rw = [self.home, self.tmpdir]
        if self.profile.worktree is WorktreeAccess.READ_WRITE:
            rw.append(self.worktree)
        return tuple(rw)


def resolve(
    profile: SandboxProfile,
    *,
    worktree: str | os.PathLike[str],
    git_dir: str | os.PathLike[str],
    home: str | os.PathLike[str],
    tmpdir: str | os.PathLike[str],
    agent_install_dirs: Sequence[str | os.PathLike[str]] = (),
    backend: Backend | None = None,
    search_path: str | None = None,
    system_paths: Sequence[str] = SYSTEM_PATHS,
    host_home: str | os.PathLike[str] | None = None,
    git_paths: Sequence[str | os.PathLike[str]] | None = None,
    git_config: str | os.PathLike[str] | None = None,
) -> ResolvedSandbox:
    """Bind ``profile`` to this run's paths on this host; the only sandbox step that does I/O.

    Checks that every directory exists, resolves symlinks, checks that the worktree's ``.git``
    leads into ``git_dir``, finds the launcher (``bwrap`` on ``search_path``, default the
    process's PATH; ``/usr/bin/sandbox-exec`` on macOS) and, for bwrap, which of
    ``system_paths`` this host has. ``backend`` defaults from the platform. ``host_home``
    (default: the invoking user's home) may not be mounted whole, nor may ``/``.

    ``git_paths`` (bwrap): mount only these parts of the git directory (each inside it, or an
    object directory it borrows from) instead of the whole; ``git_config`` is then a file
    mounted at ``<git_dir>/config`` in place of the repository's own (a copy without remotes,
    credentials or hooks settings), and the real ``config`` is never mounted.
    """
    backend = backend or _platform_backend()
    launcher = _find_launcher(backend, search_path)

    wt = _existing_dir(worktree, "the worktree", "create the worktree before starting the run")
    gd = _existing_dir(git_dir, "the git directory", "pass the repository's git directory")
    hm = _existing_dir(home, "the per-run HOME", "create it before starting the run")
    td = _existing_dir(tmpdir, "the per-run TMPDIR", "create it before starting the run")
    agents = tuple(
        dict.fromkeys(
            _existing_dir(d, "the agent install dir", "pass the vendor CLI's install directory")
            for d in agent_install_dirs
        )
    )
    git_file = _check_git_link(wt, gd)

    _refuse_overlap(hm, td, wt, gd)
    home_of_host = os.path.realpath(host_home if host_home is not None else Path.home())
    for label, path in (
        ("the worktree", wt),
        ("the git directory", gd),
        ("the per-run HOME", hm),
        ("the per-run TMPDIR", td),
        *(("the agent install dir", d) for d in agents),
    ):
        _refuse_too_wide(label, path, home_of_host)

    binds: tuple[Bind, ...] = ()
    symlinks: tuple[Symlink, ...] = ()
    git_binds: tuple[Bind, ...] | None = None
    if backend == "bwrap":
        binds, symlinks = _system_mounts(system_paths)
        if git_paths is not None:
            git_binds = _git_binds(gd, git_paths, git_config)

    return ResolvedSandbox(
        backend=backend,
        launcher=launcher,
        profile=profile,
        worktree=wt,
        git_dir=gd,
        git_file=git_file,
        git_binds=git_binds,
        home=hm,
        tmpdir=td,
        agent_dirs=agents,
        system_binds=binds,
        system_symlinks=symlinks,
    )


def _git_binds(
    git_dir: str,
    paths: Sequence[str | os.PathLike[str]],
    config: str | os.PathLike[str] | None,
) -> tuple[Bind, ...]:
    real_config = os.path.join(git_dir, "config")
    out: list[Bind] = []
    for raw in paths:
        real = os.path.realpath(os.fspath(raw))
        if not os.path.exists(real):
            raise SandboxRefused(f"the git path {raw} does not exist; pass existing paths only")
        if is_within(real_config, real):  # the config itself, the git dir or a parent
            raise SandboxRefused(
                f"the git path {raw} is or holds the repository's config, which may carry "
                "credentials; pass the sanitized copy as git_config instead"
            )
        out.append(Bind(source=real, dest=real))
    if config is not None:
        source = os.path.realpath(os.fspath(config))
        if not os.path.isfile(source):
            raise SandboxRefused(f"the git config copy {config} is not a file; write it first")
        out.append(Bind(source=source, dest=real_config))
    return tuple(out)


def _platform_backend() -> Backend:
    if sys.platform.startswith("linux"):
        return "bwrap"
    if sys.platform == "darwin":
        return "seatbelt"
    raise SandboxUnavailable(
        f"there is no sandbox for platform {sys.platform!r}: agent-supervisor contains its"
        " children with bubblewrap on Linux or Seatbelt on macOS"
    )


def _find_launcher(backend: Backend, search_path: str | None) -> str:
    if backend == "bwrap":
        found = shutil.which("bwrap", path=search_path)
        if found is None:
            raise LauncherMissing(
                "bubblewrap (bwrap) was not found on PATH, and without it the child cannot be"
                " contained; install it with `apt-get install bubblewrap` (Debian, Ubuntu) or"
                " your distribution's bubblewrap package"
            )
        return os.path.realpath(found)
    if not os.access(SEATBELT_LAUNCHER, os.X_OK):
        raise LauncherMissing(
            f"{SEATBELT_LAUNCHER} is missing or not executable, and without it the child cannot"
            " be contained; Seatbelt sandboxing needs macOS"
        )
    return SEATBELT_LAUNCHER


def _existing_dir(path: str | os.PathLike[str], label: str, fix: str) -> str:
    raw = os.fspath(path)
    if not os.path.isabs(raw):
        raise SandboxRefused(f"{label} {raw} is not an absolute path; pass an absolute path")
    real = os.path.realpath(raw)
    if not os.path.isdir(real):
        raise SandboxRefused(f"{label} {raw} does not exist or is not a directory; {fix}")
    return real


def _check_git_link(worktree: str, git_dir: str) -> str | None:
    """The worktree's ``.git`` must lead into ``git_dir``; return it when it is a file."""
    dot_git = os.path.join(worktree, ".git")
    if os.path.isdir(dot_git) and not os.path.islink(dot_git):
        if os.path.realpath(dot_git) != git_dir:
            raise SandboxRefused(
                f"the worktree's .git directory is not the git directory {git_dir}; pass"
                f" {dot_git} as the git directory"
            )
        return None
    if not os.path.isfile(dot_git) or os.path.islink(dot_git):
        raise SandboxRefused(
            f"{worktree} has no .git file or directory, so it is not a git worktree; create it"
            " with `git worktree add`"
        )
    with open(dot_git, encoding="utf-8") as f:
        first = f.readline().strip()
    if not first.startswith("gitdir:"):
        raise SandboxRefused(f"{dot_git} does not start with 'gitdir:'; recreate the worktree")
    target = first.removeprefix("gitdir:").strip()
    target = os.path.realpath(os.path.join(worktree, target))
    if not is_within(target, git_dir):
        raise SandboxRefused(
            f"the worktree's .git file points to {target}, outside the git directory {git_dir},"
            " so git would not work inside the sandbox; pass the repository's common git"
            " directory as git_dir"
        )
    return dot_git


def _refuse_overlap(home: str, tmpdir: str, worktree: str, git_dir: str) -> None:
    for label, path in (("the per-run HOME", home), ("the per-run TMPDIR", tmpdir)):
        for other_label, other in (("the worktree", worktree), ("the git directory", git_dir)):
            if is_within(path, other) or is_within(other, path):
                raise SandboxRefused(
                    f"{label} {path} overlaps {other_label} {other}; put the per-run"
                    " directories outside the worktree and its git directory"
                )
    if home == tmpdir:
        raise SandboxRefused(
            f"the per-run HOME and TMPDIR are the same directory {home}; give each its own"
        )


def _refuse_too_wide(label: str, path: str, host_home: str) -> None:
    if path == "/":
        raise SandboxRefused(
            f"{label} is /, which would mount the whole host into the sandbox; pass a"
            " directory of its own"
        )
    if is_within(host_home, path):
        raise SandboxRefused(
            f"{label} {path} contains the host's home directory {host_home}, which would put"
            " ~/.ssh and every other file of the user inside the sandbox; pass a directory"
            " of its own"
        )


def _system_mounts(candidates: Sequence[str]) -> tuple[tuple[Bind, ...], tuple[Symlink, ...]]:
    """The candidates this host has. A symlink whose target lies inside another bound candidate
    is recreated as a symlink (so /bin → /usr/bin and /etc/localtime keep their shape); any
    other path is bound from its resolved source."""
    present = [p for p in candidates if os.path.exists(p)]
    real = {p: os.path.realpath(p) for p in present}
    plain = [p for p in present if real[p] == p]
    binds: list[Bind] = [Bind(source=p, dest=p) for p in plain]
    symlinks: list[Symlink] = []
    for p in present:
        if real[p] == p:
            continue
        if any(is_within(real[p], root) for root in plain):
            symlinks.append(Symlink(target=real[p], path=p))
        else:
            binds.append(Bind(source=real[p], dest=p))
    return tuple(binds), tuple(symlinks)
