"""compile_bwrap: the whole argv pinned by golden files, and its rules checked one by one.

Golden files live in tests/golden/sandbox/ (``bwrap-*.json``). ``ASUP_REGEN_GOLDEN=1`` rewrites
them; a golden file that no case produces fails the suite.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from supervisor.sandbox.bwrap import NetworkBridge, compile_bwrap
from supervisor.sandbox.profile import (
    Bind,
    NetworkMode,
    ResolvedSandbox,
    SandboxProfile,
    SandboxRefused,
    Symlink,
    WorktreeAccess,
    is_within,
    load_builtin_profile,
)

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "sandbox"
REGEN = os.environ.get("ASUP_REGEN_GOLDEN") == "1"

RUNS = "/home/dev/.local/state/asup/runs/r1"
WORKTREE = f"{RUNS}/worktree"
HOME = f"{RUNS}/home"
TMPDIR = f"{RUNS}/tmp"
GIT_DIR = "/home/dev/src/project/.git"
AGENT_DIR = "/home/dev/.local/share/asup/vendor/node_modules/@anthropic-ai/claude-code"

SYSTEM_BINDS = (
    Bind(source="/usr", dest="/usr"),
    Bind(source="/etc/alternatives", dest="/etc/alternatives"),
    Bind(source="/etc/ssl/certs", dest="/etc/ssl/certs"),
    Bind(source="/etc/passwd", dest="/etc/passwd"),
    Bind(source="/etc/group", dest="/etc/group"),
    Bind(source="/etc/nsswitch.conf", dest="/etc/nsswitch.conf"),
    Bind(source="/etc/hosts", dest="/etc/hosts"),
    Bind(source="/run/systemd/resolve/stub-resolv.conf", dest="/etc/resolv.conf"),
    Bind(source="/etc/ld.so.cache", dest="/etc/ld.so.cache"),
)
SYSTEM_SYMLINKS = (
    Symlink(target="/usr/bin", path="/bin"),
    Symlink(target="/usr/sbin", path="/sbin"),
    Symlink(target="/usr/lib", path="/lib"),
    Symlink(target="/usr/lib64", path="/lib64"),
    Symlink(target="/usr/share/zoneinfo/Europe/Berlin", path="/etc/localtime"),
)
ENV = {
    "ASUP_DEPTH": "1",
    "HOME": HOME,
    "LANG": "C.UTF-8",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "TMPDIR": TMPDIR,
}
ARGV = ["claude", "-p", "say hi", "--output-format", "stream-json", "--verbose"]


def profile(worktree: WorktreeAccess, network: NetworkMode) -> SandboxProfile:
    domains = ("api.anthropic.com",) if network is NetworkMode.RESTRICTED else ()
    return SandboxProfile(name="t", worktree=worktree, network=network, allowed_domains=domains)


def resolved(p: SandboxProfile, **kw: object) -> ResolvedSandbox:
    base: dict[str, object] = {
        "backend": "bwrap",
        "launcher": "/usr/bin/bwrap",
        "profile": p,
        "worktree": WORKTREE,
        "git_dir": GIT_DIR,
        "git_file": f"{WORKTREE}/.git",
        "home": HOME,
        "tmpdir": TMPDIR,
        "agent_dirs": (AGENT_DIR,),
        "system_binds": SYSTEM_BINDS,
        "system_symlinks": SYSTEM_SYMLINKS,
    }
    base.update(kw)
    return ResolvedSandbox.model_validate(base)


RO = WorktreeAccess.READ_ONLY
RW = WorktreeAccess.READ_WRITE
BRIDGE = NetworkBridge(
    host_socket=f"{RUNS}/proxy.sock",
    relay=("/opt/asup/bin/asup-relay", "--listen", "127.0.0.1:3128", "--"),
    relay_paths=("/opt/asup",),
)
PLAIN_CHECKOUT = "/home/dev/.local/state/asup/runs/r2/checkout"


def _case_plain_checkout() -> list[str]:
    r = resolved(
        profile(RW, NetworkMode.NONE),
        worktree=PLAIN_CHECKOUT,
        git_dir=f"{PLAIN_CHECKOUT}/.git",
        git_file=None,
        agent_dirs=(),
    )
    return compile_bwrap(r, ["sh", "-c", "echo $HOME"], env={"PATH": "/usr/bin", "HOME": HOME})


GIT_BINDS = (
    Bind(source=f"{GIT_DIR}/worktrees/asup-r1", dest=f"{GIT_DIR}/worktrees/asup-r1"),
    Bind(source=f"{GIT_DIR}/refs", dest=f"{GIT_DIR}/refs"),
    Bind(source=f"{GIT_DIR}/objects", dest=f"{GIT_DIR}/objects"),
    Bind(source="/home/dev/shared/objects", dest="/home/dev/shared/objects"),  # an alternate
    Bind(source=f"{RUNS}/git-config", dest=f"{GIT_DIR}/config"),  # the sanitized copy
)


def _case_narrow_git() -> list[str]:
    return compile_bwrap(
        resolved(profile(RW, NetworkMode.NONE), git_binds=GIT_BINDS), ARGV, env=ENV
    )


CASES: dict[str, Callable[[], list[str]]] = {
    "bwrap-narrow-git": _case_narrow_git,
    "bwrap-read-only-none": lambda: compile_bwrap(
        resolved(profile(RO, NetworkMode.NONE)), ARGV, env=ENV
    ),
    "bwrap-worktree-write-none": lambda: compile_bwrap(
        resolved(profile(RW, NetworkMode.NONE)), ARGV, env=ENV
    ),
    "bwrap-read-only-open": lambda: compile_bwrap(
        resolved(profile(RO, NetworkMode.OPEN)), ARGV, env=ENV
    ),
    "bwrap-worktree-write-restricted": lambda: compile_bwrap(
        resolved(profile(RW, NetworkMode.RESTRICTED)),
        ARGV,
        env=ENV | {"HTTPS_PROXY": "http://127.0.0.1:3128"},
        bridge=BRIDGE,
    ),
    "bwrap-builtin-read-only": lambda: compile_bwrap(
        resolved(load_builtin_profile("read-only")),
        ARGV,
        env=ENV,
        bridge=NetworkBridge(host_socket=f"{RUNS}/proxy.sock"),
    ),
    "bwrap-plain-checkout": _case_plain_checkout,
}


def _golden_text(argv: list[str]) -> str:
    return json.dumps(argv, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_argv(case: str) -> None:
    path = GOLDEN_DIR / f"{case}.json"
    text = _golden_text(CASES[case]())
    if REGEN:
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path.name} is missing; run with ASUP_REGEN_GOLDEN=1 to write it"
    assert path.read_text() == text


def test_every_golden_file_has_a_case() -> None:
    files = {p.name for p in GOLDEN_DIR.iterdir()}
    unknown = {f for f in files if not f.startswith(("bwrap-", "seatbelt-"))}
    assert not unknown, f"golden files no suite owns: {sorted(unknown)}"
    bwrap_files = {f.removesuffix(".json") for f in files if f.startswith("bwrap-")}
    assert bwrap_files == set(CASES), "a golden file without a case, or a case without a file"


# ---------------------------------------------------------------------------------------------
# rules


def _ops(argv: list[str]) -> list[tuple[str, ...]]:
    """The mount operations of an argv, in order, as (flag, *operands)."""
    arity = {
        "--ro-bind": 2,
        "--ro-bind-try": 2,
        "--bind": 2,
        "--symlink": 2,
        "--proc": 1,
        "--dev": 1,
    }
    out: list[tuple[str, ...]] = []
    i = 0
    end = argv.index("--")
    while i < end:
        flag = argv[i]
        if flag in arity:
            out.append((flag, *argv[i + 1 : i + 1 + arity[flag]]))
            i += 1 + arity[flag]
        elif flag in ("--cap-drop", "--chdir", "--remount-ro"):
            i += 2
        else:
            i += 1
    return out


def _dest(op: tuple[str, ...]) -> str:
    return op[-1]


@pytest.mark.parametrize("network", list(NetworkMode))
@pytest.mark.parametrize("access", list(WorktreeAccess))
def test_fixed_flags_always_present(network: NetworkMode, access: WorktreeAccess) -> None:
    bridge = BRIDGE if network is NetworkMode.RESTRICTED else None
    argv = compile_bwrap(resolved(profile(access, network)), ARGV, env=ENV, bridge=bridge)
    sep = argv.index("--")
    head = argv[:sep]
    assert argv[0] == "/usr/bin/bwrap"
    for flag in ("--die-with-parent", "--new-session", "--unshare-all"):
        assert head.count(flag) == 1
    assert ("--share-net" in head) is (network is NetworkMode.OPEN)
    assert head[head.index("--cap-drop") + 1] == "ALL"
    assert ("--proc", "/proc") in _ops(argv)
    assert ("--dev", "/dev") in _ops(argv)
    for path in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        assert ("--ro-bind-try", path, path) in _ops(argv)
    assert head[-4:] == ["--remount-ro", "/", "--chdir", WORKTREE]
    tail = argv[sep + 1 :]
    assert tail[-len(ARGV) :] == ARGV


def test_no_env_value_is_ever_in_the_argv() -> None:
    secret = "sk-ant-this-must-stay-out-of-the-argv"
    env = {**ENV, "ANTHROPIC_API_KEY": secret}
    argv = compile_bwrap(resolved(profile(RO, NetworkMode.NONE)), ARGV, env=env)
    assert "--setenv" not in argv
    assert "--clearenv" not in argv
    assert not [a for a in argv if secret in a]


@pytest.mark.parametrize("access", list(WorktreeAccess))
def test_mounts_are_exactly_the_allowlist(access: WorktreeAccess) -> None:
    argv = compile_bwrap(resolved(profile(access, NetworkMode.NONE)), ARGV, env=ENV)
    ops = set(_ops(argv))
    wt_flag = "--bind" if access is RW else "--ro-bind"
    expected = {
        ("--proc", "/proc"),
        ("--dev", "/dev"),
        *(("--ro-bind-try", p, p) for p in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq")),
        ("--ro-bind-try", "/proc/bus", "/proc/bus"),
        *(("--ro-bind", b.source, b.dest) for b in SYSTEM_BINDS if b.dest != "/etc/resolv.conf"),
        *(("--symlink", s.target, s.path) for s in SYSTEM_SYMLINKS),
        ("--ro-bind", AGENT_DIR, AGENT_DIR),
        (wt_flag, WORKTREE, WORKTREE),
        ("--ro-bind", GIT_DIR, GIT_DIR),
        ("--ro-bind", f"{WORKTREE}/.git", f"{WORKTREE}/.git"),
        ("--bind", HOME, HOME),
        ("--bind", TMPDIR, TMPDIR),
    }
    assert ops == expected
    writable = {_dest(op) for op in ops if op[0] == "--bind"}
    assert writable == ({HOME, TMPDIR, WORKTREE} if access is RW else {HOME, TMPDIR})
    for absent in ("/root", "/home/dev/.ssh", "/var/run/docker.sock", "/run", "/tmp", "/etc"):
        assert absent not in argv


def test_mounts_are_ordered_parent_before_child() -> None:
    argv = compile_bwrap(resolved(profile(RW, NetworkMode.NONE)), ARGV, env=ENV)
    dests = [
        _dest(op)
        for op in _ops(argv)
        if op[0] not in ("--proc", "--dev") and not op[-1].startswith("/proc/")
    ]
    for i, child in enumerate(dests):
        for parent in dests[i + 1 :]:
            assert not (is_within(child, parent) and child != parent), (child, parent)


def test_git_dir_inside_a_writable_checkout_stays_read_only() -> None:
    argv = CASES["bwrap-plain-checkout"]()
    ops = _ops(argv)
    wt = ops.index(("--bind", PLAIN_CHECKOUT, PLAIN_CHECKOUT))
    git = ops.index(("--ro-bind", f"{PLAIN_CHECKOUT}/.git", f"{PLAIN_CHECKOUT}/.git"))
    assert wt < git


@pytest.mark.parametrize("network", list(NetworkMode))
def test_resolv_conf_only_with_open_network(network: NetworkMode) -> None:
    bridge = BRIDGE if network is NetworkMode.RESTRICTED else None
    for binds, links in (
        (SYSTEM_BINDS, SYSTEM_SYMLINKS),
        (
            (Bind(source="/usr", dest="/usr"),),
            (Symlink(target="/usr/lib/resolv.conf", path="/etc/resolv.conf"),),
        ),
    ):
        r = resolved(profile(RO, network), system_binds=binds, system_symlinks=links)
        argv = compile_bwrap(r, ARGV, env=ENV, bridge=bridge)
        assert ("/etc/resolv.conf" in argv) is (network is NetworkMode.OPEN)


def test_restricted_mounts_the_bridge_and_runs_the_relay_first() -> None:
    r = resolved(profile(RO, NetworkMode.RESTRICTED))
    argv = compile_bwrap(r, ARGV, env=ENV, bridge=BRIDGE)
    assert ("--ro-bind", BRIDGE.host_socket, "/run/asup/proxy.sock") in _ops(argv)
    assert ("--ro-bind", "/opt/asup", "/opt/asup") in _ops(argv)
    assert "--share-net" not in argv
    assert argv[argv.index("--") + 1 :] == [*BRIDGE.relay, *ARGV]


def test_restricted_without_a_bridge_refuses() -> None:
    with pytest.raises(SandboxRefused, match='network = "restricted" needs a bridge'):
        compile_bwrap(resolved(profile(RO, NetworkMode.RESTRICTED)), ARGV, env=ENV)


@pytest.mark.parametrize("network", [NetworkMode.NONE, NetworkMode.OPEN])
def test_a_bridge_outside_restricted_refuses(network: NetworkMode) -> None:
    with pytest.raises(SandboxRefused, match="a bridge is only for"):
        compile_bwrap(resolved(profile(RO, network)), ARGV, env=ENV, bridge=BRIDGE)


@pytest.mark.parametrize("place", [f"{HOME}/proxy.sock", "/usr/proxy.sock", "/etc"])
def test_bridge_socket_may_not_overlap_a_mount(place: str) -> None:
    bridge = NetworkBridge(host_socket=f"{RUNS}/proxy.sock", sandbox_socket=place)
    with pytest.raises(SandboxRefused, match="overlaps the mounted path"):
        compile_bwrap(resolved(profile(RO, NetworkMode.RESTRICTED)), ARGV, env=ENV, bridge=bridge)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (ENV | {"HOME": "/root"}, "the child's HOME is not the per-run directory"),
        (ENV | {"TMPDIR": "/tmp"}, "the child's TMPDIR is not the per-run directory"),
        (ENV | {"A=B": "x"}, "contains '='"),
        (ENV | {"": "x"}, "is empty"),
        (ENV | {"X": "a\0b"}, "NUL"),
    ],
)
def test_env_must_fit_the_sandbox(env: Mapping[str, str], message: str) -> None:
    with pytest.raises(SandboxRefused, match=message):
        compile_bwrap(resolved(profile(RO, NetworkMode.NONE)), ARGV, env=env)


def test_env_without_home_is_accepted() -> None:
    argv = compile_bwrap(resolved(profile(RO, NetworkMode.NONE)), ARGV, env={"PATH": "/usr/bin"})
    assert argv[-len(ARGV) :] == ARGV


def test_seatbelt_resolution_refuses() -> None:
    r = resolved(profile(RO, NetworkMode.NONE), backend="seatbelt", system_binds=())
    with pytest.raises(SandboxRefused, match='resolve it with backend="bwrap"'):
        compile_bwrap(r, ARGV, env=ENV)


def test_empty_command_refuses() -> None:
    with pytest.raises(SandboxRefused, match="command to run inside the sandbox is empty"):
        compile_bwrap(resolved(profile(RO, NetworkMode.NONE)), [], env=ENV)


def test_conflicting_mounts_of_one_path_refuse() -> None:
    r = resolved(profile(RO, NetworkMode.NONE), agent_dirs=(HOME,))
    with pytest.raises(SandboxRefused, match=f"{HOME} would be mounted twice"):
        compile_bwrap(r, ARGV, env=ENV)


def test_an_agent_dir_equal_to_a_system_bind_is_mounted_once() -> None:
    argv = compile_bwrap(
        resolved(profile(RO, NetworkMode.NONE), agent_dirs=("/usr",)), ARGV, env=ENV
    )
    assert _ops(argv).count(("--ro-bind", "/usr", "/usr")) == 1


def test_command_is_passed_verbatim_after_the_separator() -> None:
    command = ["sh", "-c", "echo $(id) '\"'; rm -rf /", "--", "--bind", "/", "/"]
    argv = compile_bwrap(resolved(profile(RO, NetworkMode.NONE)), command, env=ENV)
    assert argv[argv.index("--") + 1 :] == command


def test_compile_is_pure() -> None:
    env = dict(ENV)
    r = resolved(profile(RW, NetworkMode.NONE))
    first = compile_bwrap(r, ARGV, env=env)
    assert compile_bwrap(r, ARGV, env=env) == first
    assert env == ENV
    assert not Path(WORKTREE).exists()  # the compiler never needed the paths to exist


def test_bridge_validates_its_paths() -> None:
    with pytest.raises(ValueError, match="absolute, normalised"):
        NetworkBridge(host_socket="proxy.sock")
    with pytest.raises(ValueError, match="absolute, normalised"):
        NetworkBridge(host_socket="/p.sock", relay_paths=("opt",))


def test_narrow_git_mounts_only_the_parts_and_the_config_copy() -> None:
    argv = _case_narrow_git()
    ops = _ops(argv)
    git_ops = [op for op in ops if op[-1].startswith((GIT_DIR, "/home/dev/shared"))]
    assert sorted(git_ops) == sorted(("--ro-bind", b.source, b.dest) for b in GIT_BINDS)
    assert ("--ro-bind", GIT_DIR, GIT_DIR) not in ops  # never the whole git dir
    assert ("--ro-bind", f"{GIT_DIR}/config", f"{GIT_DIR}/config") not in ops
