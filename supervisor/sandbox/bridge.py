"""The relay inside a restricted sandbox, and the plan that puts it there.

A child under ``network = "restricted"`` runs in a network namespace of its own with nothing but
loopback. Its one way out is the host-side proxy (:mod:`supervisor.sandbox.proxy`), whose unix
socket is bind-mounted into the sandbox. This module is the relay that runs in front of the
child inside the sandbox:

- on ``127.0.0.1:<proxy port>`` it accepts TCP connections and relays each, byte for byte, to
  the unix socket, so the child's ``HTTPS_PROXY=http://127.0.0.1:<port>`` reaches the proxy;
- on each forward's port (``--forward 8080=model:8080``, on 127.0.0.1 and, where the namespace
  has it, ::1) it opens the unix socket, asks the proxy for ``CONNECT model:8080`` and relays the
  connection, so ``http://127.0.0.1:8080`` inside reaches the host's ``127.0.0.1:8080``;
- before anything else it refuses to start when any interface but ``lo`` is up: outside a
  network namespace of its own, the proxy would not be the only way out.

Given a command after ``--``, it binds its listeners, forks, and the original process ``exec``\\ s
the command: the child keeps the relay's pid (so bwrap waits for it, its exit status and signals
are its own, and its stdin/stdout are untouched). The relay runs in the forked process with
stdin/stdout on /dev/null; it is killed when the child exits (``PR_SET_PDEATHSIG``, and the
sandbox's pid namespace ends with the child in any case).

Inside the sandbox this file runs as a plain script, so at import time it uses only the standard
library: ``<python> -I -S <this file> --listen 127.0.0.1:3128 --unix /run/asup/proxy.sock
[--forward PORT=NAME:PORT ...] -- <child argv>``. ``-I -S`` keep the child's environment
(``PYTHONPATH``, ``PYTHONHOME``…) and site-packages out of it. On the host,
:func:`compile_restricted_network` turns a :class:`~supervisor.sandbox.netpolicy.NetworkPolicy`
into that command line, the mounts it needs and the child's proxy variables.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import functools
import ipaddress
import os
import signal
import socket
import stat
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

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
EXIT_REFUSED = 125
"""Exit status when the bridge refuses to start; the child never ran."""

_CHUNK = 64 * 1024
_HEAD_LIMIT = 16 * 1024
_TIMEOUT_S = 30.0
_SIOCGIFFLAGS = 0x8913
_IFF_UP = 0x1
_PR_SET_PDEATHSIG = 1


# --- shared by the relay and the proxy ----------------------------------------------------------

# asyncio is imported only where it runs: the bridge starts in front of every restricted child,
# and importing asyncio (with ssl and concurrent.futures) is most of its start-up time.
Stream = tuple["asyncio.StreamReader", "asyncio.StreamWriter"]


async def splice(
    left: Stream, right: Stream, *, chunk: int = _CHUNK, idle_timeout: float | None = None
) -> None:
    """Copy bytes both ways until both directions reached end of file, either side failed, or
    nothing moved either way for ``idle_timeout`` seconds (None: no limit). An end of file is
    passed on as a half-close. Every write waits for the transport to drain, so each direction
    holds at most ``chunk`` bytes plus the transport's high-water mark. The writers stay open."""
    import asyncio

    loop = asyncio.get_running_loop()
    last = [loop.time()]

    async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while True:
            if idle_timeout is None:
                data = await src.read(chunk)
            else:
                remaining = last[0] + idle_timeout - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                try:
                    data = await asyncio.wait_for(src.read(chunk), remaining)
                except TimeoutError:
                    continue
            if not data:
                if dst.can_write_eof():
                    with contextlib.suppress(OSError):
                        dst.write_eof()
                return
            last[0] = loop.time()
            dst.write(data)
            await dst.drain()

    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(copy(left[0], right[1]))
            tg.create_task(copy(right[0], left[1]))
    except* (OSError, TimeoutError):
        pass


