"""The compiled bwrap argv around small shell commands, with the real /usr/bin/bwrap.

Each test builds a real git worktree, resolves a profile against this host and runs a command
inside. Assertions look at what happened on the host's disk as well as at what the command
printed. No test opens a connection to anything but a unix socket the test itself serves.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from helpers import linked_worktree

from supervisor.env import build_child_env
from supervisor.registry import AGENTS
from supervisor.sandbox.bwrap import NetworkBridge, compile_bwrap
from supervisor.sandbox.profile import (
    NetworkMode,
    ResolvedSandbox,
    SandboxProfile,
    WorktreeAccess,
    resolve,
)

pytestmark = pytest.mark.e2e

HOST_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin:.",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "ANTHROPIC_API_KEY": "sk-ant-dummy",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "OPENAI_API_KEY": "sk-other-vendor",
    "GITHUB_TOKEN": "ghp_dummy",
    "AWS_SECRET_ACCESS_KEY": "dummy",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "CLAUDECODE": "1",
    "CLAUDE_CODE_ENTRYPOINT": "cli",
    "ASUP_DEPTH": "0",
    "HTTPS_PROXY": "http://corp-proxy:3128",
    "LD_PRELOAD": "/tmp/inject.so",
}


class LiveRun:
    """A repository with a linked worktree, per-run HOME and TMPDIR, and an agent install dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo, self.worktree = linked_worktree(root, "hello from the worktree\n")
        self.git_dir = self.repo / ".git"
        self.home = root / "runs" / "home"
        self.tmpdir = root / "runs" / "tmp"
        self.agent = root / "vendor" / "agent"
        for d in (self.home, self.tmpdir, self.agent / "bin"):
            d.mkdir(parents=True)
        script = self.agent / "bin" / "agent.sh"
        script.write_text("#!/bin/sh\necho agent-ok\n")
        script.chmod(0o755)

    def resolve(self, worktree: WorktreeAccess, network: NetworkMode) -> ResolvedSandbox:
        domains = ("api.anthropic.com",) if network is NetworkMode.RESTRICTED else ()
        profile = SandboxProfile(
            name="live", worktree=worktree, network=network, allowed_domains=domains
        )
        return resolve(
            profile,
            worktree=self.worktree,
            git_dir=self.git_dir,
            home=self.home,
            tmpdir=self.tmpdir,
            agent_install_dirs=[self.agent],
            backend="bwrap",
        )

    def env(self, resolved: ResolvedSandbox) -> Mapping[str, str]:
        child = build_child_env(
            HOST_ENV, AGENTS["claude-cli"], home=resolved.home, tmpdir=resolved.tmpdir
        )
        return child.vars

    def run(
        self,
        resolved: ResolvedSandbox,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        bridge: NetworkBridge | None = None,
    ) -> subprocess.CompletedProcess[str]:
        child_env = self.env(resolved) if env is None else env
        full = compile_bwrap(resolved, argv, env=child_env, bridge=bridge)
        return subprocess.run(
            full,
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env=dict(child_env),  # bwrap hands its own environment on to the child
        )

    def sh(self, resolved: ResolvedSandbox, script: str) -> subprocess.CompletedProcess[str]:
        return self.run(resolved, ["/bin/sh", "-c", script])


@pytest.fixture
def live(tmp_path: Path) -> LiveRun:
    return LiveRun(tmp_path.resolve())


RO = WorktreeAccess.READ_ONLY
RW = WorktreeAccess.READ_WRITE
NONE = NetworkMode.NONE


@pytest.mark.parametrize("access", list(WorktreeAccess))
def test_worktree_and_git_history_are_readable(live: LiveRun, access: WorktreeAccess) -> None:
    r = live.resolve(access, NONE)
    done = live.sh(r, "cat README.md && git log --format=%s -1 && pwd")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hello from the worktree", "init", str(live.worktree)]


