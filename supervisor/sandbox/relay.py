"""The bridge inside a restricted sandbox: relay loopback to the proxy's socket, run the child.

A child under ``network = "restricted"`` runs in a network namespace of its own with nothing but
loopback. Its one way out is the host-side proxy (:mod:`supervisor.sandbox.proxy`), whose unix
socket is bind-mounted into the sandbox. This script runs in front of the child there:

- on ``127.0.0.1:<proxy port>`` it accepts TCP connections and relays each, byte for byte, to
  the unix socket, so the child's ``HTTPS_PROXY=http://127.0.0.1:<port>`` reaches the proxy;
- on each forward's port (``--forward 8080=model:8080``, on 127.0.0.1 and, where the namespace
  has it, ::1) it opens the unix socket, asks the proxy for ``CONNECT model:8080`` and relays the
  connection, so ``http://127.0.0.1:8080`` inside reaches the host's ``127.0.0.1:8080``;
- before anything else it refuses to start (exit 125) when any interface but ``lo`` is up:
  outside a network namespace of its own, the proxy would not be the only way out.

Given a command after ``--``, it binds its listeners, forks, and the original process ``exec``\\ s
the command: the child keeps the relay's pid (so bwrap waits for it, its exit status and signals
are its own, and its stdin/stdout are untouched). The relay runs in the forked process with
stdin/stdout on /dev/null; it is killed when the child exits (``PR_SET_PDEATHSIG``, and the
sandbox's pid namespace ends with the child in any case).

It runs as a plain script, ``<python> -I -S relay.py --listen 127.0.0.1:3128 --unix
/run/asup/proxy.sock [--forward PORT=NAME:PORT ...] -- <child argv>``, in front of every
restricted child, so what runs before the ``exec`` is kept to the bone: at the top level it
imports only modules the interpreter has already loaded (``posix``, ``sys``) and C modules
(``_socket``, ``_stat``, ``errno``, ``fcntl``), not ``os``, ``socket``, ``struct`` or ``signal``
(``socket`` alone loads ``selectors``, ``collections`` and ``enum``); it packs the ``ioctl``
request, searches ``PATH`` for the command (as ``os.execvp`` does) and parses its fixed argv by
hand. ``socket``, ``signal`` and ``asyncio`` (and ``ctypes``, ``contextlib``) are imported in
the forked relay only. The host-side plan that builds this command line is
:mod:`supervisor.sandbox.bridge`, which also re-exports the stream helpers defined here.
"""

import _socket
import _stat
import errno
import fcntl
import posix
import sys

TYPE_CHECKING = False  # typing is not imported: it costs start-up time in front of every child
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable, Iterable, Sequence
    from typing import NoReturn

__all__ = [
    "EXIT_REFUSED",
    "USAGE",
    "ArgumentError",
    "Stream",
    "close_writer",
    "finish_answer",
    "isolation_problem",
    "main",
    "splice",
]

EXIT_REFUSED = 125
"""Exit status when the bridge refuses to start (bad arguments included); the child never ran."""
USAGE = (
    "usage: asup-bridge --listen HOST:PORT --unix PATH [--forward PORT=NAME:PORT]..."
    " [--danger-no-isolation-check] [-- COMMAND [ARG]...]"
)
_HELP = f"""{USAGE}

Relay the sandbox's loopback to the asup proxy's unix socket, then run the command after '--'.

  --listen HOST:PORT          loopback address of the proxy listener (127.0.0.1:3128)
  --unix PATH                 the proxy's unix socket inside the sandbox
  --forward PORT=NAME:PORT    listen on PORT (127.0.0.1 and ::1), CONNECT NAME:PORT through
                              the proxy; repeatable
  --danger-no-isolation-check start even when interfaces besides loopback are up (tests only)
"""

_CHUNK = 64 * 1024
_HEAD_LIMIT = 16 * 1024
_TIMEOUT_S = 30.0
_SIOCGIFFLAGS = 0x8913
_IFF_UP = 0x1
_PR_SET_PDEATHSIG = 1
_IPV6_LOOPBACK = bytes(15) + b"\x01"
_DEVNULL = "/dev/null"
_DEFAULT_PATH = "/bin:/usr/bin"  # os.defpath


# --- stream helpers, shared with the host-side proxy (imported there through the bridge) --------

Stream = tuple["asyncio.StreamReader", "asyncio.StreamWriter"]


