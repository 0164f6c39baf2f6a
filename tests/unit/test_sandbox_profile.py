"""Sandbox profiles as data, and resolve(): the one step that looks at the host."""

from __future__ import annotations

import ast
import os
import stat
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

import supervisor.sandbox as sandbox_pkg
from supervisor.errors import ConfigError, Refusal, SandboxUnavailable, SupervisorError
from supervisor.sandbox import bwrap as bwrap_module
from supervisor.sandbox import profile as profile_module
from supervisor.sandbox import seatbelt as seatbelt_module
from supervisor.sandbox.profile import (
    BUILTIN_PROFILES,
    NETWORK_PATHS,
    PROFILES_DIR,
    SYSTEM_PATHS,
    Bind,
    NetworkMode,
    ProfileError,
    ResolvedSandbox,
    SandboxProfile,
    SandboxRefused,
    Symlink,
    WorktreeAccess,
    is_within,
    load_builtin_profile,
    load_profile,
    parse_profile,
    resolve,
)

READ_ONLY = SandboxProfile(name="ro", worktree=WorktreeAccess.READ_ONLY, network=NetworkMode.NONE)

# ---------------------------------------------------------------------------------------------
# profiles


def test_builtin_profiles_load_and_name_themselves() -> None:
    assert sorted(p.stem for p in PROFILES_DIR.glob("*.toml")) == sorted(BUILTIN_PROFILES)
    ro = load_builtin_profile("read-only")
    rw = load_builtin_profile("worktree-write")
    assert (ro.name, ro.worktree) == ("read-only", WorktreeAccess.READ_ONLY)
    assert (rw.name, rw.worktree) == ("worktree-write", WorktreeAccess.READ_WRITE)
    for p in (ro, rw):
        assert p.network is NetworkMode.RESTRICTED
        assert p.allowed_domains == (
            "api.anthropic.com",
            "api.openai.com",
            "generativelanguage.googleapis.com",
        )
        assert p.denied_domains == ()


def test_unknown_builtin_profile_names_the_known_ones() -> None:
    with pytest.raises(ProfileError, match="read-only, worktree-write"):
        load_builtin_profile("danger-full-access")


def test_minimal_profile_parses_with_empty_defaults() -> None:
    p = parse_profile('name = "x"\nworktree = "read-only"\nnetwork = "none"\n')
    assert p == SandboxProfile(name="x", worktree=WorktreeAccess.READ_ONLY, network="none")
    assert (p.description, p.allowed_domains, p.denied_domains) == ("", (), ())


def test_restricted_profile_with_wildcards_and_denials() -> None:
    p = parse_profile(
        'name = "r"\nworktree = "read-write"\nnetwork = "restricted"\n'
        'allowed_domains = ["*.example.com", "localhost", "127.0.0.1"]\n'
        'denied_domains = ["evil.example.com"]\n'
    )
    assert p.allowed_domains == ("*.example.com", "localhost", "127.0.0.1")
    assert p.denied_domains == ("evil.example.com",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name = "x"\nworktree = "read-only"\n', "network: Field required"),
        ('name = "x"\nworktree = "read-only"\nnetwork = "vpn"\n', "network: Input should be"),
        ('name = "x"\nworktree = "rw"\nnetwork = "none"\n', "worktree: Input should be"),
        (
            'name = "x"\nworktree = "read-only"\nnetwork = "none"\nmounts = ["/"]\n',
            "mounts: Extra inputs are not permitted",
        ),
        (
            'name = "x"\nworktree = "read-only"\nnetwork = "none"\nallowed_domains = ["a.com"]\n',
            'only apply to network = "restricted", not "none"',
        ),
        (
            'name = "x"\nworktree = "read-only"\nnetwork = "open"\ndenied_domains = ["a.com"]\n',
            'only apply to network = "restricted", not "open"',
        ),
        (
            'name = "x"\nworktree = "read-only"\nnetwork = "restricted"\n'
            'allowed_domains = ["https://a.com"]\n',
            "is not a lower-case host name",
        ),
        (
            'name = "x"\nworktree = "read-only"\nnetwork = "restricted"\n'
            'allowed_domains = ["A.com"]\n',
            "is not a lower-case host name",
        ),
        (
            'name = "x"\nworktree = "read-only"\nnetwork = "restricted"\n'
            'allowed_domains = ["a.com:443"]\n',
            "is not a lower-case host name",
        ),
        (
            'name = "x"\nworktree = "read-only"\nnetwork = "restricted"\n'
            'allowed_domains = ["a.com", "a.com"]\n',
            "listed twice",
        ),
        ('name = "x"\nworktree = "read-only\n', "is not valid TOML"),
    ],
)
def test_invalid_profiles_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match="sandbox profile <text>") as info:
        parse_profile(text)
    assert message in str(info.value)