def test_read_only_profile_refuses_a_write_to_the_worktree(live: LiveRun) -> None:
    r = live.resolve(RO, NONE)
    done = live.sh(r, "echo new > new.txt")
    assert done.returncode != 0
    assert "Read-only file system" in done.stderr
    assert not (live.worktree / "new.txt").exists()
    done = live.sh(r, "echo changed > README.md")
    assert done.returncode != 0
    assert (live.worktree / "README.md").read_text() == "hello from the worktree\n"


def test_worktree_write_profile_writes_inside_only(live: LiveRun) -> None:
    r = live.resolve(RW, NONE)
    done = live.sh(r, "echo edited > README.md && mkdir -p src && echo x > src/new.txt")
    assert done.returncode == 0, done.stderr
    assert (live.worktree / "README.md").read_text() == "edited\n"
    assert (live.worktree / "src" / "new.txt").read_text() == "x\n"

    for ok in (f"{live.home}/.config/settings.json", f"{live.tmpdir}/scratch"):
        done = live.sh(r, f"mkdir -p $(dirname {ok}) && echo ok > {ok}")
        assert done.returncode == 0, done.stderr
        assert Path(ok).read_text() == "ok\n"

    outside = [
        "/root/planted",
        "/tmp/planted",
        f"{live.root}/planted",
        "/planted",
        "/usr/planted",
        "/etc/planted",
        f"{live.git_dir}/hooks/post-checkout",
        f"{live.git_dir}/worktrees/wt/HEAD",
        f"{live.worktree}/.git",
        f"{live.agent}/bin/agent.sh",
    ]
    before = {p: Path(p).read_bytes() if Path(p).is_file() else None for p in outside}
    for path in outside:
        done = live.sh(r, f"echo planted > {path}")
        assert done.returncode != 0, f"the write to {path} succeeded"
    for path, content in before.items():
        now = Path(path).read_bytes() if Path(path).is_file() else None
        assert now == content, f"{path} changed on the host"


