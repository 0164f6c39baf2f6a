"""The host-side proxy of ``network = "restricted"``: one unix socket, every request judged.

The proxy listens on a unix socket (never TCP, so nothing on the host's network can use it),
which is bind-mounted into the sandbox and reached through the relay of
:mod:`supervisor.sandbox.bridge`. It speaks just enough HTTP/1.1:

- ``CONNECT host:port`` → ``200`` and a byte tunnel (TLS runs end to end inside it);
- ``GET http://host[:port]/path`` (any method, absolute form) → the request is sent on in origin
  form (``GET /path``) with ``Host`` set from the URL, hop-by-hop headers dropped and
  ``Connection: close``, then bytes flow both ways until either side closes.

For each request the proxy resolves the name itself (only when the policy would admit it, so a
refused name never reaches DNS), asks :func:`~supervisor.sandbox.netpolicy.decide`, records the
:class:`ProxyDecision`, and either answers ``403`` with the reason (body and the
``X-Asup-Proxy-Reason`` header) or connects to exactly the addresses the policy checked
(``AI_NUMERICHOST``: no second lookup, so DNS rebinding cannot change the destination).

Every wait has a timeout (:class:`ProxyLimits`), the request head and each buffer are bounded,
connections are capped, and :func:`open_proxy`'s teardown closes every tunnel and removes the
socket even when the caller is cancelled. It runs on asyncio (anyio's asyncio backend).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from supervisor.errors import SandboxUnavailable
from supervisor.sandbox.bridge import Stream, close_writer, finish_answer, splice
from supervisor.sandbox.netpolicy import NetworkPolicy, decide, needs_resolution

__all__ = [
    "REASON_HEADER",
    "NetworkProxy",
    "ProxyDecision",
    "ProxyLimits",
    "ProxyRequest",
    "RequestRefused",
    "Resolver",
    "open_proxy",
    "parse_request",
    "system_resolver",
]

REASON_HEADER = "X-Asup-Proxy-Reason"

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(name, port) → addresses``: how the proxy resolves a name. Tests inject their own."""

_STATUS = {
    200: "Connection established",
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "host",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    }
)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_AUTHORITY = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+))(?::([0-9]{1,5}))?")
_VERSIONS = frozenset({"HTTP/1.0", "HTTP/1.1"})


@dataclass(frozen=True, slots=True)
class ProxyDecision:
    """One judged request, as the supervisor shows it."""

    host: str
    port: int
    allowed: bool
    reason: str
    method: str


@dataclass(frozen=True, slots=True)
class ProxyLimits:
    """Bounds on what one client may hold. Times in seconds."""

    head_bytes: int = 32 * 1024
    chunk_bytes: int = 64 * 1024
    head_timeout: float = 30.0
    resolve_timeout: float = 10.0
    connect_timeout: float = 10.0
    idle_timeout: float = 300.0
    max_connections: int = 256
    max_logged: int = 10_000


