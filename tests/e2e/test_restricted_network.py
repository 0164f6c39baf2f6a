"""network = "restricted" end to end: the real bwrap, the bridge inside, the proxy on the host.

Needs root (``ip netns``) and /usr/bin/bwrap. Traffic goes only to 127.0.0.1 and to a test host
this module creates: a network namespace ``asup-test-…`` joined to the host by a veth pair with a
private /30 of its own, serving one HTTP answer. Names resolve through the proxy's injected
table; nothing looks up a real name.

Most tests use a simple sandbox (``bwrap --unshare-all --ro-bind / /``); the last one runs the
real profile compiler (``resolve`` + ``compile_bwrap``) with the bridge it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import linked_worktree, veth_netns

from supervisor.sandbox.bridge import (
    EXIT_REFUSED,
    BridgeRuntime,
    RestrictedNetwork,
    compile_restricted_network,
)
from supervisor.sandbox.bwrap import compile_bwrap
from supervisor.sandbox.netpolicy import NetworkPolicy, PortForward
from supervisor.sandbox.profile import NetworkMode, SandboxProfile, WorktreeAccess, resolve
from supervisor.sandbox.proxy import REASON_HEADER, ProxyDecision, open_proxy

pytestmark = pytest.mark.e2e

BWRAP = "/usr/bin/bwrap"
CURL = shutil.which("curl")
TIMEOUT_S = 30

TEST_HOST_SERVER = """
import http.server, sys
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello-from-testhost"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), Answer)
print("ready", flush=True)
server.serve_forever()
"""

# the fallback client when curl is absent; same output contract as the curl command below
PY_CLIENT = """
import sys, urllib.error, urllib.request
handlers = [urllib.request.ProxyHandler({})] if sys.argv[2:] == ["direct"] else []
try:
    with urllib.request.build_opener(*handlers).open(sys.argv[1], timeout=10) as r:
        status, body = r.status, r.read()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read()
except OSError as e:
    print(f"client error: {e}", file=sys.stderr)
    sys.exit(7)
sys.stdout.write(body.decode() + f"\\nstatus={status}\\n")
"""

RAW_CONNECT = """
import errno, socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
    sys.exit(3)
print("connected")
"""


def client(url: str, *, bypass_proxy: bool = False) -> list[str]:
    """argv of an HTTP GET printing the body then ``status=NNN``; exit 7 when it cannot
    connect. ``bypass_proxy`` ignores the proxy variables."""
    if CURL is not None:
        argv = [CURL, "-sS", "--max-time", "10", "-w", "\\nstatus=%{http_code}\\n", url]
        return [*argv[:1], "--noproxy", "*", *argv[1:]] if bypass_proxy else argv
    return [sys.executable, "-I", "-c", PY_CLIENT, url, *(["direct"] if bypass_proxy else [])]


# --- the test host in its own network namespace --------------------------------------------------


@dataclass(frozen=True)
class NetnsHost:
    address: str
    port: int


def _http_get_direct(address: str, port: int) -> bytes:
    with socket.create_connection((address, port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\nHost: testhost\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    return data


@pytest.fixture(scope="module")
def test_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsHost]:
    tag = os.urandom(3).hex()
    netns, host_if, ns_if = f"asup-test-{tag}", f"asv{tag}h", f"asv{tag}n"
    base = f"10.213.{random.randrange(256)}.{4 * random.randrange(64)}"
    prefix, last = base.rsplit(".", 1)
    host_addr, ns_addr = f"{prefix}.{int(last) + 1}", f"{prefix}.{int(last) + 2}"
    script = tmp_path_factory.mktemp("testhost") / "server.py"
    script.write_text(TEST_HOST_SERVER)
    server: subprocess.Popen[str] | None = None
    serve = ["ip", "netns", "exec", netns, sys.executable, "-I", str(script), ns_addr, "8080"]
    with veth_netns(netns, host_if, ns_if, host_addr, ns_addr, timeout=TIMEOUT_S):
        try:
            server = subprocess.Popen(serve, stdout=subprocess.PIPE, text=True)
            assert server.stdout is not None
            assert server.stdout.readline().strip() == "ready"
            host = NetnsHost(ns_addr, 8080)
            # the host reaches it directly: the server and the link work
            assert _http_get_direct(host.address, host.port).endswith(b"hello-from-testhost")
            yield host
        finally:
            if server is not None:
                server.kill()
                server.wait(timeout=TIMEOUT_S)
                if server.stdout is not None:
                    server.stdout.close()


# --- the host side: proxy and a loopback origin, on a thread of the test process ----------------


@dataclass
class HostSide:
    socket_path: str
    origin_port: int = 0
    decisions: list[ProxyDecision] = field(default_factory=list)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(asyncio.IncompleteReadError, OSError):
        await reader.readuntil(b"\r\n\r\n")
        body = b"hello-from-host-loopback"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
    writer.close()


@contextlib.contextmanager
def host_side(
    socket_path: str, policy_for: Callable[[int], NetworkPolicy], names: dict[str, list[str]]
) -> Iterator[HostSide]:
    """Run an origin on 127.0.0.1 and the proxy (``policy_for(origin port)``) until exit."""
    side = HostSide(socket_path)
    ready = threading.Event()
    failure: list[BaseException] = []
    loop_box: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def resolve(name: str, port: int) -> Sequence[str]:
        if name not in names:
            raise socket.gaierror(socket.EAI_NONAME, "not in the test table")
        return names[name]

    async def serve() -> None:
        stop = asyncio.Event()
        origin = await asyncio.start_server(_answer, "127.0.0.1", 0)
        side.origin_port = origin.sockets[0].getsockname()[1]
        try:
            async with open_proxy(
                policy_for(side.origin_port),
                socket_path,
                resolver=resolve,
                on_decision=side.decisions.append,
            ):
                loop_box.append((asyncio.get_running_loop(), stop))
                ready.set()
                await stop.wait()
        finally:
            origin.close()

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(TIMEOUT_S), "the proxy did not start"
    if failure:
        raise failure[0]
    try:
        yield side
    finally:
        loop, stop = loop_box[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(TIMEOUT_S)
        assert not thread.is_alive()
        assert not failure, failure


def _plan(side: HostSide, policy: NetworkPolicy, *, sandbox_socket: str) -> RestrictedNetwork:
    return compile_restricted_network(
        policy,
        host_socket=side.socket_path,
        runtime=BridgeRuntime.current(),
        sandbox_socket=sandbox_socket,
    )


def simple_sandbox(
    plan: RestrictedNetwork, argv: Sequence[str], *, share_net: bool = False
) -> list[str]:
    """bwrap with the host's whole filesystem read-only, a network namespace of its own (unless
    ``share_net``), the proxy variables, and the bridge in front of ``argv``."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **plan.env}
    out = [BWRAP, "--unshare-all", "--die-with-parent", "--new-session"]
    if share_net:
        out.append("--share-net")
    out += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--clearenv"]
    for name in sorted(env):
        out += ["--setenv", name, env[name]]
    return [*out, "--", *plan.bridge.relay, *argv]


