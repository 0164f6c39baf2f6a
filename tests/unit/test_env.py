"""The allowlisted child environment: one table of host variables → what the child gets."""

from __future__ import annotations

import ast
import types
from collections.abc import Mapping
from pathlib import Path

import pytest

import supervisor.env as env_module
from supervisor.env import (
    DEFAULT_PATH,
    HARNESS_MARKERS,
    ChildEnv,
    DropReason,
    ReservedVariableError,
    build_child_env,
    check_not_nested,
    host_depth,
)
from supervisor.errors import NestedRunRefused, Refusal, SupervisorError
from supervisor.registry import AGENTS, AgentSpec

CLAUDE = AGENTS["claude-cli"]
CODEX = AGENTS["codex-cli"]
HOME = "/state/runs/r1/home"
TMPDIR = "/state/runs/r1/tmp"

PASS = "pass"  # the host value reaches the child unchanged

# (agent, host name, host value, expected: PASS or why it is dropped)
TABLE: list[tuple[AgentSpec, str, str, str | DropReason]] = [
    # 3. identity
    (CLAUDE, "USER", "dev", PASS),
    (CLAUDE, "LOGNAME", "dev", PASS),
    (CLAUDE, "SHELL", "/bin/bash", PASS),
    (CLAUDE, "SHELL", "bash", DropReason.NOT_ABSOLUTE),
    # 4. locale and terminal
    (CLAUDE, "LANG", "C.UTF-8", PASS),
    (CLAUDE, "LANGUAGE", "en", PASS),
    (CLAUDE, "LC_ALL", "C.UTF-8", PASS),
    (CLAUDE, "LC_CTYPE", "C.UTF-8", PASS),
    (CLAUDE, "LC_TIME", "C", PASS),
    (CLAUDE, "TZ", "UTC", PASS),
    (CLAUDE, "TERM", "xterm-256color", PASS),
    (CLAUDE, "LC_SESSION_TOKEN", "t", DropReason.CREDENTIAL),
    (CLAUDE, "COLORTERM", "truecolor", DropReason.NOT_ALLOWLISTED),
    # 5. CA bundles
    (CLAUDE, "SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt", PASS),
    (CLAUDE, "SSL_CERT_DIR", "/etc/ssl/certs", PASS),
    (CLAUDE, "NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/corp.pem", PASS),
    (CLAUDE, "REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt", PASS),
    (CLAUDE, "CURL_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt", DropReason.NOT_ALLOWLISTED),
    # 6. proxies come from the sandbox, never from the host
    (CLAUDE, "HTTP_PROXY", "http://proxy:3128", DropReason.PROXY_FROM_SANDBOX),
    (CLAUDE, "https_proxy", "http://proxy:3128", DropReason.PROXY_FROM_SANDBOX),
    (CLAUDE, "ALL_PROXY", "socks5://proxy:1080", DropReason.PROXY_FROM_SANDBOX),
    (CLAUDE, "NO_PROXY", "localhost", DropReason.PROXY_FROM_SANDBOX),
    # 7. the agent's prefixes, and its signing key by exact name
    (CLAUDE, "ANTHROPIC_API_KEY", "sk-ant-signing", PASS),
    (CLAUDE, "ANTHROPIC_BASE_URL", "http://127.0.0.1:9", PASS),
    (CLAUDE, "ANTHROPIC_MODEL", "claude-x", PASS),
    (CLAUDE, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1", PASS),
    (CLAUDE, "CLAUDE_CODE_MAX_RETRIES", "1", PASS),
    (CLAUDE, "CLAUDE_CODE_USE_BEDROCK", "1", PASS),
    (CLAUDE, "DISABLE_TELEMETRY", "1", PASS),
    (CLAUDE, "DISABLE_AUTOUPDATER", "1", PASS),
    (CODEX, "OPENAI_API_KEY", "sk-openai-signing", PASS),
    (CODEX, "OPENAI_BASE_URL", "http://127.0.0.1:9/v1", PASS),
    (CODEX, "CODEX_UNSAFE_ALLOW_NO_SANDBOX", "1", PASS),
    # a prefix match that would pass a credential
    (CLAUDE, "ANTHROPIC_AUTH_TOKEN", "t", DropReason.CREDENTIAL),
    (CLAUDE, "ANTHROPIC_ADMIN_KEY", "k", DropReason.CREDENTIAL),
    (CLAUDE, "CLAUDE_CODE_OAUTH_TOKEN", "t", DropReason.CREDENTIAL),
    (CLAUDE, "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE", "p", DropReason.CREDENTIAL),
    (CLAUDE, "CLAUDE_CODE_MAX_OUTPUT_TOKENS", "8000", DropReason.CREDENTIAL),
    (CLAUDE, "DISABLE_SECRET_SCAN", "1", DropReason.CREDENTIAL),
    (CODEX, "OPENAI_ADMIN_KEY", "k", DropReason.CREDENTIAL),
    (CODEX, "CODEX_ACCESS_TOKEN", "t", DropReason.CREDENTIAL),
    (CODEX, "OPENAI_PASSWORD", "p", DropReason.CREDENTIAL),
    # other vendors' keys
    (CLAUDE, "OPENAI_API_KEY", "sk-openai", DropReason.OTHER_VENDOR_KEY),
    (CODEX, "ANTHROPIC_API_KEY", "sk-ant", DropReason.OTHER_VENDOR_KEY),
    (CLAUDE, "GEMINI_API_KEY", "g", DropReason.OTHER_VENDOR_KEY),
    (CLAUDE, "GOOGLE_API_KEY", "g", DropReason.OTHER_VENDOR_KEY),
    (CODEX, "OPENROUTER_API_KEY", "o", DropReason.OTHER_VENDOR_KEY),
    # every credential shape, also outside any prefix
    (CLAUDE, "NPM_TOKEN", "t", DropReason.CREDENTIAL),
    (CLAUDE, "GITHUB_TOKEN", "t", DropReason.CREDENTIAL),
    (CLAUDE, "github_token", "t", DropReason.CREDENTIAL),
    (CLAUDE, "STRIPE_SECRET", "s", DropReason.CREDENTIAL),
    (CLAUDE, "DB_PASSWORD", "p", DropReason.CREDENTIAL),
    (CLAUDE, "PGPASSWORD", "p", DropReason.CREDENTIAL),
    (CLAUDE, "MYSQL_PASSWD", "p", DropReason.CREDENTIAL),
    (CLAUDE, "AZURE_CREDENTIALS", "c", DropReason.CREDENTIAL),
    (CLAUDE, "GH_AUTH", "a", DropReason.CREDENTIAL),
    (CLAUDE, "SESSION_COOKIE", "c", DropReason.CREDENTIAL),
    (CLAUDE, "SSH_AUTH_SOCK", "/run/user/0/ssh-agent.sock", DropReason.CREDENTIAL),
    (CLAUDE, "SSH_ASKPASS", "/usr/bin/ssh-askpass", DropReason.CREDENTIAL),
    (CLAUDE, "GIT_ASKPASS", "/usr/bin/git-askpass", DropReason.CREDENTIAL),
    (CLAUDE, "AWS_REGION", "eu-west-1", DropReason.CREDENTIAL),
    (CLAUDE, "AWS_ACCESS_KEY_ID", "AKIA", DropReason.CREDENTIAL),
    (CLAUDE, "AWS_SECRET_ACCESS_KEY", "s", DropReason.CREDENTIAL),
    (CLAUDE, "GOOGLE_APPLICATION_CREDENTIALS", "/root/gcp.json", DropReason.CREDENTIAL),
    # harness markers
    (CLAUDE, "CLAUDECODE", "1", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_ENTRYPOINT", "cli", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_SSE_PORT", "41234", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_SESSION_ID", "s", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_CHILD_SESSION", "1", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_EXECPATH", "/usr/bin/claude", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_TMPDIR", "/tmp/claude", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_REMOTE", "1", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_REMOTE_SESSION_ID", "r", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_HOST_HTTP_PROXY_PORT", "8080", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR", "3", DropReason.HARNESS_MARKER),
    (CLAUDE, "CLAUDE_PROJECT_DIR", "/work/other", DropReason.HARNESS_MARKER),
    (CLAUDE, "AI_AGENT", "claude-code", DropReason.HARNESS_MARKER),
    (CODEX, "CODEX_HOME", "/root/.codex", DropReason.HARNESS_MARKER),
    (CODEX, "CODEX_SANDBOX", "seatbelt", DropReason.HARNESS_MARKER),
    (CODEX, "CODEX_SANDBOX_NETWORK_DISABLED", "1", DropReason.HARNESS_MARKER),
    (CODEX, "CODEX_THREAD_ID", "t", DropReason.HARNESS_MARKER),
    (CODEX, "CODEX_MANAGED_BY_NPM", "1", DropReason.HARNESS_MARKER),
    (CODEX, "CODEX_INTERNAL_ORIGINATOR_OVERRIDE", "x", DropReason.HARNESS_MARKER),
    (CLAUDE, "CODEX_HOME", "/root/.codex", DropReason.HARNESS_MARKER),
    # our own namespace
    (CLAUDE, "ASUP_DEPTH", "0", DropReason.OWN_NAMESPACE),
    (CLAUDE, "ASUP_RUN_ID", "r0", DropReason.OWN_NAMESPACE),
    # per-run directories replace the host's
    (CLAUDE, "HOME", "/root", DropReason.REPLACED_PER_RUN),
    (CLAUDE, "TMPDIR", "/tmp", DropReason.REPLACED_PER_RUN),
    (CLAUDE, "XDG_CONFIG_HOME", "/root/.config", DropReason.REPLACED_PER_RUN),
    (CLAUDE, "XDG_CACHE_HOME", "/root/.cache", DropReason.REPLACED_PER_RUN),
    # everything no step names
    (CLAUDE, "XDG_RUNTIME_DIR", "/run/user/0", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "TMP", "/tmp", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "LD_PRELOAD", "/tmp/evil.so", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "LD_LIBRARY_PATH", "/tmp", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "NODE_OPTIONS", "--require /tmp/x.js", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "PYTHONPATH", "/tmp", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "DOCKER_HOST", "unix:///var/run/docker.sock", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "IS_SANDBOX", "1", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "GIT_DIR", "/elsewhere/.git", DropReason.NOT_ALLOWLISTED),
    (CLAUDE, "CODEX_FOO", "1", DropReason.NOT_ALLOWLISTED),
    (CODEX, "ANTHROPIC_BASE_URL", "http://x", DropReason.NOT_ALLOWLISTED),
    (CODEX, "CLAUDE_CODE_MAX_RETRIES", "1", DropReason.NOT_ALLOWLISTED),
]


def _build(
    host: Mapping[str, str],
    agent: AgentSpec = CLAUDE,
    *,
    extra: Mapping[str, str] = types.MappingProxyType({}),
    depth_var: str = "ASUP_DEPTH",
) -> ChildEnv:
    return build_child_env(host, agent, home=HOME, tmpdir=TMPDIR, extra=extra, depth_var=depth_var)


@pytest.mark.parametrize(
    ("agent", "name", "value", "expected"),
    TABLE,
    ids=[f"{a.id}-{n}-{v}" for a, n, v, _ in TABLE],
)
def test_one_host_variable(agent: AgentSpec, name: str, value: str, expected: str) -> None:
    child = _build({"PATH": "/usr/bin", name: value}, agent)
    if expected == PASS:
        assert child.vars[name] == value
        assert name not in child.dropped_names()
    else:
        assert child.dropped_names() == {name: expected}
        if expected in (DropReason.REPLACED_PER_RUN, DropReason.OWN_NAMESPACE) and (
            name in child.vars
        ):
            assert child.vars[name] != value  # replaced by the per-run value or the new depth
        elif name in agent.tmpdir_env:
            assert child.vars[name] == TMPDIR  # the host's dropped, the per-run one given
        else:
            assert name not in child.vars


@pytest.mark.parametrize("agent", [CLAUDE, CODEX], ids=lambda a: a.id)
def test_whole_table_at_once(agent: AgentSpec) -> None:
    rows = {(n, v): e for a, n, v, e in TABLE if a is agent and n != "SHELL"}
    host = {"PATH": "/usr/bin"} | dict(rows.keys())
    child = _build(host, agent)
    passed = {n for (n, _), e in rows.items() if e == PASS}
    per_run = {"PATH", "HOME", "TMPDIR", "ASUP_DEPTH"} | {
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
    }
    assert set(child.vars) == passed | per_run | set(agent.tmpdir_env)
    assert child.dropped_names() == {n: e for (n, _), e in rows.items() if e != PASS}


def test_per_run_directories_replace_the_hosts() -> None:
    child = _build({"HOME": "/root", "TMPDIR": "/tmp", "XDG_DATA_HOME": "/root/.local/share"})
    assert child.vars["HOME"] == HOME
    assert child.vars["TMPDIR"] == TMPDIR
    assert child.vars["XDG_CONFIG_HOME"] == f"{HOME}/.config"
    assert child.vars["XDG_CACHE_HOME"] == f"{HOME}/.cache"
    assert child.vars["XDG_DATA_HOME"] == f"{HOME}/.local/share"
    assert child.vars["XDG_STATE_HOME"] == f"{HOME}/.local/state"


def test_empty_host_gives_exactly_the_fixed_names() -> None:
    child = _build({})
    assert child.names() == sorted(
        [
            "ASUP_DEPTH",
            "CLAUDE_CODE_TMPDIR",  # claude-cli's tmpdir_env: the per-run TMPDIR
            "HOME",
            "PATH",
            "TMPDIR",
            "XDG_CACHE_HOME",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
        ]
    )
    assert child.vars["PATH"] == DEFAULT_PATH
    assert child.vars["ASUP_DEPTH"] == "1"
    assert child.dropped == ()


@pytest.mark.parametrize(
    ("host_path", "child_path", "removed"),
    [
        ("/usr/local/bin:/usr/bin:/bin", "/usr/local/bin:/usr/bin:/bin", 0),
        ("/usr/bin::.:bin:/usr/bin:/opt/node/bin", "/usr/bin:/opt/node/bin", 3),
        (":/usr/bin", "/usr/bin", 1),
        (".:node_modules/.bin", DEFAULT_PATH, 2),
        ("", DEFAULT_PATH, 1),
    ],
)
def test_path_keeps_absolute_entries_only(host_path: str, child_path: str, removed: int) -> None:
    child = _build({"PATH": host_path})
    assert child.vars["PATH"] == child_path
    assert child.path_entries_removed == removed


def test_every_listed_marker_is_dropped_even_under_a_passing_prefix() -> None:
    host = dict.fromkeys(HARNESS_MARKERS, "1")
    for agent in (CLAUDE, CODEX):
        child = _build(host, agent)
        # none passes; an agent's own tmpdir variable is given the per-run TMPDIR instead
        assert set(child.vars) & HARNESS_MARKERS == set(agent.tmpdir_env)
        assert all(child.vars[name] == TMPDIR for name in agent.tmpdir_env)
        assert set(child.dropped_names().values()) == {DropReason.HARNESS_MARKER}


@pytest.mark.parametrize("agent", list(AGENTS.values()), ids=lambda a: a.id)
def test_each_agent_gets_its_own_key_and_no_other(agent: AgentSpec) -> None:
    # agents of one vendor share its key variable (claude-cli and claude-acp)
    host = {spec.signing_key: f"key-of-{spec.signing_key}" for spec in AGENTS.values()}
    child = _build(host, agent)
    keys_in_child = {n for n in child.vars if n in host}
    assert keys_in_child == {agent.signing_key}
    assert child.vars[agent.signing_key] == f"key-of-{agent.signing_key}"


def test_extra_is_written_last_and_wins() -> None:
    host = {"ANTHROPIC_BASE_URL": "https://gateway.corp", "HTTPS_PROXY": "http://corp:3128"}
    extra = {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4000",
        "HTTPS_PROXY": "http://127.0.0.1:3128",
        "https_proxy": "http://127.0.0.1:3128",
        "CODEX_HOME": "/state/runs/r1/codex",
        "PATH": "/opt/vendor/bin:/usr/bin",
    }
    child = _build(host, extra=extra)
    for name, value in extra.items():
        assert child.vars[name] == value
    assert "ANTHROPIC_BASE_URL" not in child.dropped_names()
    assert "HTTPS_PROXY" not in child.dropped_names()


@pytest.mark.parametrize(
    "name",
    ["HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "ASUP_DEPTH", "ASUP_ANYTHING"],
)
def test_extra_may_not_set_reserved_names(name: str) -> None:
    with pytest.raises(ReservedVariableError, match=f"extra may not set {name}"):
        _build({}, extra={name: "x"})


@pytest.mark.parametrize("extra", [{"": "x"}, {"A=B": "x"}, {"A": "x\0y"}])
def test_extra_must_be_a_valid_environment(extra: dict[str, str]) -> None:
    with pytest.raises(ReservedVariableError, match="cannot carry it"):
        _build({}, extra=extra)


def test_custom_depth_var_is_replaced_and_incremented() -> None:
    child = _build({"ASUP_DEPTH": "0", "MY_DEPTH": "2"}, depth_var="MY_DEPTH")
    assert child.vars["MY_DEPTH"] == "3"
    assert child.dropped_names()["MY_DEPTH"] is DropReason.OWN_NAMESPACE
    assert child.dropped_names()["ASUP_DEPTH"] is DropReason.OWN_NAMESPACE
    assert "ASUP_DEPTH" not in child.vars


@pytest.mark.parametrize(("host", "child"), [(None, "1"), ("", "1"), ("0", "1"), ("3", "4")])
def test_depth_is_host_plus_one(host: str | None, child: str) -> None:
    host_env = {} if host is None else {"ASUP_DEPTH": host}
    assert _build(host_env).vars["ASUP_DEPTH"] == child


@pytest.mark.parametrize("value", ["x", "-1", " 1", "1.0", "٣", "+1"])
def test_an_unreadable_depth_refuses(value: str) -> None:
    with pytest.raises(NestedRunRefused, match="not a whole number"):
        _build({"ASUP_DEPTH": value})
    with pytest.raises(NestedRunRefused, match="not a whole number"):
        check_not_nested({"ASUP_DEPTH": value})


def test_an_unreadable_depth_is_not_echoed() -> None:
    with pytest.raises(NestedRunRefused) as info:
        check_not_nested({"ASUP_DEPTH": "sk-leaked-value"})
    assert "sk-leaked-value" not in str(info.value)


@pytest.mark.parametrize("env", [{}, {"ASUP_DEPTH": ""}, {"ASUP_DEPTH": "0"}, {"OTHER": "1"}])
def test_not_nested_passes_at_depth_zero(env: dict[str, str]) -> None:
    check_not_nested(env)
    assert host_depth(env) == 0


@pytest.mark.parametrize("depth", [1, 2, 7])
def test_nested_run_refuses_with_a_sentence(depth: int) -> None:
    with pytest.raises(NestedRunRefused) as info:
        check_not_nested({"ASUP_DEPTH": str(depth)})
    message = str(info.value)
    assert f"ASUP_DEPTH={depth}" in message
    assert "may not start another supervised run" in message
    assert "from your own shell" in message


def test_nested_refusal_honours_a_custom_variable() -> None:
    check_not_nested({"ASUP_DEPTH": "5"}, depth_var="OTHER_DEPTH")
    with pytest.raises(NestedRunRefused, match="OTHER_DEPTH=1"):
        check_not_nested({"OTHER_DEPTH": "1"}, depth_var="OTHER_DEPTH")


def test_errors_hang_from_the_supervisor_root() -> None:
    with pytest.raises(Refusal) as info:
        check_not_nested({"ASUP_DEPTH": "1"})
    assert info.value.code == "nested_run"
    assert info.value.sentence == str(info.value)
    assert issubclass(ReservedVariableError, SupervisorError)
    assert issubclass(ReservedVariableError, ValueError)


def test_repr_and_record_carry_names_never_values() -> None:
    host = {
        "ANTHROPIC_API_KEY": "sk-ant-VERYSECRET",
        "GITHUB_TOKEN": "ghp_ALSOSECRET",
        "PATH": "/usr/bin",
    }
    child = _build(host)
    text = repr(child)
    assert "ANTHROPIC_API_KEY" in text
    assert "GITHUB_TOKEN:credential-shaped" in text
    assert "VERYSECRET" not in text
    assert "ALSOSECRET" not in text
    assert "ALSOSECRET" not in repr(child.dropped)


def test_child_vars_are_read_only() -> None:
    child = _build({})
    assert isinstance(child.vars, types.MappingProxyType)
    with pytest.raises(TypeError):
        child.vars["PATH"] = "/tmp"  # type: ignore[index]


def test_host_mapping_is_not_modified() -> None:
    host = {"PATH": ".:/usr/bin", "GITHUB_TOKEN": "t", "HOME": "/root"}
    before = dict(host)
    _build(host)
    assert host == before


@pytest.mark.parametrize(("home", "tmpdir"), [("rel/home", "/tmp/x"), ("/h", "tmp")])
def test_per_run_directories_must_be_absolute(home: str, tmpdir: str) -> None:
    with pytest.raises(ValueError, match="absolute"):
        build_child_env({}, CLAUDE, home=home, tmpdir=tmpdir)


def test_all_lists_every_public_name() -> None:
    tree = ast.parse(Path(env_module.__file__).read_text())
    public = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            public.add(node.name)
        elif isinstance(node, ast.Assign):
            public |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            public.add(node.target.id)
    public = {n for n in public if not n.startswith("_")}
    assert len(set(env_module.__all__)) == len(env_module.__all__)
    assert set(env_module.__all__) == public


def test_an_agents_own_tmpdir_variables_get_the_per_run_tmpdir() -> None:
    child = _build({"PATH": "/usr/bin"}, CLAUDE)
    assert child.vars["CLAUDE_CODE_TMPDIR"] == TMPDIR
    assert "CLAUDE_CODE_TMPDIR" not in _build({"PATH": "/usr/bin"}, CODEX).vars