class RequestRefused(ValueError):
    """A request the proxy cannot serve; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """A parsed request head. ``forward_head`` is what goes upstream (None for CONNECT)."""

    method: str
    host: str
    port: int
    forward_head: bytes | None


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    match = _AUTHORITY.fullmatch(text)
    if match is None:
        raise RequestRefused(400, f"{text!r} is not a host[:port]")
    host = match.group(1) or match.group(2)
    if match.group(3) is None:
        if default_port is None:
            raise RequestRefused(400, f"{text!r} has no port")
        return host, default_port
    port = int(match.group(3))
    if not 1 <= port <= 65535:
        raise RequestRefused(400, f"port {port} is out of range")
    return host, port


def parse_request(head: bytes) -> ProxyRequest:
    """A request head (through the blank line) → :class:`ProxyRequest`. Pure; raises
    :class:`RequestRefused` for anything this proxy does not serve."""
    lines = head.removesuffix(b"\r\n\r\n").split(b"\r\n")
    try:
        request_line = lines[0].decode("ascii")
    except UnicodeDecodeError:
        raise RequestRefused(400, "the request line is not ASCII") from None
    parts = request_line.split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or parts[2] not in _VERSIONS:
        raise RequestRefused(400, "the request line is not 'METHOD TARGET HTTP/1.x'")
    method, target, version = parts
    if any(not 0x21 <= ord(c) <= 0x7E for c in target):
        raise RequestRefused(400, "the request target holds a control character")

    headers: list[tuple[str, str]] = []
    for raw in lines[1:]:
        line = raw.decode("latin-1")
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name) or "\r" in value or "\n" in value:
            raise RequestRefused(400, "a header line is malformed")
        headers.append((name, value.strip(" \t")))

    if method == "CONNECT":
        host, port = _authority(target, None)
        return ProxyRequest(method, host, port, None)

    scheme, sep, rest = target.partition("://")
    if not sep or scheme.lower() != "http":
        if sep and scheme.lower() == "https":
            raise RequestRefused(400, "an https:// URL must go through CONNECT")
        raise RequestRefused(400, "send an absolute http:// URL or CONNECT to this proxy")
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:].partition("#")[0]
    if "@" in authority:
        raise RequestRefused(400, "credentials in the URL are refused")
    host, port = _authority(authority, 80)
    if not path.startswith("/"):
        path = "/" + path

    connection_named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() in ("connection", "proxy-connection")
        for token in value.split(",")
    }
    kept = [
        f"{name}: {value}"
        for name, value in headers
        if name.lower() not in _HOP_BY_HOP and name.lower() not in connection_named
    ]
    out = [f"{method} {path} {version}", f"Host: {authority}", *kept, "Connection: close", "", ""]
    return ProxyRequest(method, host, port, "\r\n".join(out).encode("latin-1"))


async def system_resolver(name: str, port: int) -> list[str]:
    """The host's resolver (``getaddrinfo``), addresses in its order without repeats."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _header_safe(text: str) -> str:
    return "".join(c if 0x20 <= ord(c) <= 0x7E else "?" for c in text)


