"""The restricted-network proxy and its bridge, on loopback only.

The proxy listens on a unix socket in tmp_path; test origins listen on 127.0.0.1; names resolve
through an injected resolver (there is no DNS here). Bridge tests run the relay script the way the
sandbox runs it (``python -I -S relay.py``), outside a sandbox with its isolation check switched
off, and its pure pieces by table.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from supervisor.errors import SandboxUnavailable
from supervisor.sandbox import bridge, netpolicy, proxy, relay
from supervisor.sandbox.bridge import (
    EXIT_REFUSED,
    BridgeRuntime,
    compile_restricted_network,
    isolation_problem,
    proxy_env,
    relay_argv,
)
from supervisor.sandbox.netpolicy import NetworkPolicy, PortForward
from supervisor.sandbox.profile import SandboxRefused
from supervisor.sandbox.proxy import (
    REASON_HEADER,
    ProxyDecision,
    ProxyLimits,
    ProxyRequest,
    RequestRefused,
    open_proxy,
    parse_request,
)

T = TypeVar("T")
BRIDGE_SCRIPT = str(Path(relay.__file__).resolve())


def run(coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


# --- test origins and clients -------------------------------------------------------------------


@dataclass
class Origin:
    """An HTTP origin on 127.0.0.1 that records each request head and answers with its line."""

    port: int = 0
    heads: list[bytes] = field(default_factory=list)
    server: asyncio.AbstractServer | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            writer.close()
            return
        self.heads.append(head)
        body = b"origin saw " + head.split(b"\r\n", 1)[0]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def origin() -> AsyncIterator[Origin]:
    o = Origin()
    o.server = await asyncio.start_server(o.handle, "127.0.0.1", 0)
    o.port = o.server.sockets[0].getsockname()[1]
    try:
        yield o
    finally:
        o.server.close()


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[int]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def resolver_of(
    table: dict[str, list[str]], calls: list[str] | None = None
) -> Callable[[str, int], Awaitable[Sequence[str]]]:
    async def resolve(name: str, port: int) -> Sequence[str]:
        if calls is not None:
            calls.append(name)
        if name not in table:
            raise socket.gaierror(socket.EAI_NONAME, "unknown in the test table")
        return table[name]

    return resolve


async def exchange(sock: str, request: bytes) -> bytes:
    """Send ``request`` to the proxy and read until it closes."""
    reader, writer = await asyncio.open_unix_connection(sock)
    writer.write(request)
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def header_of(response: bytes, name: str) -> str | None:
    head = response.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.lower() == name.lower():
            return value.strip()
    return None


def sock_path(tmp_path: Path) -> str:
    return str(tmp_path / "proxy.sock")


# --- parse_request ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "method", "host", "port"),
    [
        (
            b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n",
            "CONNECT",
            "api.example.com",
            443,
        ),
        (b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", "CONNECT", "::1", 8443),
        (b"CONNECT 10.0.0.1:22 HTTP/1.0\r\n\r\n", "CONNECT", "10.0.0.1", 22),
        (b"GET http://a.example/ HTTP/1.1\r\n\r\n", "GET", "a.example", 80),
        (b"POST http://a.example:8080/x HTTP/1.1\r\n\r\n", "POST", "a.example", 8080),
        (b"GET HTTP://A.example?q HTTP/1.1\r\n\r\n", "GET", "A.example", 80),
        (b"GET http://[2001:db8::1]:81/ HTTP/1.1\r\n\r\n", "GET", "2001:db8::1", 81),
    ],
)
def test_parse_request_reads_the_destination(
    head: bytes, method: str, host: str, port: int
) -> None:
    request = parse_request(head)
    assert (request.method, request.host, request.port) == (method, host, port)
    assert (request.forward_head is None) == (method == "CONNECT")


def test_parse_request_rewrites_to_origin_form_and_drops_hop_by_hop_headers() -> None:
    head = (
        b"GET http://a.example:8080/p/q?x=1#frag HTTP/1.1\r\n"
        b"Host: attacker.example\r\n"
        b"User-Agent: t\r\n"
        b"Proxy-Connection: keep-alive, X-Secret\r\n"
        b"Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
        b"Connection: Keep-Alive, X-Hop\r\n"
        b"Keep-Alive: 300\r\n"
        b"X-Hop: 1\r\n"
        b"X-Secret: 2\r\n"
        b"TE: trailers\r\n"
        b"Upgrade: websocket\r\n"
        b"Content-Length: 0\r\n\r\n"
    )
    assert parse_request(head) == ProxyRequest(
        "GET",
        "a.example",
        8080,
        b"GET /p/q?x=1 HTTP/1.1\r\nHost: a.example:8080\r\nUser-Agent: t\r\n"
        b"Content-Length: 0\r\nConnection: close\r\n\r\n",
    )


def test_parse_request_query_without_path_gets_a_slash() -> None:
    forwarded = parse_request(b"GET http://a.example?x=1 HTTP/1.0\r\n\r\n").forward_head
    assert forwarded is not None
    assert forwarded.startswith(b"GET /?x=1 HTTP/1.0\r\nHost: a.example\r\n")


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        (b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", "absolute http:// URL or CONNECT"),
        (b"GET https://a.example/ HTTP/1.1\r\n\r\n", "must go through CONNECT"),
        (b"GET ftp://a.example/ HTTP/1.1\r\n\r\n", "absolute http:// URL"),
        (b"GET http://user:pw@a.example/ HTTP/1.1\r\n\r\n", "credentials in the URL"),
        (b"GET http://a.example:99999/ HTTP/1.1\r\n\r\n", "out of range"),
        (b"GET http://a.example:0/ HTTP/1.1\r\n\r\n", "out of range"),
        (b"GET http://a b/ HTTP/1.1\r\n\r\n", "METHOD TARGET HTTP/1.x"),
        (b"GET http://a.example/ HTTP/2\r\n\r\n", "METHOD TARGET HTTP/1.x"),
        (b"G\xc3\xa9T http://a.example/ HTTP/1.1\r\n\r\n", "not ASCII"),
        (b"GET http://a.example/\x01 HTTP/1.1\r\n\r\n", "control character"),
        (b"GET http://a.example/ HTTP/1.1\r\nno colon\r\n\r\n", "header line is malformed"),
        (b"GET http://a.example/ HTTP/1.1\r\n folded: x\r\n\r\n", "header line is malformed"),
        (b"GET http://a.example/ HTTP/1.1\r\nA: b\nInjected: c\r\n\r\n", "malformed"),
        (b"CONNECT a.example HTTP/1.1\r\n\r\n", "has no port"),
        (b"CONNECT a.example:x HTTP/1.1\r\n\r\n", "is not a host[:port]"),
        (b"CONNECT user@a.example:443 HTTP/1.1\r\n\r\n", "is not a host[:port]"),
        (b"CONNECT [::1%lo]:443 HTTP/1.1\r\n\r\n", "is not a host[:port]"),
    ],
)
def test_parse_request_refuses(head: bytes, reason: str) -> None:
    with pytest.raises(RequestRefused, match=reason.replace("[", r"\[").replace("]", r"\]")) as exc:
        parse_request(head)
    assert exc.value.status == 400


# --- the proxy ----------------------------------------------------------------------------------


def test_connect_tunnels_both_ways_including_bytes_sent_with_the_request(tmp_path: Path) -> None:
    policy = NetworkPolicy(allowed=("echo.test",))

    async def scenario() -> None:
        async with (
            echo_server() as port,
            open_proxy(
                policy, sock_path(tmp_path), resolver=resolver_of({"echo.test": ["127.0.0.1"]})
            ) as proxy,
        ):
            reader, writer = await asyncio.open_unix_connection(proxy.socket_path)
            writer.write(b"CONNECT echo.test:%d HTTP/1.1\r\n\r\nearly bytes|" % port)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert head == b"HTTP/1.1 200 Connection established\r\n\r\n"
            assert await reader.readexactly(12) == b"early bytes|"
            payload = os.urandom(300_000)
            writer.write(payload)
            await writer.drain()
            assert await reader.readexactly(len(payload)) == payload
            writer.write_eof()
            assert await reader.read() == b""
            writer.close()
            assert proxy.decisions == [
                ProxyDecision(
                    "echo.test", port, True, "echo.test is allowed by echo.test", "CONNECT"
                )
            ]

    run(scenario())


def test_absolute_form_get_reaches_the_origin_in_origin_form(tmp_path: Path) -> None:
    policy = NetworkPolicy(allowed=("origin.test",))

    async def scenario() -> None:
        async with (
            origin() as o,
            open_proxy(
                policy, sock_path(tmp_path), resolver=resolver_of({"origin.test": ["127.0.0.1"]})
            ) as proxy,
        ):
            response = await exchange(
                proxy.socket_path,
                b"GET http://origin.test:%d/path?q=1 HTTP/1.1\r\nHost: origin.test\r\n"
                b"Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n" % o.port,
            )
            assert status_of(response) == 200
            assert response.endswith(b"origin saw GET /path?q=1 HTTP/1.1")
            assert o.heads == [
                b"GET /path?q=1 HTTP/1.1\r\nHost: origin.test:%d\r\nAccept: */*\r\n"
                b"Connection: close\r\n\r\n" % o.port
            ]

    run(scenario())


@pytest.mark.parametrize(
    ("request_line", "reason"),
    [
        (b"CONNECT blocked.test:443", "blocked.test matches the denied pattern *.test"),
        (b"GET http://elsewhere.example/", "elsewhere.example is not in the allowed list"),
        (b"CONNECT 127.0.0.1:22", "127.0.0.1 is not in the allowed list"),
        (b"CONNECT [::1]:22", "::1 is not in the allowed list"),
        (b"CONNECT 169.254.169.254:80", "169.254.169.254 is not in the allowed list"),
    ],
)
def test_refused_destinations_get_403_with_the_reason_and_no_lookup(
    tmp_path: Path, request_line: bytes, reason: str
) -> None:
    policy = NetworkPolicy(allowed=("*.example.org", "ok.test"), denied=("*.test",))
    calls: list[str] = []

    async def scenario() -> None:
        async with open_proxy(
            policy, sock_path(tmp_path), resolver=resolver_of({}, calls)
        ) as proxy:
            response = await exchange(proxy.socket_path, request_line + b" HTTP/1.1\r\n\r\n")
            assert status_of(response) == 403
            assert header_of(response, REASON_HEADER) == reason
            assert response.endswith(reason.encode() + b"\n")
            assert [d.allowed for d in proxy.decisions] == [False]
            assert proxy.decisions[0].reason == reason

    run(scenario())
    assert calls == []


@pytest.mark.parametrize(
    ("addresses", "category"),
    [
        (["10.0.0.8"], "private"),
        (["192.168.1.20"], "private"),
        (["172.20.0.1"], "private"),
        (["169.254.169.254"], "cloud metadata"),
        (["fd00::5"], "private"),
        (["127.0.0.1"], "loopback"),
        (["93.184.216.34", "10.0.0.8"], "private"),
    ],
)
def test_a_wildcard_name_resolving_to_a_non_public_address_is_refused(
    tmp_path: Path, addresses: list[str], category: str
) -> None:
    policy = NetworkPolicy(allowed=("*.corp.test",))
    calls: list[str] = []

    async def scenario() -> None:
        async with open_proxy(
            policy, sock_path(tmp_path), resolver=resolver_of({"db.corp.test": addresses}, calls)
        ) as proxy:
            response = await exchange(
                proxy.socket_path, b"CONNECT db.corp.test:5432 HTTP/1.1\r\n\r\n"
            )
            assert status_of(response) == 403
            reason = header_of(response, REASON_HEADER)
            assert reason is not None
            assert f"({category})" in reason

    run(scenario())
    assert calls == ["db.corp.test"]


def test_the_checked_address_is_the_one_connected_to(tmp_path: Path) -> None:
    """The resolver answers differently each time (a rebinding DNS server); the proxy asks once
    per request and connects to that answer, never looking the name up again."""
    policy = NetworkPolicy(allowed=("rebind.test",))
    answers = iter([["127.0.0.1"], ["::1"], ["127.0.0.1"]])
    calls: list[str] = []

    async def resolve(name: str, port: int) -> Sequence[str]:
        calls.append(name)
        return next(answers)

    async def scenario() -> list[int]:
        async with origin() as o, open_proxy(policy, sock_path(tmp_path), resolver=resolve) as p:
            statuses = []
            for _ in range(3):
                response = await exchange(
                    p.socket_path, b"GET http://rebind.test:%d/ HTTP/1.1\r\n\r\n" % o.port
                )
                statuses.append(status_of(response))
            assert len(o.heads) == 2
            return statuses

    # nothing listens on ::1: the second request fails rather than being looked up again
    assert run(scenario()) == [200, 502, 200]
    assert calls == ["rebind.test"] * 3


def test_an_exact_entry_lets_a_name_reach_a_loopback_origin(tmp_path: Path) -> None:
    policy = NetworkPolicy(allowed=("*.test", "local.test"))

    async def scenario() -> None:
        table = {"local.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}
        async with (
            origin() as o,
            open_proxy(policy, sock_path(tmp_path), resolver=resolver_of(table)) as proxy,
        ):
            ok = await exchange(
                proxy.socket_path, b"GET http://local.test:%d/ HTTP/1.1\r\n\r\n" % o.port
            )
            no = await exchange(
                proxy.socket_path, b"GET http://other.test:%d/ HTTP/1.1\r\n\r\n" % o.port
            )
            assert (status_of(ok), status_of(no)) == (200, 403)
            assert len(o.heads) == 1

    run(scenario())


def test_named_forward_reaches_host_loopback_on_its_own_port_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with origin() as o, echo_server() as other:
            policy = NetworkPolicy(forwards=(PortForward(name="model", port=o.port),))
            async with open_proxy(policy, sock_path(tmp_path), resolver=resolver_of({})) as proxy:
                reader, writer = await asyncio.open_unix_connection(proxy.socket_path)
                writer.write(b"CONNECT model:%d HTTP/1.1\r\n\r\n" % o.port)
                assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
                writer.write(b"GET /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert (await reader.read()).endswith(b"origin saw GET /v1/messages HTTP/1.1")
                writer.close()
                wrong = await exchange(
                    proxy.socket_path, b"CONNECT model:%d HTTP/1.1\r\n\r\n" % other
                )
                assert status_of(wrong) == 403
                assert header_of(wrong, REASON_HEADER) == (
                    f"model is a forward to port {o.port}, not {other}"
                )

    run(scenario())


def test_allowed_but_unreachable_gets_502(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    policy = NetworkPolicy(allowed=("gone.test",))

    async def scenario() -> bytes:
        async with open_proxy(
            policy, sock_path(tmp_path), resolver=resolver_of({"gone.test": ["127.0.0.1"]})
        ) as proxy:
            return await exchange(
                proxy.socket_path, b"CONNECT gone.test:%d HTTP/1.1\r\n\r\n" % closed_port
            )

    response = run(scenario())
    assert status_of(response) == 502
    assert (
        header_of(response, REASON_HEADER) == f"could not connect to gone.test port {closed_port}"
    )


def test_a_name_that_does_not_resolve_is_refused(tmp_path: Path) -> None:
    policy = NetworkPolicy(allowed=("nxdomain.test",))

    async def scenario() -> bytes:
        async with open_proxy(policy, sock_path(tmp_path), resolver=resolver_of({})) as proxy:
            return await exchange(proxy.socket_path, b"CONNECT nxdomain.test:443 HTTP/1.1\r\n\r\n")

    response = run(scenario())
    assert status_of(response) == 403
    assert header_of(response, REASON_HEADER) == "nxdomain.test did not resolve to any address"


def test_a_slow_resolver_is_cut_off(tmp_path: Path) -> None:
    policy = NetworkPolicy(allowed=("slow.test",))

    async def never(name: str, port: int) -> Sequence[str]:
        await asyncio.sleep(60)
        return ["127.0.0.1"]

    async def scenario() -> bytes:
        limits = ProxyLimits(resolve_timeout=0.2)
        async with open_proxy(policy, sock_path(tmp_path), resolver=never, limits=limits) as p:
            return await exchange(p.socket_path, b"CONNECT slow.test:443 HTTP/1.1\r\n\r\n")

    assert header_of(run(scenario()), REASON_HEADER) == "slow.test did not resolve to any address"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET https://a.test/ HTTP/1.1\r\n\r\n", 400),
        (b"BREW coffee\r\n\r\n", 400),
        (b"GET http://a.test/ HTTP/1.1\r\nX: " + b"y" * 5000 + b"\r\n\r\n", 431),
    ],
)
def test_malformed_requests_are_refused_and_recorded(
    tmp_path: Path, request_bytes: bytes, status: int
) -> None:
    async def scenario() -> None:
        limits = ProxyLimits(head_bytes=4096)
        async with open_proxy(
            NetworkPolicy(allowed=("a.test",)), sock_path(tmp_path), limits=limits
        ) as proxy:
            response = await exchange(proxy.socket_path, request_bytes)
            assert status_of(response) == status
            assert [(d.allowed, d.host) for d in proxy.decisions] == [(False, "")]

    run(scenario())


def test_a_client_that_sends_no_head_is_timed_out(tmp_path: Path) -> None:
    async def scenario() -> bytes:
        limits = ProxyLimits(head_timeout=0.2)
        async with open_proxy(NetworkPolicy(), sock_path(tmp_path), limits=limits) as proxy:
            return await exchange(proxy.socket_path, b"CONNECT half")

    assert status_of(run(scenario())) == 408


def test_an_idle_tunnel_is_closed(tmp_path: Path) -> None:
    policy = NetworkPolicy(allowed=("echo.test",))

    async def scenario() -> None:
        limits = ProxyLimits(idle_timeout=0.3)
        async with (
            echo_server() as port,
            open_proxy(
                policy,
                sock_path(tmp_path),
                resolver=resolver_of({"echo.test": ["127.0.0.1"]}),
                limits=limits,
            ) as proxy,
        ):
            reader, writer = await asyncio.open_unix_connection(proxy.socket_path)
            writer.write(b"CONNECT echo.test:%d HTTP/1.1\r\n\r\n" % port)
            await reader.readuntil(b"\r\n\r\n")
            loop = asyncio.get_running_loop()
            for _ in range(4):  # traffic keeps it open past the idle limit
                writer.write(b"ping")
                assert await reader.readexactly(4) == b"ping"
                await asyncio.sleep(0.15)
            start = loop.time()
            assert await reader.read() == b""
            assert loop.time() - start < 2.0
            writer.close()

    run(scenario())


def test_connections_beyond_the_cap_get_503(tmp_path: Path) -> None:
    async def scenario() -> None:
        limits = ProxyLimits(max_connections=2, head_timeout=5)
        async with open_proxy(NetworkPolicy(), sock_path(tmp_path), limits=limits) as proxy:
            held = [await asyncio.open_unix_connection(proxy.socket_path) for _ in range(2)]
            await asyncio.sleep(0.1)
            response = await exchange(proxy.socket_path, b"CONNECT a.test:443 HTTP/1.1\r\n\r\n")
            assert status_of(response) == 503
            for _, writer in held:
                writer.close()

    run(scenario())


def test_every_decision_reaches_the_callback_and_the_log_is_bounded(tmp_path: Path) -> None:
    seen: list[ProxyDecision] = []

    async def scenario() -> None:
        limits = ProxyLimits(max_logged=2)
        async with open_proxy(
            NetworkPolicy(), sock_path(tmp_path), on_decision=seen.append, limits=limits
        ) as proxy:
            for i in range(4):
                await exchange(proxy.socket_path, b"CONNECT h%d.test:443 HTTP/1.1\r\n\r\n" % i)
            assert [d.host for d in proxy.decisions] == ["h0.test", "h1.test"]
            assert proxy.dropped == 2

    run(scenario())
    assert [d.host for d in seen] == ["h0.test", "h1.test", "h2.test", "h3.test"]


def test_a_decision_that_cannot_be_recorded_is_not_served(tmp_path: Path) -> None:
    def broken(decision: ProxyDecision) -> None:
        raise RuntimeError("store is gone")

    async def scenario() -> None:
        async with (
            origin() as o,
            open_proxy(
                NetworkPolicy(allowed=("origin.test",)),
                sock_path(tmp_path),
                resolver=resolver_of({"origin.test": ["127.0.0.1"]}),
                on_decision=broken,
            ) as proxy,
        ):
            response = await exchange(
                proxy.socket_path, b"GET http://origin.test:%d/ HTTP/1.1\r\n\r\n" % o.port
            )
            assert status_of(response) == 503
            assert o.heads == []

    run(scenario())


def test_closing_cuts_open_tunnels_and_removes_the_socket(tmp_path: Path) -> None:
    policy = NetworkPolicy(allowed=("echo.test",))
    path = sock_path(tmp_path)

    async def scenario() -> None:
        async with echo_server() as port:
            async with open_proxy(
                policy, path, resolver=resolver_of({"echo.test": ["127.0.0.1"]})
            ) as proxy:
                assert os.stat(path).st_mode & 0o777 == 0o600
                reader, writer = await asyncio.open_unix_connection(proxy.socket_path)
                writer.write(b"CONNECT echo.test:%d HTTP/1.1\r\n\r\n" % port)
                await reader.readuntil(b"\r\n\r\n")
            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()
            assert not os.path.lexists(path)

    run(scenario())


def test_teardown_completes_when_the_block_is_cancelled(tmp_path: Path) -> None:
    path = sock_path(tmp_path)

    async def holder(started: asyncio.Event) -> None:
        async with open_proxy(NetworkPolicy(), path):
            started.set()
            await asyncio.sleep(60)

    async def scenario() -> None:
        started = asyncio.Event()
        task = asyncio.create_task(holder(started))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert not os.path.lexists(path)


def test_start_refuses_an_existing_path_or_one_too_long(tmp_path: Path) -> None:
    taken = tmp_path / "taken.sock"
    taken.write_text("")
    long_path = str(tmp_path / ("x" * 120))

    async def scenario(path: str) -> None:
        async with open_proxy(NetworkPolicy(), path):
            raise AssertionError("the proxy started")

    with pytest.raises(SandboxUnavailable, match="already exists"):
        run(scenario(str(taken)))
    with pytest.raises(SandboxUnavailable, match="longer than a unix socket allows"):
        run(scenario(long_path))
    with pytest.raises(SandboxUnavailable, match="cannot listen"):
        run(scenario(str(tmp_path / "missing-dir" / "p.sock")))
    assert taken.read_text() == ""


# --- the bridge: pure pieces --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("interfaces", "problem"),
    [
        ([("lo", True)], None),
        ([("lo", True), ("sit0", False), ("tunl0", False)], None),
        ([], None),
        ([("lo", True), ("eth0", True)], "eth0"),
        ([("lo", True), ("wlan0", True), ("eth0", True), ("ifb0", False)], "eth0, wlan0"),
    ],
)
def test_isolation_problem(interfaces: list[tuple[str, bool]], problem: str | None) -> None:
    found = isolation_problem(interfaces)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(f"network interface(s) {problem} are up besides loopback")


def test_proxy_env() -> None:
    url = "http://127.0.0.1:3130"
    assert proxy_env(3130) == {
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": "127.0.0.1,localhost,::1",
        "no_proxy": "127.0.0.1,localhost,::1",
        "NODE_USE_ENV_PROXY": "1",
    }


RUNTIME = BridgeRuntime(
    interpreter="/opt/py/bin/python3.11",
    script="/opt/asup/supervisor/sandbox/relay.py",
    paths=("/opt/py", "/opt/asup/supervisor/sandbox/relay.py"),
)


def test_compile_restricted_network_gives_env_socket_and_relay() -> None:
    policy = NetworkPolicy(
        allowed=("api.anthropic.com",),
        forwards=(PortForward(name="model", port=3128), PortForward(name="mcp", port=41000)),
    )
    plan = compile_restricted_network(
        policy, host_socket="/run/user/1000/asup/r1/proxy.sock", runtime=RUNTIME
    )
    assert plan.proxy_port == 3129
    assert dict(plan.env) == proxy_env(3129)
    assert plan.bridge.host_socket == "/run/user/1000/asup/r1/proxy.sock"
    assert plan.bridge.sandbox_socket == "/run/asup/proxy.sock"
    assert plan.bridge.relay_paths == RUNTIME.paths
    assert plan.bridge.relay == (
        "/opt/py/bin/python3.11",
        "-I",
        "-S",
        "/opt/asup/supervisor/sandbox/relay.py",
        "--listen",
        "127.0.0.1:3129",
        "--unix",
        "/run/asup/proxy.sock",
        "--forward",
        "3128=model:3128",
        "--forward",
        "41000=mcp:41000",
        "--",
    )
    with pytest.raises(TypeError):
        plan.env["HTTP_PROXY"] = "x"  # type: ignore[index]


def test_compile_restricted_network_refusals() -> None:
    low = NetworkPolicy(forwards=(PortForward(name="model", port=80),))
    with pytest.raises(SandboxRefused, match="below 1024"):
        compile_restricted_network(low, host_socket="/s/p.sock", runtime=RUNTIME)
    fwd = NetworkPolicy(forwards=(PortForward(name="model", port=5000),))
    for port in (5000, 80, 70000):
        with pytest.raises(SandboxRefused, match="pick a free port"):
            compile_restricted_network(
                fwd, host_socket="/s/p.sock", runtime=RUNTIME, proxy_port=port
            )
    plan = compile_restricted_network(
        fwd, host_socket="/s/p.sock", runtime=RUNTIME, proxy_port=5001
    )
    assert plan.env["HTTPS_PROXY"] == "http://127.0.0.1:5001"


def test_relay_argv_parses_back() -> None:
    argv = relay_argv(
        RUNTIME,
        proxy_port=4000,
        sandbox_socket="/run/asup/p.sock",
        forwards=[(5000, "model", 5000)],
    )
    args = relay._parse([*argv[4:], "node", "cli.js"])
    assert args.listen == ("127.0.0.1", 4000)
    assert args.unix == "/run/asup/p.sock"
    assert args.forwards == ((5000, "model", 5000),)
    assert args.check_isolation
    assert args.command == ("node", "cli.js")


@pytest.mark.parametrize(
    "argv",
    [
        ["--listen", "0.0.0.0:3128", "--unix", "/s"],
        ["--listen", "10.0.0.1:3128", "--unix", "/s"],
        ["--listen", "localhost:3128", "--unix", "/s"],
        ["--listen", "127.0.0.1:0", "--unix", "/s"],
        ["--listen", "127.0.0.1", "--unix", "/s"],
        ["--listen", "127.0.0.1:3128"],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "--forward", "5000=model"],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "--forward", "5000=:5000"],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "--forward", "0=model:5000"],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "--forward", "x=model:5000"],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "--forward", "5000=a b:5000"],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "--forward"],
        ["--listen", "127.1:3128", "--unix", "/s"],
        ["--listen", "[::ffff:127.0.0.1]:3128", "--unix", "/s"],
        ["--listen", "127.0.0.1:+3128", "--unix", "/s"],
        ["--listen", "127.0.0.1:65536", "--unix", "/s"],
        ["--listen", "127.0.0.1:3128", "--listen", "127.0.0.1:3129", "--unix", "/s"],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "--unix", "/t"],
        ["--listen", "127.0.0.1:3128", "--unix", ""],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "extra"],
        ["--listen", "127.0.0.1:3128", "--unix", "/s", "--lis", "127.0.0.1:1"],
        [],
    ],
)
def test_bridge_refuses_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(relay.ArgumentError):
        relay._parse(argv)
    assert relay.main([*argv, "--", "true"]) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert err.startswith("asup-bridge: refusing to start: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "listen", "unix", "forwards", "check"),
    [
        (["--listen", "127.0.0.1:1", "--unix", "/s"], ("127.0.0.1", 1), "/s", (), True),
        (["--unix=/s", "--listen=[::1]:65535"], ("::1", 65535), "/s", (), True),
        (
            ["--forward", "5=m:6", "--listen", "127.9.9.9:3128", "--forward=7=n:8", "--unix", "/u"],
            ("127.9.9.9", 3128),
            "/u",
            ((5, "m", 6), (7, "n", 8)),
            True,
        ),
        (
            ["--listen", "127.0.0.1:2", "--danger-no-isolation-check", "--unix", "/s"],
            ("127.0.0.1", 2),
            "/s",
            (),
            False,
        ),
    ],
)
def test_bridge_reads_its_arguments(
    argv: list[str],
    listen: tuple[str, int],
    unix: str,
    forwards: tuple[tuple[int, str, int], ...],
    check: bool,
) -> None:
    args = relay._parse([*argv, "--", "cmd", "--listen", "--"])
    assert (args.listen, args.unix, args.forwards, args.check_isolation) == (
        listen,
        unix,
        forwards,
        check,
    )
    assert args.command == ("cmd", "--listen", "--")
    assert relay._parse(argv).command == ()


def test_bridge_refuses_to_start_outside_an_isolated_namespace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(relay, "_interfaces", lambda: [("lo", True), ("eth0", True)])
    code = bridge.main(["--listen", "127.0.0.1:3128", "--unix", str(tmp_path / "s"), "--", "true"])
    assert code == EXIT_REFUSED
    assert "eth0 are up besides loopback" in capsys.readouterr().err


def test_bridge_refuses_a_missing_socket(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "plain").write_text("")
    for path in (tmp_path / "plain", tmp_path / "absent"):
        code = bridge.main(
            ["--listen", "127.0.0.1:3128", "--unix", str(path), "--danger-no-isolation-check"]
        )
        assert code == EXIT_REFUSED
        assert "is not the proxy's unix socket" in capsys.readouterr().err


def test_bridge_runtime_current_runs_the_script_standalone(tmp_path: Path) -> None:
    runtime = BridgeRuntime.current()
    assert runtime.interpreter == os.path.realpath(sys.executable)
    assert runtime.script == BRIDGE_SCRIPT
    prefix = os.path.realpath(sys.base_prefix)
    assert runtime.paths[:2] == (prefix, BRIDGE_SCRIPT)
    assert runtime.interpreter.startswith(prefix + "/") or runtime.interpreter in runtime.paths
    # an empty environment and a cwd without the package: only the standard library is needed
    done = subprocess.run(
        [runtime.interpreter, "-I", "-S", runtime.script, "--help"],
        env={},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--forward PORT=NAME:PORT" in done.stdout


# --- the bridge: running, outside a sandbox -----------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def bridge_process(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        BRIDGE_SCRIPT,
        *args,
        "--danger-no-isolation-check",
        stderr=asyncio.subprocess.PIPE,
    )


async def wait_listening(port: int) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


async def http_get(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


def test_bridge_relays_the_proxy_port_and_the_forwards(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with origin() as o, origin() as other:
            policy = NetworkPolicy(
                allowed=("origin.test",), forwards=(PortForward(name="model", port=o.port),)
            )
            proxy_port, fwd_port, bad_port = free_port(), free_port(), free_port()
            async with open_proxy(
                policy, sock_path(tmp_path), resolver=resolver_of({"origin.test": ["127.0.0.1"]})
            ) as proxy:
                process = await bridge_process(
                    "--listen", f"127.0.0.1:{proxy_port}",
                    "--unix", proxy.socket_path,
                    "--forward", f"{fwd_port}=model:{o.port}",
                    "--forward", f"{bad_port}=model:{other.port}",
                )  # fmt: skip
                try:
                    await wait_listening(proxy_port)
                    via_proxy = await http_get(
                        proxy_port, b"GET http://origin.test:%d/a HTTP/1.1\r\n\r\n" % o.port
                    )
                    assert via_proxy.endswith(b"origin saw GET /a HTTP/1.1")
                    via_forward = await http_get(fwd_port, b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
                    assert via_forward.endswith(b"origin saw GET /b HTTP/1.1")
                    refused = await http_get(bad_port, b"GET /c HTTP/1.1\r\n\r\n")
                    assert status_of(refused) == 403
                    assert o.heads[-1].startswith(b"GET /b ")
                    assert other.heads == []
                finally:
                    process.terminate()
                    assert await process.wait() == 0
            assert [(d.host, d.allowed) for d in proxy.decisions] == [
                ("origin.test", True),
                ("model", True),
                ("model", False),
            ]

    run(scenario(), timeout=30)


def test_bridge_execs_the_command_and_the_relay_dies_with_it(tmp_path: Path) -> None:
    child = (
        "import socket, sys\n"
        "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
        "port = sys.argv[2].encode()\n"
        "s.sendall(b'GET http://origin.test:' + port + b'/x HTTP/1.1\\r\\n\\r\\n')\n"
        "data = b''\n"
        "while chunk := s.recv(4096):\n"
        "    data += chunk\n"
        "print(data.decode().splitlines()[-1])\n"
        "sys.exit(7)\n"
    )

    async def scenario() -> None:
        async with (
            origin() as o,
            open_proxy(
                NetworkPolicy(allowed=("origin.test",)),
                sock_path(tmp_path),
                resolver=resolver_of({"origin.test": ["127.0.0.1"]}),
            ) as proxy,
        ):
            proxy_port = free_port()
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", BRIDGE_SCRIPT,
                "--listen", f"127.0.0.1:{proxy_port}", "--unix", proxy.socket_path,
                "--danger-no-isolation-check",
                "--", sys.executable, "-c", child, str(proxy_port), str(o.port),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await process.communicate()
            assert process.returncode == 7, err
            assert out.decode().strip() == "origin saw GET /x HTTP/1.1"
            for _ in range(100):  # the relay goes with the command
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", proxy_port)
                except OSError:
                    break
                writer.close()
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the relay outlived the command")

    run(scenario(), timeout=30)


def test_bridge_reports_a_command_it_cannot_run(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with open_proxy(NetworkPolicy(), sock_path(tmp_path)) as proxy:
            done = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", BRIDGE_SCRIPT,
                "--listen", f"127.0.0.1:{free_port()}", "--unix", proxy.socket_path,
                "--danger-no-isolation-check", "--", str(tmp_path / "no-such-program"),
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await done.communicate()
            assert done.returncode == 127
            assert b"asup-bridge: cannot run" in err

    run(scenario(), timeout=30)


# --- public surface -----------------------------------------------------------------------------


@pytest.mark.parametrize("module", [bridge, netpolicy, proxy, relay])
def test_all_lists_every_public_name(module: Any) -> None:
    """Every public name defined is listed; a listed name is defined or re-exported."""
    tree = ast.parse(Path(module.__file__).read_text())
    names: set[str] = set()
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("supervisor."):
            imported |= {alias.asname or alias.name for alias in node.names}
    listed = list(module.__all__)
    assert listed == sorted(listed, key=lambda n: (not n.isupper(), n))
    public = {n for n in names if not n.startswith("_") and n != "TYPE_CHECKING"}
    assert public <= set(listed) <= public | imported
