"""Compile a :class:`ResolvedSandbox` into a bubblewrap argv. Pure: no disk, no process.

The mounts are an allowlist laid on an empty root:

- ``/proc`` (the child's own pid namespace) and a minimal ``/dev``;
- the host's system paths, read-only (:data:`~supervisor.sandbox.profile.SYSTEM_PATHS`; the
  DNS resolver config only for ``network = "open"``), and the merged-/usr symlinks;
- the vendor CLI's install dirs, read-only;
- the worktree, read-only or read-write per the profile; its git metadata read-only always;
- the per-run HOME and TMPDIR, read-write;
- for ``network = "restricted"``: the proxy's unix socket (:class:`NetworkBridge`).

Every path appears at the same place as on the host. Mounts are ordered parent before child,
so a read-only path inside a writable one (the git directory of a plain checkout) stays
read-only. After the mounts the root itself is made read-only, so a write anywhere but HOME,
TMPDIR and a writable worktree fails. The child gets every namespace of its own (``--share-net``
only for ``open``), no capabilities (as root it would otherwise keep them in its user namespace
and could remount a read-only bind writable), a new session (no terminal injection), dies with
its parent, starts with an empty environment plus exactly the variables passed, in the worktree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from supervisor.sandbox.profile import (
    NETWORK_PATHS,
    NetworkMode,
    ResolvedSandbox,
    SandboxRefused,
    WorktreeAccess,
    check_abs_path,
    is_within,
)

__all__ = ["PROC_READ_ONLY", "NetworkBridge", "compile_bwrap"]


class NetworkBridge(BaseModel):
    """How a child under ``network = "restricted"`` reaches the host-side proxy.

    The child has no network of its own, only loopback. The proxy listens on a unix socket on
    the host; the socket is mounted into the sandbox, and an optional relay (``relay``) runs
    inside the sandbox in front of the child's argv, listens on the sandbox's loopback and
    forwards to the socket, then runs the child (the argv that follows it). The caller sets the
    child's proxy variables (``HTTPS_PROXY=http://127.0.0.1:PORT`` …) through the environment.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    host_socket: str = Field(description="The proxy's listening unix socket on the host.")
    sandbox_socket: str = Field(
        default="/run/asup/proxy.sock",
        description="Where the socket appears inside; must not lie under another mount.",
    )
    relay: tuple[str, ...] = Field(
        default=(),
        description="argv prefix run inside the sandbox before the child's argv. Empty means"
        " the child talks to the socket itself.",
    )
    relay_paths: tuple[str, ...] = Field(
        default=(),
        description="Host paths (resolved) the relay needs, mounted read-only in place. Empty"
        " means the relay lives in paths the sandbox already has.",
    )

    @field_validator("host_socket", "sandbox_socket")
    @classmethod
    def _abs(cls, v: str) -> str:
        return check_abs_path(v)

    @field_validator("relay_paths")
    @classmethod
    def _abs_all(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_abs_path(p) for p in v)


# Global kernel knobs under the fresh /proc. Started by root, the child's uid 0 is the host's
# (no user namespace of its own), and these files are checked by owner only — capabilities
# dropped or not, /proc/sys/kernel/core_pattern would take a program to run as the host's root.
# bwrap protects them only when it runs setuid; here they are bound read-only (where present).
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")


def compile_bwrap(
    resolved: ResolvedSandbox,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    bridge: NetworkBridge | None = None,
) -> list[str]:
    """The whole bwrap argv that runs ``argv`` inside ``resolved``.

    The child's environment is bwrap's own: start bwrap with exactly ``env`` (and nothing
    else) as its environment. ``env`` is checked here, but none of its values is put in the
    argv, where every local user could read it.

    ``bridge`` is required for ``network = "restricted"`` and refused for the other modes.
    ``env``'s HOME and TMPDIR, when set, must be the resolved per-run directories.
    """
    if resolved.backend != "bwrap":
        raise SandboxRefused(
            f"compile_bwrap was given a sandbox resolved for {resolved.backend}; resolve it with"
            ' backend="bwrap"'
        )
    if not argv:
        raise SandboxRefused("the command to run inside the sandbox is empty; pass its argv")
    network = resolved.profile.network
    _check_bridge(network, bridge)
    _check_env(env, resolved)

    out = [resolved.launcher, "--die-with-parent", "--new-session", "--unshare-all"]
    if network is NetworkMode.OPEN:
        out.append("--share-net")
    # No --clearenv/--setenv: a value in the argv is readable by every local user
    # (/proc/<pid>/cmdline) and lands in run records and logs. The caller starts bwrap with
    # exactly ``env`` as its environment, and bwrap hands it on to the child unchanged.
    out += ["--cap-drop", "ALL"]
    out += ["--proc", "/proc", "--dev", "/dev"]
    for path in PROC_READ_ONLY:
        out += ["--ro-bind-try", path, path]
    for _dest, op in _mounts(resolved, bridge):
        out += op
    out += ["--remount-ro", "/", "--chdir", resolved.worktree, "--"]
    if bridge is not None:
        out += bridge.relay
    out += argv
    return out


