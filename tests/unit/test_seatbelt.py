"""compile_seatbelt: the profile text and argv pinned by golden files, and its rules.

Seatbelt cannot run on Linux, so these tests pin what would be run. Golden files live in
tests/golden/sandbox/ (``seatbelt-*.sb`` for the profile text, ``seatbelt-*.argv.json`` for the
argv with the profile argument replaced by a reference to that file). ``ASUP_REGEN_GOLDEN=1``
rewrites them; a golden file that no case produces fails the suite.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from supervisor.sandbox.profile import (
    SEATBELT_LAUNCHER,
    NetworkMode,
    ResolvedSandbox,
    SandboxProfile,
    SandboxRefused,
    WorktreeAccess,
    load_builtin_profile,
)
from supervisor.sandbox.seatbelt import (
    BASE_PROFILE,
    LoopbackProxy,
    SeatbeltInvocation,
    compile_seatbelt,
)

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "sandbox"
REGEN = os.environ.get("ASUP_REGEN_GOLDEN") == "1"

RUNS = "/Users/dev/Library/Application Support/asup/runs/r1"
WORKTREE = f"{RUNS}/worktree"
GIT_DIR = "/Users/dev/src/project/.git"
HOME = f"{RUNS}/home"
TMPDIR = f"{RUNS}/tmp"
AGENTS = ("/opt/homebrew/lib/node_modules/@anthropic-ai/claude-code", "/opt/homebrew/Cellar/node")
COMMAND = ["claude", "-p", "say hi", "--output-format", "stream-json", "--verbose"]
RO = WorktreeAccess.READ_ONLY
RW = WorktreeAccess.READ_WRITE


def profile(worktree: WorktreeAccess, network: NetworkMode) -> SandboxProfile:
    return SandboxProfile(name="t", worktree=worktree, network=network)


def resolved(p: SandboxProfile, **kw: object) -> ResolvedSandbox:
    base: dict[str, object] = {
        "backend": "seatbelt",
        "launcher": SEATBELT_LAUNCHER,
        "profile": p,
        "worktree": WORKTREE,
        "git_dir": GIT_DIR,
        "git_file": f"{WORKTREE}/.git",
        "home": HOME,
        "tmpdir": TMPDIR,
        "agent_dirs": AGENTS,
    }
    base.update(kw)
    return ResolvedSandbox.model_validate(base)


PLAIN = "/Users/dev/Library/Application Support/asup/runs/r2/checkout"
CASES: dict[str, Callable[[], SeatbeltInvocation]] = {
    "seatbelt-read-only-none": lambda: compile_seatbelt(resolved(profile(RO, NetworkMode.NONE))),
    "seatbelt-worktree-write-none": lambda: compile_seatbelt(
        resolved(profile(RW, NetworkMode.NONE))
    ),
    "seatbelt-worktree-write-open": lambda: compile_seatbelt(
        resolved(profile(RW, NetworkMode.OPEN))
    ),
    "seatbelt-builtin-worktree-write": lambda: compile_seatbelt(
        resolved(load_builtin_profile("worktree-write")), proxy=LoopbackProxy(port=3128)
    ),
    "seatbelt-plain-checkout": lambda: compile_seatbelt(
        resolved(
            profile(RW, NetworkMode.NONE),
            worktree=PLAIN,
            git_dir=f"{PLAIN}/.git",
            git_file=None,
            agent_dirs=(),
        )
    ),
}


def _check_or_write(path: Path, text: str) -> None:
    if REGEN:
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path.name} is missing; run with ASUP_REGEN_GOLDEN=1 to write it"
    assert path.read_text() == text


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_profile_and_argv(case: str) -> None:
    invocation = CASES[case]()
    argv = invocation.argv(COMMAND)
    assert argv[1:3] == ["-p", invocation.profile]  # the whole profile text is argv[2]
    pinned = [*argv[:2], f"<the text of {case}.sb>", *argv[3:]]
    _check_or_write(GOLDEN_DIR / f"{case}.sb", invocation.profile)
    _check_or_write(
        GOLDEN_DIR / f"{case}.argv.json", json.dumps(pinned, indent=2, ensure_ascii=False) + "\n"
    )


def test_every_golden_file_has_a_case() -> None:
    files = {p.name for p in GOLDEN_DIR.iterdir() if p.name.startswith("seatbelt-")}
    expected = {f"{c}.sb" for c in CASES} | {f"{c}.argv.json" for c in CASES}
    assert files == expected, "a golden file without a case, or a case without a file"


# ---------------------------------------------------------------------------------------------
# rules


def _uncommented(text: str) -> str:
    """The profile without comments (no string in these profiles holds a ';')."""
    return "\n".join(line.split(";", 1)[0] for line in text.splitlines())


def _code(text: str) -> str:
    """The profile without comments and string literals."""
    return re.sub(r'#?"(?:[^"\\]|\\.)*"', '""', _uncommented(text))


def _all_variants() -> list[SeatbeltInvocation]:
    out = [case() for case in CASES.values()]
    for access in WorktreeAccess:
        out.append(compile_seatbelt(resolved(profile(access, NetworkMode.NONE))))
        out.append(compile_seatbelt(resolved(profile(access, NetworkMode.OPEN))))
        r = SandboxProfile(name="r", worktree=access, network=NetworkMode.RESTRICTED)
        out.append(compile_seatbelt(resolved(r), proxy=LoopbackProxy(port=8080)))
    return out


def test_base_profile_denies_by_default() -> None:
    assert BASE_PROFILE.startswith("(version 1)(deny default)\n")
    assert "(allow default)" not in BASE_PROFILE
    assert "(param" not in _uncommented(BASE_PROFILE)
    write_rules = [r for r in BASE_PROFILE.split("\n(") if "file-write" in _code(r)]
    assert len(write_rules) == 1  # the standard devices, nothing else
    targets = re.findall(r'"([^"]*)"', write_rules[0])
    assert targets
    assert all(t.startswith(("/dev/", "^/dev/")) for t in targets)


@pytest.mark.parametrize("invocation", _all_variants())
def test_profile_is_balanced_and_starts_with_the_base(invocation: SeatbeltInvocation) -> None:
    assert invocation.profile.startswith(BASE_PROFILE.rstrip("\n"))
    depth = 0
    for ch in _code(invocation.profile):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0


@pytest.mark.parametrize("invocation", _all_variants())
def test_paths_travel_only_as_parameters(invocation: SeatbeltInvocation) -> None:
    for value in (WORKTREE, GIT_DIR, HOME, TMPDIR, *AGENTS, "/Users", "r1"):
        assert value not in invocation.profile
    referenced = set(re.findall(r'\(param "([A-Z0-9_]+)"\)', _uncommented(invocation.profile)))
    assert referenced == {name for name, _ in invocation.params}


def test_profile_text_does_not_depend_on_the_paths() -> None:
    weird = '/tmp/a "quoted" (paren) ;comment'
    a = compile_seatbelt(resolved(profile(RW, NetworkMode.NONE)))
    b = compile_seatbelt(
        resolved(
            profile(RW, NetworkMode.NONE),
            worktree=weird,
            git_file=f"{weird}/.git",
            home="/x/h",
            agent_dirs=("/p", "/q"),
        )
    )
    assert a.profile == b.profile
    assert ("WORKTREE", weird) in b.params


def test_params_and_argv_shape() -> None:
    invocation = compile_seatbelt(resolved(profile(RO, NetworkMode.NONE)))
    assert invocation.params == (
        ("WORKTREE", WORKTREE),
        ("GIT_DIR", GIT_DIR),
        ("GIT_FILE", f"{WORKTREE}/.git"),
        ("HOME_DIR", HOME),
        ("TMP_DIR", TMPDIR),
        ("AGENT_DIR_0", AGENTS[0]),
        ("AGENT_DIR_1", AGENTS[1]),
    )
    argv = invocation.argv(COMMAND)
    assert argv[0] == "/usr/bin/sandbox-exec"
    d_args = argv[3 : argv.index("--")]
    assert d_args == [x for name, value in invocation.params for x in ("-D", f"{name}={value}")]
    assert argv[argv.index("--") + 1 :] == COMMAND


def test_launcher_is_pinned_whatever_resolve_found() -> None:
    r = resolved(profile(RO, NetworkMode.NONE), launcher="/opt/evil/sandbox-exec")
    assert compile_seatbelt(r).launcher == "/usr/bin/sandbox-exec"
    assert compile_seatbelt(r).argv(["true"])[0] == "/usr/bin/sandbox-exec"


def test_read_only_worktree_has_no_write_rule_for_it() -> None:
    text = compile_seatbelt(resolved(profile(RO, NetworkMode.NONE))).profile
    write_rules = [r for r in text.split("\n(") if r.startswith("allow file-write*")]
    assert write_rules == []
    rw_rules = [r for r in text.split("\n(") if "file-write*" in r.split("\n")[0]]
    assert all("WORKTREE" not in r for r in rw_rules)


def test_writable_worktree_excludes_its_git_metadata() -> None:
    text = compile_seatbelt(resolved(profile(RW, NetworkMode.NONE))).profile
    assert (
        "(allow file-write*\n"
        "  (require-all\n"
        '    (subpath (param "WORKTREE"))\n'
        '    (require-not (subpath (param "GIT_DIR")))\n'
        '    (require-not (literal (param "GIT_FILE")))))\n'
    ) in text


def test_network_rules_per_mode() -> None:
    none = _code(compile_seatbelt(resolved(profile(RO, NetworkMode.NONE))).profile)
    assert "network" not in none
    assert "system-socket" not in none
    open_ = compile_seatbelt(resolved(profile(RO, NetworkMode.OPEN))).profile
    assert "(allow network*)" in open_
    assert '(literal "/private/etc/resolv.conf")' in open_
    r = SandboxProfile(name="r", worktree=RO, network=NetworkMode.RESTRICTED)
    restricted = compile_seatbelt(resolved(r), proxy=LoopbackProxy(port=3128)).profile
    rules = [line for line in _code(restricted).splitlines() if "network" in line]
    assert rules == ['(allow network-outbound (remote ip ""))']
    assert '(allow network-outbound (remote ip "localhost:3128"))' in restricted
    assert "resolv.conf" not in restricted


def test_restricted_without_a_proxy_refuses() -> None:
    r = SandboxProfile(name="r", worktree=RO, network=NetworkMode.RESTRICTED)
    with pytest.raises(SandboxRefused, match="needs the host-side proxy's loopback port"):
        compile_seatbelt(resolved(r))


@pytest.mark.parametrize("network", [NetworkMode.NONE, NetworkMode.OPEN])
def test_a_proxy_outside_restricted_refuses(network: NetworkMode) -> None:
    with pytest.raises(SandboxRefused, match="a proxy is only for"):
        compile_seatbelt(resolved(profile(RO, network)), proxy=LoopbackProxy(port=1))


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_proxy_port_must_be_a_port(port: int) -> None:
    with pytest.raises(ValidationError):
        LoopbackProxy(port=port)


def test_bwrap_resolution_refuses() -> None:
    r = resolved(profile(RO, NetworkMode.NONE), backend="bwrap")
    with pytest.raises(SandboxRefused, match='resolve it with backend="seatbelt"'):
        compile_seatbelt(r)


def test_empty_command_refuses() -> None:
    with pytest.raises(SandboxRefused, match="is empty"):
        compile_seatbelt(resolved(profile(RO, NetworkMode.NONE))).argv([])