def test_profile_is_frozen() -> None:
    with pytest.raises(ValidationError):
        READ_ONLY.network = NetworkMode.OPEN  # type: ignore[misc]


def test_field_docs_say_what_empty_means() -> None:
    fields = SandboxProfile.model_fields
    for name in ("description", "allowed_domains", "denied_domains"):
        assert "Empty means" in (fields[name].description or ""), name
    assert all(fields[name].description for name in fields)


def test_load_profile_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot be read"):
        load_profile(tmp_path / "nope.toml")


def test_load_profile_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\nworktree = "read-only"\nnetwork = "none"\nx = 1\n')
    with pytest.raises(ProfileError, match=str(path)):
        load_profile(path)


def test_errors_hang_from_the_supervisor_root() -> None:
    assert issubclass(SandboxRefused, Refusal)
    assert issubclass(SandboxUnavailable, Refusal)
    assert issubclass(ProfileError, ConfigError)
    assert issubclass(ProfileError, ValueError)
    assert issubclass(ConfigError, SupervisorError)
    assert SandboxRefused("x").code == "sandbox_refused"
    assert sandbox_pkg.SandboxUnavailable is SandboxUnavailable


# ---------------------------------------------------------------------------------------------
# the candidate system paths


def test_system_paths_never_include_secret_bearing_etc() -> None:
    forbidden = [
        "/etc",
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/ssl",
        "/etc/ssl/private",
        "/etc/pki",
        "/etc/pki/tls/private",
        "/etc/gitconfig",
        "/etc/npmrc",
        "/etc/pip.conf",
        "/etc/environment",
        "/etc/ssh",
        "/etc/sudoers",
        "/root",
        "/home",
        "/run",
        "/var",
        "/tmp",
    ]
    for path in SYSTEM_PATHS:
        for bad in forbidden:
            assert not is_within(bad, path), f"{path} would expose {bad}"
    assert set(SYSTEM_PATHS) >= NETWORK_PATHS


# ---------------------------------------------------------------------------------------------
# resolve


def _fake_bwrap(tmp_path: Path) -> str:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "bwrap"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(bindir)


