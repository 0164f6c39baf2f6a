"""The ACP client's pure parts and handlers: the worktree boundary of fs/*, the tool-call →
policy action mapping, the answers to permission requests, and the per-agent recipes."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import PermissionOption as AcpOption
from acp.schema import ToolCallUpdate

from supervisor.acp.client import (
    OutsideWorktree,
    SupervisorClient,
    action_for_tool_call,
    probe_acp_agent,
    resolve_in_worktree,
    run_policy,
)
from supervisor.acp.recipes import CLAUDE_BLOCKLIST, acp_recipe
from supervisor.errors import Refusal
from supervisor.events import PermissionDenied, RunEvent, SeqCounter, WarningRaised
from supervisor.policy import Action, Decision, RiskClass, evaluate
from supervisor.probe import ProbeState
from supervisor.registry import AGENTS, Mode, get_agent


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "wt"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / ".git").write_text("gitdir: /elsewhere\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    (root / "link-out").symlink_to(tmp_path / "outside.txt")
    (root / "link-dir-out").symlink_to(tmp_path)
    (root / "link-in").symlink_to(root / "src" / "app.py")
    (root / "link-git").symlink_to(root / ".git")
    return root


# -- the worktree boundary ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "rel"),
    [
        ("src/app.py", "src/app.py"),
        ("{root}/src/app.py", "src/app.py"),
        ("{root}/src/new.py", "src/new.py"),  # a new file inside
        ("{root}/link-in", "src/app.py"),  # a link that stays inside
        ("{root}", "."),
        ("{root}/./src//app.py", "src/app.py"),
    ],
)
def test_paths_inside_resolve(tree: Path, path: str, rel: str) -> None:
    real, got = resolve_in_worktree(tree, path.format(root=tree))
    assert got == rel
    assert real == tree.resolve() / rel if rel != "." else real == tree.resolve()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("{root}/../outside.txt", "'..'"),
        ("../outside.txt", "'..'"),
        ("src/../../outside.txt", "'..'"),
        ("/etc/passwd", "outside the worktree"),
        ("{root}/link-out", "outside the worktree"),
        ("{root}/link-dir-out/outside.txt", "outside the worktree"),
        ("{root}/.git", "git metadata"),
        ("{root}/.git/config", "git metadata"),
        ("{root}/link-git", "git metadata"),
        ("src/.git/hooks/pre-commit", "git metadata"),
        ("", "not a path"),
        ("src/a\0b", "not a path"),
    ],
)
def test_paths_outside_are_refused(tree: Path, path: str, why: str) -> None:
    with pytest.raises(OutsideWorktree, match=why):
        resolve_in_worktree(tree, path.format(root=tree))


# -- the fs handlers --------------------------------------------------------------------------


def _client(root: Path, mode: Mode = Mode.READ_ONLY) -> tuple[SupervisorClient, list[RunEvent]]:
    events: list[RunEvent] = []
    client = SupervisorClient(
        root=root, agent="claude-acp", policy=run_policy(mode), seq=SeqCounter(), emit=events.append
    )
    return client, events


def test_read_inside_and_a_missing_file_reads_empty(tree: Path) -> None:
    client, _ = _client(tree)
    got = asyncio.run(client.read_text_file("s", str(tree / "src" / "app.py")))
    assert got.content == "print('hi')\n"
    assert asyncio.run(client.read_text_file("s", str(tree / "nope.txt"))).content == ""
    rows = tree / "rows.txt"
    rows.write_text("a\nb\nc\nd\n")
    assert asyncio.run(client.read_text_file("s", str(rows), line=2, limit=2)).content == "b\nc\n"


@pytest.mark.parametrize("name", ["link-out", "../outside.txt", ".git", "/etc/hostname"])
def test_read_outside_is_an_acp_error_and_a_denial_naming_the_path(tree: Path, name: str) -> None:
    client, events = _client(tree)
    path = name if name.startswith("/") else f"{tree}/{name}"
    with pytest.raises(acp.RequestError) as caught:
        asyncio.run(client.read_text_file("s", path))
    assert caught.value.code == -32602
    assert caught.value.data["path"] == path
    denied = [e for e in events if isinstance(e, PermissionDenied)]
    assert [(d.tool, d.path) for d in denied] == [("fs/read_text_file", path)]


def test_write_lands_inside_in_a_write_run(tree: Path) -> None:
    client, events = _client(tree, Mode.WORKTREE_WRITE)
    asyncio.run(client.write_text_file("s", str(tree / "docs" / "NEW.md"), "new\n"))
    assert (tree / "docs" / "NEW.md").read_text() == "new\n"
    assert not [e for e in events if isinstance(e, PermissionDenied)]


def test_write_in_a_read_only_run_is_denied_headless(tree: Path) -> None:
    client, events = _client(tree, Mode.READ_ONLY)
    with pytest.raises(acp.RequestError):
        asyncio.run(client.write_text_file("s", str(tree / "NEW.md"), "new\n"))
    assert not (tree / "NEW.md").exists()
    denied = [e for e in events if isinstance(e, PermissionDenied)]
    assert [d.path for d in denied] == [str(tree / "NEW.md")]
    assert denied[0].detail is not None
    assert "no one can answer" in denied[0].detail


@pytest.mark.parametrize("name", ["link-out", ".git/config", "link-git", "../x.txt"])
def test_write_outside_is_refused_even_in_a_write_run(tree: Path, name: str) -> None:
    client, events = _client(tree, Mode.WORKTREE_WRITE)
    before = (tree.parent / "outside.txt").read_text()
    with pytest.raises(acp.RequestError):
        asyncio.run(client.write_text_file("s", f"{tree}/{name}", "pwned\n"))
    assert (tree.parent / "outside.txt").read_text() == before
    assert (tree / ".git").read_text() == "gitdir: /elsewhere\n"
    assert not (tree.parent / "x.txt").exists()
    assert [type(e) for e in events] == [PermissionDenied]


# -- permission requests --------------------------------------------------------------------

CLAUDE_OPTIONS = [
    AcpOption(option_id="allow_always", name="Always Allow", kind="allow_always"),
    AcpOption(option_id="allow", name="Allow", kind="allow_once"),
    AcpOption(option_id="reject", name="Reject", kind="reject_once"),
]


def _write_call(path: str) -> ToolCallUpdate:
    return ToolCallUpdate.model_validate(
        {
            "toolCallId": "t1",
            "kind": "edit",
            "title": f"Write {path}",
            "locations": [{"path": path}],
            "rawInput": {"file_path": path, "content": "x"},
            "_meta": {"claudeCode": {"toolName": "Write"}},
        }
    )


def _answer(client: SupervisorClient, call: ToolCallUpdate) -> dict[str, Any]:
    got = asyncio.run(client.request_permission("s", call, CLAUDE_OPTIONS))
    dumped: dict[str, Any] = got.model_dump(mode="json", by_alias=True, exclude_none=True)[
        "outcome"
    ]
    return dumped


def test_headless_ask_is_answered_reject_and_recorded(tree: Path) -> None:
    client, events = _client(tree, Mode.READ_ONLY)
    answer = _answer(client, _write_call(f"{tree}/NEW.md"))
    assert answer == {"outcome": "selected", "optionId": "reject"}
    assert client.decisions[-1].decided_by == "headless"
    warnings = [e for e in events if isinstance(e, WarningRaised)]
    assert warnings[-1].code == "policy_deny"
    assert "'NEW.md'" in warnings[-1].message


def test_an_allow_is_answered_allow_once_never_allow_always(tree: Path) -> None:
    client, _ = _client(tree, Mode.WORKTREE_WRITE)
    answer = _answer(client, _write_call(f"{tree}/NEW.md"))
    assert answer == {"outcome": "selected", "optionId": "allow"}


def test_a_write_outside_in_a_write_run_is_rejected(tree: Path) -> None:
    client, _ = _client(tree, Mode.WORKTREE_WRITE)
    assert _answer(client, _write_call("/etc/passwd"))["optionId"] == "reject"
    assert _answer(client, _write_call(f"{tree}/.git/config"))["optionId"] == "reject"
    assert client.decisions[-1].hard is True


def test_no_rejecting_option_means_cancelled(tree: Path) -> None:
    client, _ = _client(tree, Mode.READ_ONLY)
    codex_like = [AcpOption(option_id="approved", name="Yes", kind="allow_once")]
    got = asyncio.run(client.request_permission("s", _write_call("x.py"), codex_like))
    assert got.model_dump(mode="json", by_alias=True, exclude_none=True)["outcome"] == {
        "outcome": "cancelled"
    }


@pytest.mark.parametrize(
    ("call", "risk", "target"),
    [
        ({"kind": "read", "locations": [{"path": "{root}/src/app.py"}]}, "read", "src/app.py"),
        ({"kind": "search", "title": "Grep", "rawInput": {"path": "src"}}, "read", "src"),
        (
            {"kind": "edit", "content": [{"type": "diff", "path": "{root}/a.md", "newText": ""}]},
            "write",
            "a.md",
        ),
        ({"kind": "edit", "locations": [{"path": "/etc/passwd"}]}, "write", "/etc/passwd"),
        ({"kind": "move", "locations": [{"path": "{root}/b"}]}, "write", "b"),
        ({"kind": "delete", "locations": [{"path": "{root}/c"}]}, "destructive", "c"),
        ({"kind": "execute", "rawInput": {"command": ["git", "status"]}}, "shell", "git status"),
        ({"kind": "execute", "rawInput": {"command": "ls -la"}}, "shell", "ls -la"),
        ({"kind": "fetch", "rawInput": {"url": "https://example.com/x"}}, "network", "example.com"),
        ({"kind": "think", "title": "Plan"}, "destructive", "Plan"),
        ({"kind": "other", "title": "mystery"}, "destructive", "mystery"),
        ({"title": "no kind", "rawInput": {"command": "rm -rf /"}}, "shell", "rm -rf /"),
        ({"title": "nothing at all"}, "destructive", "nothing at all"),
    ],
)
def test_tool_call_to_action(tree: Path, call: dict[str, Any], risk: str, target: str) -> None:
    bound = json.loads(json.dumps(call).replace("{root}", str(tree)))
    action = action_for_tool_call(bound, agent="codex-acp", root=tree)
    assert (action.risk, action.target) == (risk, target)


def test_run_policy_write_layer_keeps_the_outside_and_git_denied() -> None:
    write = run_policy(Mode.WORKTREE_WRITE)
    read = run_policy(Mode.READ_ONLY)

    def decide(policy: Any, target: str) -> Decision:
        return evaluate(policy, Action(risk=RiskClass.WRITE, target=target, agent="a")).decision

    assert decide(write, "src/x.py") is Decision.ALLOW
    assert decide(write, "/etc/passwd") is Decision.DENY
    assert decide(write, "../x") is Decision.DENY
    assert decide(write, ".git/config") is Decision.DENY
    assert decide(read, "src/x.py") is Decision.ASK


# -- recipes ----------------------------------------------------------------------------------


def test_claude_acp_recipe() -> None:
    agent = get_agent("claude-acp")
    recipe = acp_recipe(
        agent,
        mode=Mode.READ_ONLY,
        home="/run/home/",
        now_ms=1_700_000_000_123,
        endpoint="http://127.0.0.1:8080/",
        model="claude-sonnet-4-5",
    )
    assert recipe.argv == ["claude-agent-acp"]
    assert recipe.env == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:8080",
        "ANTHROPIC_MODEL": "claude-sonnet-4-5",
        "CLAUDE_CONFIG_DIR": "/run/home/.claude",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    assert json.loads(recipe.home_files[CLAUDE_BLOCKLIST]) == {
        "fetchedAt": 1_700_000_000_123,
        "plugins": [],
    }
    assert CLAUDE_BLOCKLIST == ".claude/plugins/blocklist.json"


def test_codex_acp_recipe() -> None:
    agent = get_agent("codex-acp")
    recipe = acp_recipe(
        agent, mode=Mode.WORKTREE_WRITE, home="/h", now_ms=0, endpoint="http://127.0.0.1:9/"
    )
    assert recipe.argv == ["codex-acp"]
    assert recipe.env == {"CODEX_HOME": "/h/.codex"}
    config = tomllib.loads(recipe.home_files[".codex/config.toml"])
    assert config["approval_policy"] == "untrusted"
    assert config["model"] == "gpt-5.3-codex"
    assert config["sandbox_mode"] == "danger-full-access"
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:9/v1"
    assert provider["supports_websockets"] is False
    assert provider["env_key"] == "OPENAI_API_KEY"
    assert config["features"]["plugins"] is False
    assert config["features"]["shell_snapshot"] is False
    assert config["analytics"] == {"enabled": False}
    assert config["otel"]["exporter"] == "none"


def test_recipes_refuse_what_they_cannot_do() -> None:
    with pytest.raises(Refusal, match="--max-runtime"):
        acp_recipe(get_agent("claude-acp"), mode=Mode.READ_ONLY, home="/h", now_ms=0, max_turns=3)
    with pytest.raises(Refusal, match="not an http"):
        acp_recipe(get_agent("codex-acp"), mode=Mode.READ_ONLY, home="/h", now_ms=0, endpoint="x")
    with pytest.raises(Refusal, match="no ACP launch recipe"):
        acp_recipe(get_agent("claude-cli"), mode=Mode.READ_ONLY, home="/h", now_ms=0)


def test_acp_agents_are_registered() -> None:
    acp_ids = sorted(a.id for a in AGENTS.values() if a.transport == "acp")
    assert acp_ids == ["claude-acp", "codex-acp", "gemini-acp", "opencode-acp"]


def test_probe_reads_the_npm_package_version(tmp_path: Path) -> None:
    pkg = tmp_path / "node_modules" / "@zed-industries" / "codex-acp"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "x", "version": "0.16.0"}))
    script = pkg / "bin" / "codex-acp.js"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    bindir = tmp_path / "node_modules" / ".bin"
    bindir.mkdir()
    (bindir / "codex-acp").symlink_to(script)
    probe = probe_acp_agent(get_agent("codex-acp"), {"PATH": str(bindir)})
    assert (probe.state, probe.version, probe.in_recorded_range) == (
        ProbeState.INSTALLED,
        "0.16.0",
        True,
    )
    assert probe_acp_agent(get_agent("codex-acp"), {"PATH": str(tmp_path)}).state is (
        ProbeState.NOT_INSTALLED
    )


# -- the run, against a scripted ACP agent (the SDK's agent side) -----------------------------

SCRIPTED_AGENT = Path(__file__).with_name("scripted_acp_agent.py")


def _run_fake(tmp_path: Path, scenario: str, **kw: Any) -> tuple[Any, list[RunEvent], bytes]:
    import sys

    from supervisor.acp.client import run_acp_agent
    from supervisor.acp.fold import AcpFold

    root = tmp_path / "wt"
    root.mkdir(exist_ok=True)
    seq = SeqCounter()
    events: list[RunEvent] = []
    client = SupervisorClient(
        root=root, agent="fake", policy=run_policy(Mode.WORKTREE_WRITE), seq=seq, emit=events.append
    )
    transcript = bytearray()
    outside = str(tmp_path / "outside.txt")
    run = asyncio.run(
        run_acp_agent(
            [sys.executable, str(SCRIPTED_AGENT), scenario, outside],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
            cwd=root,
            prompt="hi",
            client=client,
            fold=AcpFold(seq, cwd=str(root)),
            on_transcript=transcript.extend,
            **kw,
        )
    )
    return run, events, bytes(transcript)


def test_run_completes_and_refuses_a_write_outside(tmp_path: Path) -> None:
    from supervisor.events import MessageEmitted, TurnEnded

    run, events, transcript = _run_fake(tmp_path, "answer", grace=2.0)
    assert run.outcome.status == "completed"
    assert run.stop_reason == "end_turn"
    assert [e.text for e in events if isinstance(e, MessageEmitted)] == ["all done"]
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["end_turn"]
    denied = [e for e in events if isinstance(e, PermissionDenied)]
    assert [(d.tool, d.path) for d in denied] == [
        ("fs/write_text_file", str(tmp_path / "outside.txt"))
    ]
    assert not (tmp_path / "outside.txt").exists()
    lines = [json.loads(line) for line in transcript.splitlines()]
    assert {line["direction"] for line in lines} == {"in", "out"}
    assert [e.seq for e in events] == list(range(len(events)))


def test_budget_sends_session_cancel_then_kills(tmp_path: Path) -> None:
    # a budget long enough for the fake agent to start and open its session on a busy machine
    run, _, transcript = _run_fake(tmp_path, "hang", max_runtime=5.0, grace=1.0)
    assert run.outcome.status == "timed_out"
    assert run.child.timed_out is True
    sent = [json.loads(line)["message"].get("method") for line in transcript.splitlines()]
    assert "session/cancel" in sent
    assert run.child.wall_time_s < 15


def test_cancel_event_cancels(tmp_path: Path) -> None:
    class Soon:
        async def wait(self) -> None:
            await asyncio.sleep(0.5)

    run, _, _ = _run_fake(tmp_path, "hang", cancel=Soon(), grace=1.0)
    assert run.outcome.status == "canceled"
    assert run.child.canceled is True


def test_an_agent_error_is_classified(tmp_path: Path) -> None:
    run, _, _ = _run_fake(tmp_path, "error", grace=1.0)
    assert (run.outcome.status, run.outcome.failure_kind) == ("failed", "server_error")


def test_an_agent_that_dies_fails_the_run(tmp_path: Path) -> None:
    run, _, _ = _run_fake(tmp_path, "crash", grace=1.0)
    assert run.outcome.status == "failed"
    assert run.child.exit_code == 3