async def finish_answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, limit: int = _CHUNK
) -> None:
    """After a final answer: half-close, then read and drop what the peer still sends (up to
    ``limit`` bytes, for a second at most), so closing does not reset the connection before
    the peer has read the answer."""
    import asyncio

    with contextlib.suppress(OSError, TimeoutError):
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(1.0):
            dropped = 0
            while dropped <= limit and (data := await reader.read(_CHUNK)):
                dropped += len(data)


async def close_writer(writer: asyncio.StreamWriter) -> None:
    """Close ``writer`` and wait (briefly) for it, ignoring a peer that is already gone."""
    import asyncio

    writer.close()
    with contextlib.suppress(OSError, TimeoutError):
        await asyncio.wait_for(writer.wait_closed(), 5.0)


# --- the relay (inside the sandbox) -------------------------------------------------------------


def isolation_problem(interfaces: Iterable[tuple[str, bool]]) -> str | None:
    """Why the relay must not run here, given (interface name, is up) pairs; None when only
    loopback is up, i.e. the proxy is the only way out of this network namespace."""
    up = sorted(name for name, is_up in interfaces if is_up and name != "lo")
    if not up:
        return None
    return (
        f"network interface(s) {', '.join(up)} are up besides loopback, so a child could reach"
        " the network without the proxy; run the bridge only inside a network namespace of its"
        " own (bwrap --unshare-net)"
    )


def _interfaces() -> list[tuple[str, bool]]:
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _index, name in socket.if_nameindex():
            request = struct.pack("16sh", name.encode()[:15], 0)
            flags = struct.unpack("16sh", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, request))[1]
            found.append((name, bool(flags & _IFF_UP)))
    return found


@dataclass(frozen=True, slots=True)
class _Args:
    listen: tuple[str, int]
    unix: str
    forwards: tuple[tuple[int, str, int], ...]
    check_isolation: bool
    command: tuple[str, ...]


def _loopback_endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    try:
        if not sep or not ipaddress.ip_address(host).is_loopback:
            raise ValueError
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a loopback HOST:PORT") from None
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port {number} is out of range")
    return host, number


def _forward_spec(text: str) -> tuple[int, str, int]:
    listen, sep, target = text.partition("=")
    name, sep2, port = target.rpartition(":")
    try:
        if not (sep and sep2 and name):
            raise ValueError
        spec = (int(listen), name, int(port))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not LISTEN_PORT=NAME:PORT") from None
    if not (1 <= spec[0] <= 65535 and 1 <= spec[2] <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r} has a port out of range")
    return spec


def _parse(argv: Sequence[str]) -> _Args:
    argv = list(argv)
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="asup-bridge",
        description="Relay the sandbox's loopback to the asup proxy's unix socket, then run"
        " the command after '--'.",
    )
    parser.add_argument("--listen", required=True, type=_loopback_endpoint, metavar="HOST:PORT")
    parser.add_argument("--unix", required=True, metavar="PATH")
    parser.add_argument(
        "--forward", action="append", default=[], type=_forward_spec, metavar="PORT=NAME:PORT"
    )
    parser.add_argument(
        "--danger-no-isolation-check",
        action="store_true",
        help="start even when interfaces besides loopback are up (tests only)",
    )
    ns = parser.parse_args(argv)
    return _Args(
        listen=ns.listen,
        unix=ns.unix,
        forwards=tuple(ns.forward),
        check_isolation=not ns.danger_no_isolation_check,
        command=tuple(command),
    )


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _bind_all(args: _Args) -> list[tuple[socket.socket, bytes | None]]:
    """The listening sockets, each with the preamble its connections start with."""
    bound: list[tuple[socket.socket, bytes | None]] = []
    try:
        bound.append((_listen(*args.listen), None))
        for listen_port, name, port in args.forwards:
            preamble = f"CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n".encode()
            bound.append((_listen("127.0.0.1", listen_port), preamble))
            try:
                bound.append((_listen("::1", listen_port), preamble))
            except OSError as exc:
                if exc.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                    raise
    except OSError:
        for sock, _ in bound:
            sock.close()
        raise
    return bound


