"""The plan that puts the bridge in front of a restricted child, on the host.

A child under ``network = "restricted"`` runs in a network namespace of its own with nothing but
loopback; its one way out is the host-side proxy (:mod:`supervisor.sandbox.proxy`), whose unix
socket is bind-mounted into the sandbox. In front of the child runs the bridge,
:mod:`supervisor.sandbox.relay`: a small standalone script that refuses to start outside a
network namespace of its own, listens on the sandbox's loopback, forks a relay to the socket and
``exec``\\ s the child (see its docstring).

This module is the host side: :func:`compile_restricted_network` turns a
:class:`~supervisor.sandbox.netpolicy.NetworkPolicy` into the bridge's command line
(``<python> -I -S <…>/supervisor/sandbox/relay.py --listen 127.0.0.1:3128 --unix
/run/asup/proxy.sock [--forward PORT=NAME:PORT ...] --``), the paths it needs mounted
(:class:`BridgeRuntime`) and the child's proxy variables (:func:`proxy_env`). It re-exports the
relay's stream helpers (used by the proxy too), :func:`isolation_problem`, :data:`EXIT_REFUSED`
and :func:`main`, so ``python -m supervisor.sandbox.bridge …`` still runs the bridge.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from supervisor.sandbox import relay as _relay
from supervisor.sandbox.relay import (
    EXIT_REFUSED,
    Stream,
    close_writer,
    finish_answer,
    isolation_problem,
    main,
    splice,
)

if TYPE_CHECKING:
    from supervisor.sandbox.bwrap import NetworkBridge
    from supervisor.sandbox.netpolicy import NetworkPolicy

__all__ = [
    "DEFAULT_PROXY_PORT",
    "EXIT_REFUSED",
    "NO_PROXY_HOSTS",
    "SANDBOX_SOCKET",
    "BridgeRuntime",
    "RestrictedNetwork",
    "Stream",
    "close_writer",
    "compile_restricted_network",
    "finish_answer",
    "isolation_problem",
    "main",
    "proxy_env",
    "relay_argv",
    "splice",
]

DEFAULT_PROXY_PORT = 3128
SANDBOX_SOCKET = "/run/asup/proxy.sock"
NO_PROXY_HOSTS = "127.0.0.1,localhost,::1"


# --- the plan (on the host) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BridgeRuntime:
    """What runs the bridge inside the sandbox: a Python interpreter, the relay script
    (:mod:`supervisor.sandbox.relay`), and the host paths (resolved) to mount read-only so both
    work there."""

    interpreter: str
    script: str
    paths: tuple[str, ...]

    @classmethod
    def current(cls) -> BridgeRuntime:
        """The interpreter running the supervisor and the relay script. Looks at the disk (resolves
        symlinks). Mounts the interpreter's installation (``sys.base_prefix``), which is
        already inside ``/usr`` for a system Python."""
        from supervisor.errors import SandboxUnavailable

        if not sys.executable:
            raise SandboxUnavailable(
                "the supervisor's Python interpreter has no path (sys.executable is empty), so"
                " the network bridge cannot run in the sandbox; run asup from a normal Python"
            )
        interpreter = os.path.realpath(sys.executable)
        prefix = os.path.realpath(sys.base_prefix)
        if prefix == "/":
            raise SandboxUnavailable(
                "the supervisor's Python is installed at /, which cannot be mounted into the"
                " sandbox for the network bridge; use a Python installed under a prefix"
            )
        home = os.path.realpath(os.path.expanduser("~"))
        if home != "/" and (prefix == home or home.startswith(prefix.rstrip("/") + "/")):
            raise SandboxUnavailable(
                f"the supervisor's Python is installed at {prefix}, which holds the home"
                f" directory {home}; mounting it for the network bridge would show the sandbox"
                " all of it. Run asup from a Python installed outside the home directory"
                " (a venv made from it is fine)"
            )
        script = os.path.realpath(_relay.__file__)
        paths = [prefix, script]
        if not interpreter.startswith(prefix + "/"):
            paths.append(interpreter)
        return cls(interpreter=interpreter, script=script, paths=tuple(paths))


@dataclass(frozen=True, slots=True)
class RestrictedNetwork:
    """Everything a restricted run needs besides the proxy itself: ``env`` for the child
    (pass it to ``build_child_env(extra=…)``) and ``bridge`` for ``compile_bwrap(bridge=…)``."""

    env: Mapping[str, str]
    bridge: NetworkBridge
    proxy_port: int


def proxy_env(proxy_port: int) -> dict[str, str]:
    """The child's proxy variables. Loopback goes direct (``NO_PROXY``): inside the sandbox it
    is the sandbox's own loopback, where the forwards listen and the child's own servers run,
    and the proxy would refuse the host's loopback anyway."""
    url = f"http://127.0.0.1:{proxy_port}"
    return {
        "HTTPS_PROXY": url,
        "HTTP_PROXY": url,
        "NODE_USE_ENV_PROXY": "1",
        "NO_PROXY": NO_PROXY_HOSTS,
        "http_proxy": url,
        "https_proxy": url,
        "no_proxy": NO_PROXY_HOSTS,
    }