def test_host_secrets_and_sockets_are_absent(live: LiveRun) -> None:
    candidates = [
        "/root",
        str(Path.home()),
        f"{Path.home()}/.ssh",
        "/root/.ssh",
        "/home",
        "/run",
        "/var",
        "/var/run/docker.sock",
        "/run/docker.sock",
        "/etc/shadow",
        "/etc/ssl/private",
        "/etc/gitconfig",
        "/etc/npmrc",
        "/etc/pip.conf",
        "/etc/resolv.conf",
        "/sys",
        f"{live.root}/repo/README.md",  # the main checkout beside the git dir
    ]
    assert Path("/root").exists()
    assert Path("/etc/shadow").exists()
    assert (live.root / "repo" / "README.md").exists()
    script = (
        "[ -e /etc/passwd ] && echo CONTROL; "
        "for p in " + " ".join(candidates) + '; do if [ -e "$p" ] || [ -L "$p" ]; then '
        'echo "$p"; fi; done'
    )
    done = live.sh(live.resolve(RW, NONE), script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["CONTROL"]


def test_etc_holds_only_the_allowlisted_pieces(live: LiveRun) -> None:
    r = live.resolve(RO, NONE)
    dests = [b.dest for b in r.system_binds] + [s.path for s in r.system_symlinks]
    expected = {
        d.removeprefix("/etc/").split("/")[0]
        for d in dests
        if d.startswith("/etc/") and d != "/etc/resolv.conf"
    }
    done = live.sh(r, "ls -A /etc")
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == expected
    done = live.sh(r, "id -un && date +%Y >/dev/null && echo dated")
    assert done.stdout.splitlines() == ["root", "dated"], done.stderr


def test_env_inside_is_exactly_the_allowlist(live: LiveRun) -> None:
    r = live.resolve(RO, NONE)
    env = live.env(r)
    done = live.run(r, ["/usr/bin/env", "-0"])
    assert done.returncode == 0, done.stderr
    inside = dict(item.split("=", 1) for item in done.stdout.split("\0") if item)
    # bwrap sets PWD after --chdir; everything else is what we passed, nothing more.
    assert inside.pop("PWD") == str(live.worktree)
    assert inside == dict(env)
    assert "ANTHROPIC_API_KEY" in inside
    for absent in ("OPENAI_API_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "CLAUDECODE", "LD_PRELOAD"):
        assert absent not in inside
    assert inside["ASUP_DEPTH"] == "1"
    assert inside["HOME"] == str(live.home)


def _interfaces(text: str) -> list[str]:
    return sorted(line.split(":", 1)[0].strip() for line in text.splitlines()[2:])


def test_network_none_has_only_loopback(live: LiveRun) -> None:
    done = live.sh(live.resolve(RO, NONE), "cat /proc/net/dev")
    assert done.returncode == 0, done.stderr
    assert _interfaces(done.stdout) == ["lo"]


def test_network_open_shares_the_hosts_interfaces(live: LiveRun) -> None:
    done = live.sh(live.resolve(RO, NetworkMode.OPEN), "cat /proc/net/dev; cat /etc/resolv.conf")
    assert done.returncode == 0, done.stderr
    host = _interfaces(Path("/proc/net/dev").read_text())
    lines = done.stdout.splitlines()
    assert _interfaces("\n".join(lines[: 2 + len(host)])) == host
    assert lines[2 + len(host) :] == Path("/etc/resolv.conf").read_text().splitlines()


@pytest.fixture
def proxy_socket(tmp_path: Path) -> Iterator[Path]:
    """A unix socket on the host that greets one client, standing in for the proxy."""
    path = tmp_path / "proxy.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(30)

    def serve() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.sendall(b"proxy-hello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    server.close()
    thread.join(timeout=5)


def test_restricted_reaches_the_bridge_and_nothing_else(
    live: LiveRun, proxy_socket: Path, tmp_path: Path
) -> None:
    relay_dir = tmp_path / "relay"
    relay_dir.mkdir()
    relay = relay_dir / "relay.sh"
    relay.write_text('#!/bin/sh\necho relay-ran\nexec "$@"\n')
    relay.chmod(0o755)
    bridge = NetworkBridge(
        host_socket=str(proxy_socket), relay=(str(relay),), relay_paths=(str(relay_dir),)
    )
    r = live.resolve(RO, NetworkMode.RESTRICTED)
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect('/run/asup/proxy.sock')\n"
        "print(s.recv(64).decode())\n"
        "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\n"
    )
    done = live.run(r, ["/usr/bin/python3", "-c", code], bridge=bridge)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["relay-ran", "proxy-hello", "['lo']"]


def test_capabilities_are_dropped_so_mounts_cannot_be_undone(live: LiveRun) -> None:
    r = live.resolve(RO, NONE)
    done = live.sh(r, "grep CapEff /proc/self/status")
    assert done.stdout.split() == ["CapEff:", "0000000000000000"]
    done = live.sh(
        r, f"mount -o remount,bind,rw {live.worktree} 2>&1; echo escaped > {live.worktree}/x"
    )
    assert done.returncode != 0
    assert not (live.worktree / "x").exists()


def test_agent_install_dir_runs_read_only(live: LiveRun) -> None:
    r = live.resolve(RO, NONE)
    done = live.run(r, [str(live.agent / "bin" / "agent.sh")])
    assert (done.returncode, done.stdout) == (0, "agent-ok\n"), done.stderr


def test_host_processes_are_invisible(live: LiveRun) -> None:
    done = live.sh(live.resolve(RO, NONE), "ls /proc | grep -c '^[0-9]'")
    assert done.returncode == 0, done.stderr
    inside = int(done.stdout)
    host = sum(1 for p in os.listdir("/proc") if p.isdigit())
    assert inside <= 4 < host