async def splice(
    left: Stream, right: Stream, *, chunk: int = _CHUNK, idle_timeout: float | None = None
) -> None:
    """Copy bytes both ways until both directions reached end of file, either side failed, or
    nothing moved either way for ``idle_timeout`` seconds (None: no limit). An end of file is
    passed on as a half-close. Every write waits for the transport to drain, so each direction
    holds at most ``chunk`` bytes plus the transport's high-water mark. The writers stay open."""
    import asyncio
    import contextlib

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
    reader: "asyncio.StreamReader", writer: "asyncio.StreamWriter", *, limit: int = _CHUNK
) -> None:
    """After a final answer: half-close, then read and drop what the peer still sends (up to
    ``limit`` bytes, for a second at most), so closing does not reset the connection before
    the peer has read the answer."""
    import asyncio
    import contextlib

    with contextlib.suppress(OSError, TimeoutError):
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(1.0):
            dropped = 0
            while dropped <= limit and (data := await reader.read(_CHUNK)):
                dropped += len(data)


async def close_writer(writer: "asyncio.StreamWriter") -> None:
    """Close ``writer`` and wait (briefly) for it, ignoring a peer that is already gone."""
    import asyncio
    import contextlib

    writer.close()
    with contextlib.suppress(OSError, TimeoutError):
        await asyncio.wait_for(writer.wait_closed(), 5.0)


# --- before the fork: arguments, checks, listeners ----------------------------------------------


def isolation_problem(interfaces: "Iterable[tuple[str, bool]]") -> str | None:
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
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        for _index, name in _socket.if_nameindex():
            # struct ifreq's head, as struct.pack("16sh", name, 0): the name NUL-padded to 16
            # bytes, then the flags (a native short)
            request = name.encode()[:15].ljust(16, b"\0") + bytes(2)
            answer = fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, request)
            flags = int.from_bytes(answer[16:18], sys.byteorder, signed=True)
            found.append((name, bool(flags & _IFF_UP)))
    finally:
        s.close()
    return found


class ArgumentError(ValueError):
    """The bridge's argv is not the shape ``relay_argv`` produces."""


class _Args:
    __slots__ = ("check_isolation", "command", "forwards", "listen", "unix")

    def __init__(
        self,
        listen: tuple[str, int],
        unix: str,
        forwards: tuple[tuple[int, str, int], ...],
        check_isolation: bool,
        command: tuple[str, ...],
    ) -> None:
        self.listen = listen
        self.unix = unix
        self.forwards = forwards
        self.check_isolation = check_isolation
        self.command = command


def _port(text: str) -> int | None:
    """``text`` as a port number 1-65535 (ASCII digits only), else None."""
    if not (text.isascii() and text.isdigit()) or len(text) > 5:
        return None
    number = int(text)
    return number if 1 <= number <= 65535 else None


def _is_loopback(host: str) -> bool:
    """127.0.0.0/8 in dotted-quad form, or ::1 (any spelling ``inet_pton`` reads)."""
    try:
        return _socket.inet_pton(_socket.AF_INET, host)[0] == 127
    except (OSError, ValueError):
        pass
    try:
        return _socket.inet_pton(_socket.AF_INET6, host) == _IPV6_LOOPBACK
    except (OSError, ValueError):
        return False


def _loopback_endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not _is_loopback(host):
        raise ArgumentError(f"--listen {text!r} is not a loopback HOST:PORT")
    number = _port(port)
    if number is None:
        raise ArgumentError(f"--listen {text!r}: port {port!r} is not a number from 1 to 65535")
    return host, number


def _forward_spec(text: str) -> tuple[int, str, int]:
    listen, sep, target = text.partition("=")
    name, sep2, port = target.rpartition(":")
    if not (sep and sep2 and name) or not name.isprintable() or " " in name:
        raise ArgumentError(f"--forward {text!r} is not LISTEN_PORT=NAME:PORT")
    listen_port, target_port = _port(listen), _port(port)
    if listen_port is None or target_port is None:
        raise ArgumentError(f"--forward {text!r} has a port that is not a number from 1 to 65535")
    return listen_port, name, target_port


def _parse(argv: "Sequence[str]") -> _Args:
    """The fixed shape ``relay_argv`` produces (``--opt VALUE`` or ``--opt=VALUE``, in any
    order, before ``--``). Raises :class:`ArgumentError` with a one-line reason."""
    argv = list(argv)
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    listen: tuple[str, int] | None = None
    unix: str | None = None
    forwards: list[tuple[int, str, int]] = []
    check_isolation = True
    i = 0
    while i < len(argv):
        option, eq, value = argv[i].partition("=")
        i += 1
        if option == "--danger-no-isolation-check" and not eq:
            check_isolation = False
            continue
        if option not in ("--listen", "--unix", "--forward"):
            raise ArgumentError(f"unexpected argument {argv[i - 1]!r}")
        if not eq:
            if i == len(argv):
                raise ArgumentError(f"{option} needs a value")
            value = argv[i]
            i += 1
        if option == "--forward":
            forwards.append(_forward_spec(value))
        elif option == "--listen":
            if listen is not None:
                raise ArgumentError("--listen is given more than once")
            listen = _loopback_endpoint(value)
        else:
            if unix is not None:
                raise ArgumentError("--unix is given more than once")
            if not value:
                raise ArgumentError("--unix needs a path")
            unix = value
    if listen is None or unix is None:
        raise ArgumentError("--listen and --unix are required")
    return _Args(listen, unix, tuple(forwards), check_isolation, tuple(command))