def relay_argv(
    runtime: BridgeRuntime,
    *,
    proxy_port: int,
    sandbox_socket: str,
    forwards: Sequence[tuple[int, str, int]] = (),
) -> tuple[str, ...]:
    """The argv prefix that starts the bridge in the sandbox; the child's argv follows it."""
    argv = [runtime.interpreter, "-I", "-S", runtime.script]
    argv += ["--listen", f"127.0.0.1:{proxy_port}", "--unix", sandbox_socket]
    for listen_port, name, port in forwards:
        argv += ["--forward", f"{listen_port}={name}:{port}"]
    return (*argv, "--")


def compile_restricted_network(
    policy: NetworkPolicy,
    *,
    host_socket: str,
    runtime: BridgeRuntime,
    sandbox_socket: str = SANDBOX_SOCKET,
    proxy_port: int | None = None,
) -> RestrictedNetwork:
    """The child's proxy variables and the :class:`NetworkBridge` for one restricted run. Pure.

    Each forward listens inside the sandbox on the same port number it has on the host, so a
    URL such as ``http://127.0.0.1:8080`` means the same inside and out. ``proxy_port`` (the
    bridge's proxy listener) defaults to the first port from 3128 no forward uses. Ports below
    1024 are refused: an unprivileged sandbox cannot listen on them.
    """
    from supervisor.sandbox.bwrap import NetworkBridge
    from supervisor.sandbox.profile import SandboxRefused

    taken = {f.port for f in policy.forwards}
    for f in policy.forwards:
        if f.port < 1024:
            raise SandboxRefused(
                f"forward {f.name} uses port {f.port}, below 1024, where the sandbox cannot"
                " listen; serve it on a port of 1024 or above"
            )
    if proxy_port is None:
        proxy_port = next(p for p in range(DEFAULT_PROXY_PORT, 65536) if p not in taken)
    elif not 1024 <= proxy_port <= 65535 or proxy_port in taken:
        raise SandboxRefused(
            f"the bridge's proxy port {proxy_port} is below 1024, above 65535 or used by a"
            " forward; pick a free port from 1024 to 65535 or leave it to the default"
        )
    relay = relay_argv(
        runtime,
        proxy_port=proxy_port,
        sandbox_socket=sandbox_socket,
        forwards=[(f.port, f.name, f.port) for f in policy.forwards],
    )
    bridge = NetworkBridge(
        host_socket=host_socket,
        sandbox_socket=sandbox_socket,
        relay=relay,
        relay_paths=runtime.paths,
    )
    return RestrictedNetwork(
        env=MappingProxyType(proxy_env(proxy_port)), bridge=bridge, proxy_port=proxy_port
    )


if __name__ == "__main__":
    sys.exit(main())