async def _relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    unix_path: str,
    preamble: bytes | None,
) -> None:
    import asyncio

    try:
        up = await asyncio.wait_for(
            asyncio.open_unix_connection(unix_path, limit=_HEAD_LIMIT), _TIMEOUT_S
        )
    except (OSError, TimeoutError):
        await close_writer(writer)
        return
    try:
        if preamble is not None:
            up[1].write(preamble)
            await up[1].drain()
            head = await asyncio.wait_for(up[0].readuntil(b"\r\n\r\n"), _TIMEOUT_S)
            if head.split(b" ", 2)[1:2] != [b"200"]:
                # the proxy refused: hand its answer to the client and hang up
                writer.write(head + await asyncio.wait_for(up[0].read(_HEAD_LIMIT), _TIMEOUT_S))
                await finish_answer(reader, writer)
                return
        await splice((reader, writer), up)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    except asyncio.CancelledError:
        pass  # the relay is stopping; a cancelled connection task would only be logged
    finally:
        await close_writer(up[1])
        await close_writer(writer)


async def _serve(listeners: Sequence[tuple[socket.socket, bytes | None]], unix_path: str) -> None:
    """Relay every connection on ``listeners`` until SIGTERM or SIGINT."""
    import asyncio

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    servers = [
        await asyncio.start_server(
            functools.partial(_relay, unix_path=unix_path, preamble=preamble),
            sock=sock,
            limit=_HEAD_LIMIT,
        )
        for sock, preamble in listeners
    ]
    try:
        await stop.wait()
    finally:
        for server in servers:
            server.close()


def _become_relay(parent: int) -> None:
    """In the forked relay: die with the child, keep off its stdin and stdout."""
    with contextlib.suppress(ImportError, OSError, AttributeError):
        import ctypes  # not every Python has it; the pid namespace ends the relay regardless

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)


def _say(message: str) -> None:
    print(f"asup-bridge: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bridge; see the module docstring. Returns :data:`EXIT_REFUSED` when it refuses to
    start, 126/127 when the command cannot be run; with a command, does not return otherwise."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.check_isolation and (problem := isolation_problem(_interfaces())) is not None:
        _say(f"refusing to start: {problem}")
        return EXIT_REFUSED
    try:
        is_socket = stat.S_ISSOCK(os.stat(args.unix).st_mode)
    except OSError:
        is_socket = False
    if not is_socket:
        _say(
            f"refusing to start: {args.unix} is not the proxy's unix socket; mount the host"
            " socket there"
        )
        return EXIT_REFUSED
    try:
        listeners = _bind_all(args)
    except OSError as exc:
        _say(f"refusing to start: cannot listen on the sandbox's loopback: {exc.strerror}")
        return EXIT_REFUSED

    if not args.command:
        import asyncio

        asyncio.run(_serve(listeners, args.unix))
        return 0

    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:
        status = 0
        try:
            _become_relay(parent)
            import asyncio  # in the relay only: the child is exec'd without waiting for it

            asyncio.run(_serve(listeners, args.unix))
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    for sock, _ in listeners:
        sock.close()
    try:
        os.execvp(args.command[0], args.command)
    except OSError as exc:
        _say(f"cannot run {args.command[0]}: {exc.strerror}")
        return 126 if exc.errno == errno.EACCES else 127


# --- the plan (on the host) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BridgeRuntime:
    """What runs the bridge inside the sandbox: a Python interpreter, this file, and the host
    paths (resolved) to mount read-only so both work there."""

    interpreter: str
    script: str
    paths: tuple[str, ...]

    @classmethod
    def current(cls) -> BridgeRuntime:
        """The interpreter running the supervisor and this file. Looks at the disk (resolves
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
        script = os.path.realpath(__file__)
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