class NetworkProxy:
    """The proxy server; use :func:`open_proxy` to run one. ``decisions`` holds the first
    ``limits.max_logged`` decisions (``dropped`` counts the rest); ``on_decision`` sees every
    one, before the request is served, and a request whose decision cannot be recorded (the
    callback raised) is refused."""

    def __init__(
        self,
        policy: NetworkPolicy,
        socket_path: str,
        *,
        resolver: Resolver = system_resolver,
        on_decision: Callable[[ProxyDecision], None] | None = None,
        limits: ProxyLimits = ProxyLimits(),
    ) -> None:
        self.policy = policy
        self.socket_path = socket_path
        self.limits = limits
        self.decisions: list[ProxyDecision] = []
        self.dropped = 0
        self._resolver = resolver
        self._on_decision = on_decision
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    async def start(self) -> None:
        """Listen on ``socket_path`` (which must not exist yet), readable by this user only."""
        path = self.socket_path
        if len(os.fsencode(path)) > 107:
            raise SandboxUnavailable(
                f"the proxy socket path {path} is longer than a unix socket allows (107 bytes);"
                " put it in a shorter directory"
            )
        if os.path.lexists(path):
            raise SandboxUnavailable(
                f"the proxy socket path {path} already exists; give each run's proxy a fresh"
                " path in a directory of its own"
            )
        try:
            self._server = await asyncio.start_unix_server(
                self._handle, path=path, limit=self.limits.head_bytes
            )
            os.chmod(path, 0o600)
        except OSError as exc:
            await self.aclose()
            raise SandboxUnavailable(
                f"the proxy cannot listen on {path}: {exc.strerror}; check that its directory"
                " exists and is writable"
            ) from exc

    async def aclose(self) -> None:
        """Stop accepting, cut every open tunnel, remove the socket."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)

    def _record(self, decision: ProxyDecision) -> bool:
        if len(self.decisions) < self.limits.max_logged:
            self.decisions.append(decision)
        else:
            self.dropped += 1
        if self._on_decision is None:
            return True
        try:
            self._on_decision(decision)
        except Exception:
            return False
        return True

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self._closing:
                return
            if len(self._tasks) > self.limits.max_connections:
                await self._reply(reader, writer, 503, "the proxy has too many open connections")
                return
            await self._serve(reader, writer)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # aclose() cut this connection; asyncio would log a cancelled handler task
        finally:
            self._tasks.discard(task)
            await close_writer(writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        limits = self.limits
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), limits.head_timeout)
        except asyncio.IncompleteReadError:
            return
        except asyncio.LimitOverrunError:
            await self._refuse(reader, writer, RequestRefused(431, "the request head is too large"))
            return
        except TimeoutError:
            await self._refuse(reader, writer, RequestRefused(408, "no request head in time"))
            return
        try:
            request = parse_request(head)
        except RequestRefused as exc:
            await self._refuse(reader, writer, exc)
            return

        addresses: Sequence[str] = ()
        name = needs_resolution(self.policy, request.host)
        if name is not None:
            with contextlib.suppress(OSError, TimeoutError, UnicodeError):
                addresses = await asyncio.wait_for(
                    self._resolver(name, request.port), limits.resolve_timeout
                )
        decision = decide(self.policy, request.host, request.port, addresses)
        logged = ProxyDecision(
            request.host, request.port, decision.allow, decision.reason, request.method
        )
        if not self._record(logged):
            await self._reply(reader, writer, 503, "the proxy could not record its decision")
            return
        if not decision.allow:
            await self._reply(reader, writer, 403, decision.reason)
            return

        upstream = await self._connect(decision.targets)
        if upstream is None:
            await self._reply(
                reader, writer, 502, f"could not connect to {request.host} port {request.port}"
            )
            return
        try:
            if request.forward_head is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                upstream[1].write(request.forward_head)
                await upstream[1].drain()
            await splice(
                (reader, writer),
                upstream,
                chunk=limits.chunk_bytes,
                idle_timeout=limits.idle_timeout,
            )
        finally:
            await close_writer(upstream[1])

    async def _connect(self, targets: Sequence[tuple[str, int]]) -> Stream | None:
        for address, port in targets:
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(
                        address, port, flags=socket.AI_NUMERICHOST, limit=self.limits.head_bytes
                    ),
                    self.limits.connect_timeout,
                )
            except (OSError, TimeoutError):
                continue
        return None

    async def _refuse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, exc: RequestRefused
    ) -> None:
        """A request refused before it named a destination: recorded with host "" and port 0."""
        self._record(ProxyDecision("", 0, False, str(exc), ""))
        await self._reply(reader, writer, exc.status, str(exc))

    async def _reply(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        status: int,
        reason: str,
    ) -> None:
        safe = _header_safe(reason)
        body = (safe + "\n").encode("ascii")
        head = (
            f"HTTP/1.1 {status} {_STATUS[status]}\r\n"
            f"{REASON_HEADER}: {safe}\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(head.encode("ascii") + body)
        await finish_answer(reader, writer, limit=self.limits.head_bytes)


@contextlib.asynccontextmanager
async def open_proxy(
    policy: NetworkPolicy,
    socket_path: str,
    *,
    resolver: Resolver = system_resolver,
    on_decision: Callable[[ProxyDecision], None] | None = None,
    limits: ProxyLimits = ProxyLimits(),
) -> AsyncIterator[NetworkProxy]:
    """Run a :class:`NetworkProxy` on ``socket_path`` for the ``async with`` block. The teardown
    runs to the end even when the block is cancelled."""
    proxy = NetworkProxy(
        policy, socket_path, resolver=resolver, on_decision=on_decision, limits=limits
    )
    await proxy.start()
    try:
        yield proxy
    finally:
        closing = asyncio.ensure_future(proxy.aclose())
        cancelled = False
        while not closing.done():
            try:
                await asyncio.shield(closing)
            except asyncio.CancelledError:
                cancelled = True
        closing.result()
        if cancelled:
            raise asyncio.CancelledError