def _listen(host: str, port: int) -> _socket.socket:
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        if family == _socket.AF_INET6:
            sock.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _bind_all(args: _Args) -> list[tuple[_socket.socket, bytes | None]]:
    """The listening sockets, each with the preamble its connections start with."""
    bound: list[tuple[_socket.socket, bytes | None]] = []
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


def _execvp(file: str, args: tuple[str, ...]) -> "NoReturn":
    """``os.execvp`` without ``os``: ``file`` as is when it has a slash, else the first entry
    of ``PATH`` (``/bin:/usr/bin`` when unset; an empty entry is the working directory) that
    can be run. Never returns: raises what ``os.execvp`` raises, the first error that is not
    "no such file" or "not a directory", else the last."""
    if "/" in file:
        posix.execv(file, args)
    path = posix.environ.get(b"PATH")
    dirs = (
        _DEFAULT_PATH
        if path is None
        else path.decode(sys.getfilesystemencoding(), "surrogateescape")
    ).split(":")
    saved: OSError | None = None
    last: OSError | None = None
    for directory in dirs:
        if not directory:
            full = file
        elif directory.endswith("/"):
            full = directory + file
        else:
            full = f"{directory}/{file}"
        try:
            posix.execv(full, args)
        except (FileNotFoundError, NotADirectoryError) as exc:
            last = exc
        except OSError as exc:
            last = exc
            if saved is None:
                saved = exc
    raise saved or last or FileNotFoundError(errno.ENOENT, "No such file or directory", file)


# --- after the fork: the relay (asyncio) --------------------------------------------------------


async def _relay(
    reader: "asyncio.StreamReader",
    writer: "asyncio.StreamWriter",
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


async def _serve(
    listeners: "Sequence[tuple[_socket.socket, bytes | None]]", unix_path: str
) -> None:
    """Relay every connection on ``listeners`` until SIGTERM or SIGINT."""
    import asyncio
    import signal
    import socket

    def handler(
        preamble: bytes | None,
    ) -> "Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]":
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _relay(reader, writer, unix_path=unix_path, preamble=preamble)

        return handle

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    servers = [
        # asyncio wants a socket.socket: the same descriptor, under the full class
        await asyncio.start_server(
            handler(preamble), sock=socket.socket(fileno=sock.detach()), limit=_HEAD_LIMIT
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
    import signal

    try:
        import ctypes  # not every Python has it; the pid namespace ends the relay regardless

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass
    if posix.getppid() != parent:
        posix._exit(0)
    null = posix.open(_DEVNULL, posix.O_RDWR)
    posix.dup2(null, 0)
    posix.dup2(null, 1)
    posix.close(null)


def _say(message: str) -> None:
    print(f"asup-bridge: {message}", file=sys.stderr, flush=True)


def main(argv: "Sequence[str] | None" = None) -> int:
    """Run the bridge; see the module docstring. Returns :data:`EXIT_REFUSED` when it refuses to
    start (bad arguments included), 126/127 when the command cannot be run; with a command,
    does not return otherwise."""
    argv = sys.argv[1:] if argv is None else list(argv)
    options = argv[: argv.index("--")] if "--" in argv else argv
    if "-h" in options or "--help" in options:
        sys.stdout.write(_HELP)
        return 0
    try:
        args = _parse(argv)
    except ArgumentError as exc:
        _say(f"refusing to start: {exc}; {USAGE}")
        return EXIT_REFUSED
    if args.check_isolation and (problem := isolation_problem(_interfaces())) is not None:
        _say(f"refusing to start: {problem}")
        return EXIT_REFUSED
    try:
        is_socket = _stat.S_ISSOCK(posix.stat(args.unix).st_mode)
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

    parent = posix.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    if posix.fork() == 0:
        status = 0
        try:
            _become_relay(parent)
            import asyncio  # in the relay only: the child is exec'd without waiting for it

            asyncio.run(_serve(listeners, args.unix))
        except BaseException:
            status = 1
        finally:
            posix._exit(status)
    for sock, _ in listeners:
        sock.close()
    try:
        _execvp(args.command[0], args.command)
    except OSError as exc:
        _say(f"cannot run {args.command[0]}: {exc.strerror}")
        return 126 if exc.errno == errno.EACCES else 127


if __name__ == "__main__":
    sys.exit(main())