def lines(text: str) -> list[str]:
    """The non-empty lines of a client's output (a refusal's body ends with its own newline)."""
    return [line for line in text.splitlines() if line]


def run_in(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
        env=None if env is None else dict(env),
    )


def model_forward(port: int) -> NetworkPolicy:
    return NetworkPolicy(
        allowed=("testhost.asup-test", "*.wild.asup-test"),
        forwards=(PortForward(name="model", port=port),),
    )


@pytest.fixture
def restricted(
    tmp_path: Path, test_host: NetnsHost
) -> Iterator[tuple[HostSide, RestrictedNetwork]]:
    names = {
        "testhost.asup-test": [test_host.address],
        "svc.wild.asup-test": [test_host.address],
    }
    with host_side(str(tmp_path / "proxy.sock"), model_forward, names) as side:
        policy = model_forward(side.origin_port)
        yield side, _plan(side, policy, sandbox_socket=side.socket_path)


# --- tests ------------------------------------------------------------------------------------


def test_a_forward_reaches_the_host_loopback_server(
    restricted: tuple[HostSide, RestrictedNetwork],
) -> None:
    side, plan = restricted
    done = run_in(simple_sandbox(plan, client(f"http://127.0.0.1:{side.origin_port}/v1/messages")))
    assert done.returncode == 0, done.stderr
    assert lines(done.stdout) == ["hello-from-host-loopback", "status=200"]
    assert [(d.host, d.port, d.allowed) for d in side.decisions] == [
        ("model", side.origin_port, True)
    ]


def test_a_host_outside_the_policy_gets_403(
    restricted: tuple[HostSide, RestrictedNetwork],
) -> None:
    side, plan = restricted
    done = run_in(simple_sandbox(plan, client("http://denied.example/")))
    assert lines(done.stdout) == ["denied.example is not in the allowed list", "status=403"]
    if CURL is not None:
        tunnel = run_in(simple_sandbox(plan, [CURL, "-sS", "-I", "https://denied.example/"]))
        assert tunnel.returncode != 0
        assert "403" in tunnel.stderr
        assert REASON_HEADER in tunnel.stdout
    assert {(d.host, d.allowed) for d in side.decisions} == {("denied.example", False)}