class Run:
    """A run's directories on disk: a repo with a linked worktree, HOME, TMPDIR, an agent dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo_git = root / "repo" / ".git"
        (self.repo_git / "worktrees" / "wt").mkdir(parents=True)
        self.worktree = root / "runs" / "wt"
        self.worktree.mkdir(parents=True)
        (self.worktree / ".git").write_text(f"gitdir: {self.repo_git}/worktrees/wt\n")
        self.home = root / "runs" / "home"
        self.tmpdir = root / "runs" / "tmp"
        self.agent = root / "vendor" / "claude"
        for d in (self.home, self.tmpdir, self.agent):
            d.mkdir(parents=True)
        self.path = _fake_bwrap(root)

    def resolve(self, **kw: object) -> ResolvedSandbox:
        args: dict[str, object] = {
            "worktree": self.worktree,
            "git_dir": self.repo_git,
            "home": self.home,
            "tmpdir": self.tmpdir,
            "agent_install_dirs": [self.agent],
            "backend": "bwrap",
            "search_path": self.path,
            "system_paths": (),
            "host_home": self.root / "hosthome",
        }
        args.update(kw)
        return resolve(READ_ONLY, **args)  # type: ignore[arg-type]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path.resolve())


def test_resolve_linked_worktree(run: Run) -> None:
    r = run.resolve()
    assert r.backend == "bwrap"
    assert r.launcher == str(Path(run.path) / "bwrap")
    assert r.worktree == str(run.worktree)
    assert r.git_dir == str(run.repo_git)
    assert r.git_file == str(run.worktree / ".git")
    assert (r.home, r.tmpdir) == (str(run.home), str(run.tmpdir))
    assert r.agent_dirs == (str(run.agent),)
    assert r.profile == READ_ONLY
    assert r.writable == (str(run.home), str(run.tmpdir))


def test_resolve_follows_symlinks_to_real_paths(run: Run) -> None:
    link = run.root / "link-to-wt"
    link.symlink_to(run.worktree)
    home_link = run.root / "home-link"
    home_link.symlink_to(run.home)
    r = run.resolve(worktree=link, home=home_link, agent_install_dirs=[run.agent, run.agent])
    assert r.worktree == str(run.worktree)
    assert r.home == str(run.home)
    assert r.agent_dirs == (str(run.agent),)


def test_resolve_relative_gitdir_line(run: Run) -> None:
    (run.worktree / ".git").write_text("gitdir: ../../repo/.git/worktrees/wt\n")
    assert run.resolve().git_file == str(run.worktree / ".git")


def test_resolve_plain_checkout(run: Run) -> None:
    checkout = run.root / "checkout"
    (checkout / ".git").mkdir(parents=True)
    r = run.resolve(worktree=checkout, git_dir=checkout / ".git")
    assert r.git_file is None
    assert r.git_dir == str(checkout / ".git")


def test_resolve_plain_checkout_with_another_git_dir_refuses(run: Run) -> None:
    checkout = run.root / "checkout"
    (checkout / ".git").mkdir(parents=True)
    with pytest.raises(SandboxRefused, match=r"pass .*checkout/\.git as the git directory"):
        run.resolve(worktree=checkout)


def test_resolve_worktree_writable_under_read_write(run: Run) -> None:
    profile = SandboxProfile(name="rw", worktree=WorktreeAccess.READ_WRITE, network="none")
    r = resolve(
        profile,
        worktree=run.worktree,
        git_dir=run.repo_git,
        home=run.home,
        tmpdir=run.tmpdir,
        backend="bwrap",
        search_path=run.path,
        system_paths=(),
        host_home=run.root / "hosthome",
    )
    assert r.writable == (str(run.home), str(run.tmpdir), str(run.worktree))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"worktree": "relative/wt"}, "is not an absolute path"),
        ({"worktree": "/nonexistent/wt"}, "the worktree /nonexistent/wt does not exist"),
        ({"home": "/nonexistent/home"}, "the per-run HOME /nonexistent/home does not exist"),
        ({"tmpdir": "/nonexistent/tmp"}, "the per-run TMPDIR /nonexistent/tmp does not exist"),
        ({"git_dir": "/nonexistent/.git"}, "the git directory /nonexistent/.git does not exist"),
        ({"agent_install_dirs": ["/nonexistent/a"]}, "the agent install dir /nonexistent/a"),
        ({"agent_install_dirs": ["/"]}, "the agent install dir is /, which would mount the"),
    ],
)
def test_resolve_refuses_bad_paths(run: Run, change: dict[str, object], message: str) -> None:
    with pytest.raises(SandboxRefused, match=message):
        run.resolve(**change)


def test_resolve_refuses_a_worktree_without_git(run: Run) -> None:
    (run.worktree / ".git").unlink()
    with pytest.raises(SandboxRefused, match="not a git worktree; create it with `git worktree"):
        run.resolve()


def test_resolve_refuses_a_gitdir_outside_the_git_dir(run: Run) -> None:
    elsewhere = run.root / "elsewhere"
    elsewhere.mkdir()
    (run.worktree / ".git").write_text(f"gitdir: {elsewhere}\n")
    with pytest.raises(SandboxRefused, match="outside the git directory"):
        run.resolve()


def test_resolve_refuses_a_malformed_git_file(run: Run) -> None:
    (run.worktree / ".git").write_text("not a gitdir line\n")
    with pytest.raises(SandboxRefused, match="does not start with 'gitdir:'"):
        run.resolve()


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("home-in-worktree", "the per-run HOME .* overlaps the worktree"),
        ("tmp-in-git", "the per-run TMPDIR .* overlaps the git directory"),
        ("same", "the per-run HOME and TMPDIR are the same directory"),
    ],
)
def test_resolve_refuses_overlapping_run_dirs(run: Run, where: str, message: str) -> None:
    if where == "home-in-worktree":
        inner = run.worktree / "home"
        inner.mkdir()
        change: dict[str, object] = {"home": inner}
    elif where == "tmp-in-git":
        inner = run.repo_git / "tmp"
        inner.mkdir()
        change = {"tmpdir": inner}
    else:
        change = {"tmpdir": run.home}
    with pytest.raises(SandboxRefused, match=message):
        run.resolve(**change)


def test_resolve_refuses_a_mount_that_contains_the_host_home(run: Run) -> None:
    host_home = run.agent / "user"
    host_home.mkdir()
    with pytest.raises(SandboxRefused, match=r"contains the host's home directory .*~/\.ssh"):
        run.resolve(host_home=host_home)


def test_resolve_accepts_run_dirs_below_the_host_home(run: Run) -> None:
    r = run.resolve(host_home=run.root)  # every run dir lies below this "host home"
    assert r.home == str(run.home)


def test_missing_bwrap_names_the_install_command(run: Run, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SandboxUnavailable, match="`apt-get install bubblewrap`"):
        run.resolve(search_path=str(empty))


def test_missing_sandbox_exec_says_macos(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profile_module, "SEATBELT_LAUNCHER", str(run.root / "no-sandbox-exec"))
    with pytest.raises(SandboxUnavailable, match="Seatbelt sandboxing needs macOS"):
        run.resolve(backend="seatbelt")


def test_seatbelt_resolve_has_no_bwrap_mounts(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Path(run.path) / "bwrap"  # any executable stands in for sandbox-exec
    monkeypatch.setattr(profile_module, "SEATBELT_LAUNCHER", str(fake))
    r = run.resolve(backend="seatbelt", system_paths=("/usr",))
    assert (r.backend, r.launcher) == ("seatbelt", str(fake))
    assert (r.system_binds, r.system_symlinks) == ((), ())


def test_unsupported_platform_refuses(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(SandboxUnavailable, match="no sandbox for platform 'win32'"):
        run.resolve(backend=None)


def test_default_backend_on_linux_is_bwrap(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    assert run.resolve(backend=None).backend == "bwrap"


def test_system_paths_are_bound_or_symlinked_by_what_the_host_has(run: Run) -> None:
    sysroot = run.root / "sys"
    (sysroot / "usr" / "bin").mkdir(parents=True)
    (sysroot / "usr" / "share" / "zoneinfo").mkdir(parents=True)
    (sysroot / "usr" / "share" / "zoneinfo" / "UTC").write_text("tz")
    (sysroot / "etc").mkdir()
    (sysroot / "bin").symlink_to("usr/bin")
    (sysroot / "etc" / "localtime").symlink_to(sysroot / "usr/share/zoneinfo/UTC")
    (sysroot / "run").mkdir()
    (sysroot / "run" / "stub-resolv.conf").write_text("nameserver 127.0.0.53\n")
    (sysroot / "etc" / "resolv.conf").symlink_to(sysroot / "run" / "stub-resolv.conf")
    (sysroot / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (sysroot / "etc" / "dangling").symlink_to(sysroot / "nowhere")
    s = str(sysroot)
    candidates = [
        f"{s}/usr",
        f"{s}/bin",
        f"{s}/lib64",
        f"{s}/etc/passwd",
        f"{s}/etc/localtime",
        f"{s}/etc/resolv.conf",
        f"{s}/etc/dangling",
    ]
    r = run.resolve(system_paths=candidates)
    assert r.system_binds == (
        Bind(source=f"{s}/usr", dest=f"{s}/usr"),
        Bind(source=f"{s}/etc/passwd", dest=f"{s}/etc/passwd"),
        Bind(source=f"{s}/run/stub-resolv.conf", dest=f"{s}/etc/resolv.conf"),
    )
    assert r.system_symlinks == (
        Symlink(target=f"{s}/usr/bin", path=f"{s}/bin"),
        Symlink(target=f"{s}/usr/share/zoneinfo/UTC", path=f"{s}/etc/localtime"),
    )


def test_resolve_on_this_host_finds_usr() -> None:
    found = [b.dest for b in profile_module._system_mounts(SYSTEM_PATHS)[0]]
    assert "/usr" in found
    assert all(os.path.exists(p) for p in found)


# ---------------------------------------------------------------------------------------------
# the resolved model


def _resolved(**kw: object) -> ResolvedSandbox:
    base: dict[str, object] = {
        "backend": "bwrap",
        "launcher": "/usr/bin/bwrap",
        "profile": READ_ONLY,
        "worktree": "/w",
        "git_dir": "/g",
        "home": "/h",
        "tmpdir": "/t",
    }
    base.update(kw)
    return ResolvedSandbox.model_validate(base)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("worktree", "w"),
        ("worktree", "/w/../x"),
        ("home", "/h/"),
        ("tmpdir", "//t"),
        ("git_file", "g/.git"),
        ("agent_dirs", ("/a", "rel")),
        ("launcher", "bwrap"),
    ],
)
def test_resolved_paths_must_be_absolute_and_normalised(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match="absolute, normalised"):
        _resolved(**{field: value})


def test_bind_and_symlink_validate_their_paths() -> None:
    with pytest.raises(ValidationError):
        Bind(source="usr", dest="/usr")
    with pytest.raises(ValidationError):
        Symlink(target="/usr/bin", path="bin")


def test_is_within() -> None:
    assert is_within("/a/b", "/a")
    assert is_within("/a", "/a")
    assert not is_within("/ab", "/a")
    assert is_within("/anything", "/")


# ---------------------------------------------------------------------------------------------
# public surface


def _public_names(module: object) -> set[str]:
    tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("module", [profile_module, bwrap_module, seatbelt_module])
def test_all_lists_every_public_name(module: object) -> None:
    listed: list[str] = module.__all__  # type: ignore[attr-defined]
    assert len(set(listed)) == len(listed)
    assert set(listed) == _public_names(module)


def test_package_reexports_resolve() -> None:
    assert len(set(sandbox_pkg.__all__)) == len(sandbox_pkg.__all__)
    for name in sandbox_pkg.__all__:
        assert getattr(sandbox_pkg, name) is not None


def test_resolve_narrow_git_binds_the_parts_and_the_config_copy(run: Run) -> None:
    (run.repo_git / "refs").mkdir()
    (run.repo_git / "objects").mkdir()
    (run.repo_git / "config").write_text("[remote]\n")
    copy = run.root / "runs" / "git-config"
    copy.write_text("[core]\n")
    parts = [run.repo_git / "worktrees" / "wt", run.repo_git / "refs", run.repo_git / "objects"]
    r = run.resolve(git_paths=parts, git_config=copy)
    assert r.git_binds is not None
    assert [(b.source, b.dest) for b in r.git_binds] == [
        *((str(p), str(p)) for p in parts),
        (str(copy), str(run.repo_git / "config")),
    ]
    assert run.resolve().git_binds is None  # without git_paths: the whole git dir


@pytest.mark.parametrize("part", ["config", ".", "link-to-config"])
def test_resolve_refuses_to_bind_the_real_git_config(run: Run, part: str) -> None:
    (run.repo_git / "config").write_text("[remote]\n")
    (run.repo_git / "link-to-config").symlink_to(run.repo_git / "config")
    with pytest.raises(SandboxRefused, match="may carry credentials"):
        run.resolve(git_paths=[run.repo_git / part])


def test_resolve_refuses_a_missing_git_part_or_config_copy(run: Run) -> None:
    with pytest.raises(SandboxRefused, match="does not exist"):
        run.resolve(git_paths=[run.repo_git / "refs"])
    with pytest.raises(SandboxRefused, match="is not a file"):
        run.resolve(git_paths=[], git_config=run.root / "nope")