def _mounts(resolved: ResolvedSandbox, bridge: NetworkBridge | None) -> list[tuple[str, list[str]]]:
    """Mount operations keyed by destination, ordered parent before child."""
    ops: dict[str, list[str]] = {}

    def add(dest: str, op: list[str]) -> None:
        existing = ops.get(dest)
        if existing is not None and existing != op:
            raise SandboxRefused(
                f"{dest} would be mounted twice in different ways ({' '.join(existing[:1])} and"
                f" {' '.join(op[:1])}); give each mounted path its own directory"
            )
        ops[dest] = op

    open_net = resolved.profile.network is NetworkMode.OPEN
    for bind in resolved.system_binds:
        if bind.dest in NETWORK_PATHS and not open_net:
            continue
        add(bind.dest, ["--ro-bind", bind.source, bind.dest])
    for link in resolved.system_symlinks:
        if link.path in NETWORK_PATHS and not open_net:
            continue
        add(link.path, ["--symlink", link.target, link.path])
    for d in resolved.agent_dirs:
        add(d, ["--ro-bind", d, d])
    wt_flag = "--bind" if resolved.profile.worktree is WorktreeAccess.READ_WRITE else "--ro-bind"
    add(resolved.worktree, [wt_flag, resolved.worktree, resolved.worktree])
    if resolved.git_binds is None:
        add(resolved.git_dir, ["--ro-bind", resolved.git_dir, resolved.git_dir])
    else:
        for bind in resolved.git_binds:
            add(bind.dest, ["--ro-bind", bind.source, bind.dest])
    if resolved.git_file is not None:
        add(resolved.git_file, ["--ro-bind", resolved.git_file, resolved.git_file])
    add(resolved.home, ["--bind", resolved.home, resolved.home])
    add(resolved.tmpdir, ["--bind", resolved.tmpdir, resolved.tmpdir])
    if bridge is not None:
        for p in bridge.relay_paths:
            add(p, ["--ro-bind", p, p])
        sock = bridge.sandbox_socket
        for dest in ops:
            if is_within(sock, dest) or is_within(dest, sock):
                raise SandboxRefused(
                    f"the proxy socket's place in the sandbox {sock} overlaps the mounted path"
                    f" {dest}; put it under a directory nothing else is mounted on, such as"
                    " /run/asup"
                )
        add(sock, ["--ro-bind", bridge.host_socket, sock])
    return sorted(ops.items(), key=lambda item: _depth_key(item[0]))


def _depth_key(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part)


def _check_bridge(network: NetworkMode, bridge: NetworkBridge | None) -> None:
    if network is NetworkMode.RESTRICTED and bridge is None:
        raise SandboxRefused(
            'network = "restricted" needs a bridge to the host-side proxy, and without one the'
            " child could reach nothing it is allowed to; start the proxy and pass its"
            " NetworkBridge"
        )
    if network is not NetworkMode.RESTRICTED and bridge is not None:
        raise SandboxRefused(
            f'a proxy bridge was passed for network = "{network.value}"; a bridge is only for'
            ' network = "restricted"'
        )


def _check_env(env: Mapping[str, str], resolved: ResolvedSandbox) -> None:
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise SandboxRefused(
                "the child's environment holds a name that is empty or contains '=' or NUL, or"
                " a value with NUL; build it with supervisor.env.build_child_env"
            )
    for name, expected in (("HOME", resolved.home), ("TMPDIR", resolved.tmpdir)):
        if name in env and env[name] != expected:
            raise SandboxRefused(
                f"the child's {name} is not the per-run directory mounted for it ({expected});"
                f" build the environment with the resolved sandbox's {name.lower()}"
            )