def test_the_proxy_is_the_only_way_to_a_non_loopback_host(
    restricted: tuple[HostSide, RestrictedNetwork], test_host: NetnsHost
) -> None:
    side, plan = restricted
    url = f"http://{test_host.address}:{test_host.port}/"

    # the host reaches the test host directly
    assert _http_get_direct(test_host.address, test_host.port).endswith(b"hello-from-testhost")

    # inside, a client that ignores the proxy has no route at all
    direct = run_in(simple_sandbox(plan, client(url, bypass_proxy=True)))
    assert direct.returncode != 0
    assert "hello-from-testhost" not in direct.stdout
    raw = run_in(
        simple_sandbox(
            plan, [sys.executable, "-I", "-c", RAW_CONNECT, test_host.address, str(test_host.port)]
        )
    )
    assert (raw.returncode, raw.stdout.strip()) == (3, "ENETUNREACH"), raw.stderr

    # the host's loopback is not the sandbox's: an origin port that is not forwarded is absent
    not_forwarded = run_in(
        simple_sandbox(
            plan, [sys.executable, "-I", "-c", RAW_CONNECT, "127.0.0.1", str(side.origin_port + 1)]
        )
    )
    assert (not_forwarded.returncode, not_forwarded.stdout.strip()) == (3, "ECONNREFUSED")

    # through the proxy: the address itself is not allowed; a name listed exactly is; a name
    # allowed only by a wildcard may not lead to a private address
    via_ip = run_in(simple_sandbox(plan, client(url)))
    assert lines(via_ip.stdout)[-1] == "status=403"
    exact = run_in(simple_sandbox(plan, client(f"http://testhost.asup-test:{test_host.port}/")))
    assert lines(exact.stdout) == ["hello-from-testhost", "status=200"], exact.stderr
    wild = run_in(simple_sandbox(plan, client(f"http://svc.wild.asup-test:{test_host.port}/")))
    assert lines(wild.stdout)[-1] == "status=403"
    assert "not a public address (private)" in wild.stdout

    assert [(d.host, d.allowed) for d in side.decisions] == [
        (test_host.address, False),
        ("testhost.asup-test", True),
        ("svc.wild.asup-test", False),
    ]


def test_the_bridge_refuses_to_run_the_child_on_the_hosts_network(
    restricted: tuple[HostSide, RestrictedNetwork], tmp_path: Path
) -> None:
    _side, plan = restricted
    marker = tmp_path / "child-ran"
    done = run_in(simple_sandbox(plan, ["/bin/sh", "-c", f"echo > {marker}"], share_net=True))
    assert done.returncode == EXIT_REFUSED
    assert "are up besides loopback" in done.stderr
    assert not marker.exists()


def test_exit_status_and_output_are_the_childs(
    restricted: tuple[HostSide, RestrictedNetwork],
) -> None:
    _side, plan = restricted
    script = "echo out; echo err >&2; env | grep -i _proxy= | sort; exit 42"
    done = run_in(simple_sandbox(plan, ["/bin/sh", "-c", script]))
    assert done.returncode == 42
    assert done.stderr == "err\n"
    url = f"http://127.0.0.1:{plan.proxy_port}"
    assert lines(done.stdout) == [
        "out",
        f"HTTPS_PROXY={url}",
        f"HTTP_PROXY={url}",
        "NODE_USE_ENV_PROXY=1",
        "NO_PROXY=127.0.0.1,localhost,::1",
        f"http_proxy={url}",
        f"https_proxy={url}",
        "no_proxy=127.0.0.1,localhost,::1",
    ]


def test_the_compiled_profile_carries_the_bridge(tmp_path: Path, test_host: NetnsHost) -> None:
    root = tmp_path.resolve()
    repo, worktree = linked_worktree(root, "hi\n", timeout=TIMEOUT_S)
    home, tmpdir = root / "runs" / "home", root / "runs" / "tmp"
    home.mkdir()
    tmpdir.mkdir()
    profile = SandboxProfile(
        name="restricted-e2e",
        worktree=WorktreeAccess.READ_ONLY,
        network=NetworkMode.RESTRICTED,
        allowed_domains=("testhost.asup-test",),
    )
    resolved = resolve(
        profile, worktree=worktree, git_dir=repo / ".git", home=home, tmpdir=tmpdir, backend="bwrap"
    )

    def policy_for(port: int) -> NetworkPolicy:
        return NetworkPolicy.from_profile(profile, [PortForward(name="model", port=port)])

    names = {"testhost.asup-test": [test_host.address]}
    with host_side(str(root / "proxy.sock"), policy_for, names) as side:
        plan = _plan(side, policy_for(side.origin_port), sandbox_socket="/run/asup/proxy.sock")
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": resolved.home,
            "TMPDIR": resolved.tmpdir,
            **plan.env,
        }

        def sandboxed(argv: list[str]) -> subprocess.CompletedProcess[str]:
            return run_in(compile_bwrap(resolved, argv, env=env, bridge=plan.bridge), env)

        forward = sandboxed(client(f"http://127.0.0.1:{side.origin_port}/"))
        assert lines(forward.stdout) == ["hello-from-host-loopback", "status=200"], forward.stderr
        allowed = sandboxed(client(f"http://testhost.asup-test:{test_host.port}/"))
        assert lines(allowed.stdout) == ["hello-from-testhost", "status=200"]
        direct = sandboxed(
            client(f"http://{test_host.address}:{test_host.port}/", bypass_proxy=True)
        )
        assert direct.returncode != 0
        assert "hello-from-testhost" not in direct.stdout
        listing = sandboxed(["/bin/sh", "-c", "cat README.md; ls /run/asup"])
        assert lines(listing.stdout) == ["hi", "proxy.sock"], listing.stderr
    assert [(d.host, d.allowed) for d in side.decisions] == [
        ("model", True),
        ("testhost.asup-test", True),
    ]
