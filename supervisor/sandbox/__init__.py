"""Containment for vendor CLIs: profiles as data, one I/O step, pure compilers.

``load_builtin_profile`` / ``load_profile`` give a :class:`SandboxProfile`; :func:`resolve` binds
it to one run's paths on this host (the only step that touches the disk); :func:`compile_bwrap`
(Linux) and :func:`compile_seatbelt` (macOS) translate the result into what the process layer
spawns. See docs/sandbox.md for what each profile mounts and why.
"""

from supervisor.errors import SandboxUnavailable
from supervisor.sandbox.bwrap import NetworkBridge, compile_bwrap
from supervisor.sandbox.profile import (
    BUILTIN_PROFILES,
    Backend,
    Bind,
    NetworkMode,
    ProfileError,
    ResolvedSandbox,
    SandboxProfile,
    SandboxRefused,
    Symlink,
    WorktreeAccess,
    load_builtin_profile,
    load_profile,
    parse_profile,
    resolve,
)
from supervisor.sandbox.seatbelt import LoopbackProxy, SeatbeltInvocation, compile_seatbelt

__all__ = [
    "BUILTIN_PROFILES",
    "Backend",
    "Bind",
    "LoopbackProxy",
    "NetworkBridge",
    "NetworkMode",
    "ProfileError",
    "ResolvedSandbox",
    "SandboxProfile",
    "SandboxRefused",
    "SandboxUnavailable",
    "SeatbeltInvocation",
    "Symlink",
    "WorktreeAccess",
    "compile_bwrap",
    "compile_seatbelt",
    "load_builtin_profile",
    "load_profile",
    "parse_profile",
    "resolve",
]
