"""The person's side of the permission gate: the ACP client puts the policy's asks to an
approver, a yes covers exactly the one action (and the one fs request that carries it out),
and the terminal approver asks on a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import PermissionOption as AcpOption
from acp.schema import ToolCallUpdate

from supervisor.acp.client import SupervisorClient, run_policy
from supervisor.approval import Answer, ApprovalRequest, ScriptedApprover
from supervisor.cli.approve import TerminalApprover, parse_answer, render_question
from supervisor.events import PermissionDenied, RunEvent, SeqCounter, WarningRaised
from supervisor.policy import (
    Action,
    Decision,
    PermissionOption,
    PermissionOptionKind,
    Policy,
    RiskClass,
    Rule,
    evaluate,
    rule_from_option,
)
from supervisor.registry import Mode

OPTIONS = [
    AcpOption(option_id="allow_always", name="Always Allow", kind="allow_always"),
    AcpOption(option_id="allow", name="Allow", kind="allow_once"),
    AcpOption(option_id="reject", name="Reject", kind="reject_once"),
]
ALWAYS = PermissionOptionKind.ALLOW_ALWAYS
ONCE = PermissionOptionKind.ALLOW_ONCE


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "wt"
    root.mkdir()
    return root


def _client(
    root: Path, answers: list[Answer], mode: Mode = Mode.READ_ONLY, extra: Policy | None = None
) -> tuple[SupervisorClient, ScriptedApprover, list[RunEvent]]:
    events: list[RunEvent] = []
    approver = ScriptedApprover(answers)
    client = SupervisorClient(
        root=root,
        agent="gemini-acp",
        policy=run_policy(mode, extra),
        seq=SeqCounter(),
        emit=events.append,
        approver=approver,
    )
    return client, approver, events


def _call(kind: str, path: str | None = None, command: str | None = None) -> ToolCallUpdate:
    body: dict[str, Any] = {"toolCallId": "c1", "kind": kind, "title": f"{kind} thing"}
    if path is not None:
        body["locations"] = [{"path": path}]
    if command is not None:
        body["rawInput"] = {"command": command}
    return ToolCallUpdate.model_validate(body)


async def _permission(client: SupervisorClient, call: ToolCallUpdate) -> dict[str, Any]:
    got = await client.request_permission("s", call, OPTIONS)
    outcome: dict[str, Any] = got.model_dump(mode="json", by_alias=True, exclude_none=True)[
        "outcome"
    ]
    return outcome


def test_an_ask_goes_to_the_approver_with_the_agents_options(tree: Path) -> None:
    client, approver, events = _client(tree, [ONCE])
    got = asyncio.run(_permission(client, _call("execute", command="make test")))
    assert got == {"outcome": "selected", "optionId": "allow"}
    [asked] = approver.asked
    assert asked.action.risk is RiskClass.SHELL
    assert asked.action.target == "make test"
    assert [o.option_id for o in asked.options] == ["allow_always", "allow", "reject"]
    assert asked.title == "execute thing"
    assert "ask by rule shell '*' -> ask" in asked.verdict.reason
    assert client.decisions[-1].decided_by == "approver"
    assert [e.code for e in events if isinstance(e, WarningRaised)] == ["policy_allow"]


def test_allow_always_from_the_person_is_answered_allow_once(tree: Path) -> None:
    client, _, _ = _client(tree, [ALWAYS, None])
    call = _call("execute", command="make test")
    assert asyncio.run(_permission(client, call))["optionId"] == "allow"
    assert "lowered" in client.decisions[-1].reason
    # the same command again is asked again (nothing was remembered as "always")
    assert asyncio.run(_permission(client, call))["optionId"] == "reject"


@pytest.mark.parametrize("answer", [False, None, PermissionOptionKind.REJECT_ONCE])
def test_a_no_is_a_reject_and_a_denial(tree: Path, answer: Answer) -> None:
    client, _, events = _client(tree, [answer])
    got = asyncio.run(_permission(client, _call("execute", command="rm -rf build")))
    assert got == {"outcome": "selected", "optionId": "reject"}
    assert client.decisions[-1].decision is Decision.DENY
    assert client.decisions[-1].decided_by == "approver"
    assert [e.code for e in events if isinstance(e, WarningRaised)] == ["policy_deny"]


def test_rules_decide_before_the_person_is_asked(tree: Path) -> None:
    extra = Policy(
        rules=(
            rule_from_option("allow", "shell:git *"),
            rule_from_option("deny", "shell:git push*"),
        )
    )
    client, approver, _ = _client(tree, [], extra=extra)
    status = asyncio.run(_permission(client, _call("execute", command="git status")))
    push = asyncio.run(_permission(client, _call("execute", command="git push -f")))
    assert status["optionId"] == "allow"
    assert push["optionId"] == "reject"
    assert approver.asked == []  # neither was put to the person


def test_a_hard_deny_is_never_put_to_the_person(tree: Path) -> None:
    extra = Policy(rules=(Rule(risk=RiskClass.WRITE, pattern="*", decision=Decision.ALLOW),))
    client, approver, _ = _client(tree, [ONCE], Mode.WORKTREE_WRITE, extra)
    got = asyncio.run(_permission(client, _call("edit", path=f"{tree}/.git/config")))
    assert got["optionId"] == "reject"
    assert client.decisions[-1].hard is True
    assert approver.asked == []


def test_a_yes_to_a_write_grants_exactly_the_one_fs_write_that_follows(tree: Path) -> None:
    # gemini and opencode ask (session/request_permission), then write through fs/*
    client, approver, events = _client(tree, [ONCE])
    target = f"{tree}/NOTES.md"

    async def scenario() -> None:
        assert (await _permission(client, _call("edit", path=target)))["optionId"] == "allow"
        await client.write_text_file("s", target, "first\n")  # the granted write: not asked
        with pytest.raises(acp.RequestError):  # the grant is spent: asked again → no answer
            await client.write_text_file("s", target, "second\n")

    asyncio.run(scenario())
    assert (tree / "NOTES.md").read_text() == "first\n"
    assert len(approver.asked) == 2
    assert [d.decided_by for d in client.decisions] == ["approver", "grant", "approver"]
    denied = [e for e in events if isinstance(e, PermissionDenied)]
    assert [d.path for d in denied] == [target]


def test_a_grant_covers_no_other_path(tree: Path) -> None:
    client, approver, _ = _client(tree, [ONCE])

    async def scenario() -> None:
        await _permission(client, _call("edit", path=f"{tree}/NOTES.md"))
        with pytest.raises(acp.RequestError):
            await client.write_text_file("s", f"{tree}/OTHER.md", "x\n")

    asyncio.run(scenario())
    assert not (tree / "OTHER.md").exists()
    assert len(approver.asked) == 2


def test_headless_never_asks_and_denies(tree: Path) -> None:
    events: list[RunEvent] = []
    client = SupervisorClient(
        root=tree,
        agent="a",
        policy=run_policy(Mode.READ_ONLY),
        seq=SeqCounter(),
        emit=events.append,
    )
    got = asyncio.run(_permission(client, _call("execute", command="ls")))
    assert got["optionId"] == "reject"
    assert client.decisions[-1].decided_by == "headless"


def test_a_failing_approver_is_a_deny_with_a_warning(tree: Path) -> None:
    class Broken:
        async def ask(self, request: ApprovalRequest) -> Answer:
            raise RuntimeError("terminal gone")

    events: list[RunEvent] = []
    client = SupervisorClient(
        root=tree,
        agent="a",
        policy=run_policy(Mode.READ_ONLY),
        seq=SeqCounter(),
        emit=events.append,
        approver=Broken(),
    )
    got = asyncio.run(_permission(client, _call("execute", command="ls")))
    assert got["optionId"] == "reject"
    codes = [e.code for e in events if isinstance(e, WarningRaised)]
    assert codes == ["approver_failed", "policy_deny"]


def test_stopping_withdraws_an_open_question(tree: Path) -> None:
    class Slow:
        async def ask(self, request: ApprovalRequest) -> Answer:
            await asyncio.sleep(60)
            return True

    client = SupervisorClient(
        root=tree,
        agent="a",
        policy=run_policy(Mode.READ_ONLY),
        seq=SeqCounter(),
        emit=lambda _e: None,
        approver=Slow(),
    )

    async def scenario() -> dict[str, Any]:
        pending = asyncio.ensure_future(_permission(client, _call("execute", command="ls")))
        await asyncio.sleep(0.1)
        client.stop()
        return await asyncio.wait_for(pending, 5)

    assert asyncio.run(scenario()) == {"outcome": "cancelled"}
    assert client.decisions[-1].decision is Decision.DENY


def test_questions_are_put_one_at_a_time(tree: Path) -> None:
    open_now: list[int] = []
    most: list[int] = []

    class Counting:
        async def ask(self, request: ApprovalRequest) -> Answer:
            open_now.append(1)
            most.append(len(open_now))
            await asyncio.sleep(0.05)
            open_now.pop()
            return True

    client = SupervisorClient(
        root=tree,
        agent="a",
        policy=run_policy(Mode.READ_ONLY),
        seq=SeqCounter(),
        emit=lambda _e: None,
        approver=Counting(),
    )

    async def scenario() -> None:
        calls = [_call("execute", command=f"cmd {i}") for i in range(4)]
        await asyncio.gather(*(_permission(client, c) for c in calls))

    asyncio.run(scenario())
    assert max(most) == 1


# -- run options ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "spec", "risk", "pattern"),
    [
        ("allow", "shell:git *", "shell", "git *"),
        ("deny", "*:/etc/*", "*", "/etc/*"),
        ("ask", "network:api.example.com", "network", "api.example.com"),
        ("allow", "shell:echo a:b", "shell", "echo a:b"),  # only the first colon splits
    ],
)
def test_rule_from_option(decision: str, spec: str, risk: str, pattern: str) -> None:
    rule = rule_from_option(decision, spec)
    assert (rule.risk, rule.pattern, rule.decision) == (risk, pattern, decision)


@pytest.mark.parametrize(
    ("spec", "fix"),
    [
        ("git status", "write it as RISK:PATTERN"),
        (":x", "write it as RISK:PATTERN"),
        ("disk:x", "'disk' is not a risk class"),
        ("shell:", "the pattern is empty"),
    ],
)
def test_rule_from_option_refuses_with_the_fix(spec: str, fix: str) -> None:
    with pytest.raises(ValueError, match=fix):
        rule_from_option("allow", spec)


def test_user_and_run_layers_come_after_the_write_layer() -> None:
    user = Policy(rules=(rule_from_option("deny", "write:docs/*"),))
    run = Policy(rules=(rule_from_option("allow", "write:docs/draft.md"),))
    policy = run_policy(Mode.WORKTREE_WRITE, Policy.layered(user, run))

    def decide(target: str) -> Decision:
        return evaluate(policy, Action(risk=RiskClass.WRITE, target=target, agent="a")).decision

    assert decide("src/x.py") is Decision.ALLOW  # the --write layer
    assert decide("docs/x.md") is Decision.DENY  # the user's config beats it
    assert decide("docs/draft.md") is Decision.ALLOW  # the run's option beats the config
    assert decide(".git/HEAD") is Decision.DENY  # the hard deny beats all


# -- the terminal ----------------------------------------------------------------------------

AGENT_OPTIONS = (
    PermissionOption(option_id="a", name="Always Allow", kind=ALWAYS),
    PermissionOption(option_id="o", name="Allow", kind=ONCE),
    PermissionOption(option_id="r", name="Reject", kind=PermissionOptionKind.REJECT_ONCE),
)


def _request(options: tuple[PermissionOption, ...] = AGENT_OPTIONS) -> ApprovalRequest:
    action = Action(risk=RiskClass.SHELL, target="make test", agent="claude-acp", tool="Bash")
    policy = run_policy(Mode.READ_ONLY)
    return ApprovalRequest(evaluate(policy, action), options, "Bash: make test")


@pytest.mark.parametrize(
    ("line", "answer"),
    [
        ("1", ALWAYS),
        ("2\n", ONCE),
        (" 3 ", PermissionOptionKind.REJECT_ONCE),
        ("y", ONCE),
        ("YES", ONCE),
        ("n", False),
        ("", False),
        ("4", "not an answer: type a number 1-3, y or n"),
        ("maybe", "not an answer: type a number 1-3, y or n"),
    ],
)
def test_parse_answer(line: str, answer: object) -> None:
    if isinstance(answer, str) and not isinstance(answer, PermissionOptionKind):
        with pytest.raises(ValueError, match=answer):
            parse_answer(line, _request())
    else:
        assert parse_answer(line, _request()) == answer


def test_parse_answer_without_options_is_yes_or_no() -> None:
    assert parse_answer("y", _request(())) is True
    with pytest.raises(ValueError, match="not an answer: type y or n"):
        parse_answer("1", _request(()))


def test_the_question_shows_the_action_the_reason_and_the_options() -> None:
    text = render_question(_request(), "claude-acp")
    assert "claude-acp asks: Bash: make test" in text
    assert "shell 'make test' by agent 'claude-acp' (tool 'Bash')" in text
    assert "why asked: " in text
    assert "-> ask" in text
    assert "1  Always Allow (asup allows this one action only)" in text
    assert "2  Allow" in text
    assert text.endswith("answer 1-3 (y = allow once, n = deny, Enter = deny): ")


def _on_pty(typed: bytes) -> tuple[Answer, str, list[str]]:
    master, slave = os.openpty()
    calls: list[str] = []
    try:
        approver = TerminalApprover(
            "claude-acp",
            tty_path=os.ttyname(slave),
            pause=lambda: calls.append("pause"),
            resume=lambda: calls.append("resume"),
        )

        async def scenario() -> Answer:
            asking = asyncio.ensure_future(approver.ask(_request()))
            await asyncio.sleep(0.2)
            os.write(master, typed)
            return await asyncio.wait_for(asking, 5)

        answer = asyncio.run(scenario())
        os.set_blocking(master, False)
        shown = b""
        try:
            while chunk := os.read(master, 65536):
                shown += chunk
        except (BlockingIOError, OSError):
            pass
        return answer, shown.decode("utf-8", "replace"), calls
    finally:
        os.close(master)
        os.close(slave)


def test_terminal_approver_asks_on_a_real_terminal() -> None:
    answer, shown, calls = _on_pty(b"2\n")
    assert answer is ONCE
    assert "claude-acp asks: Bash: make test" in shown
    assert calls == ["pause", "resume"]


def test_terminal_approver_asks_again_after_a_bad_answer() -> None:
    answer, shown, _ = _on_pty(b"7\n3\n")
    assert answer is PermissionOptionKind.REJECT_ONCE
    assert "not an answer: type a number 1-3, y or n" in shown


def test_terminal_approver_gives_up_after_three_bad_answers() -> None:
    answer, _, _ = _on_pty(b"x\nx\nx\n1\n")
    assert answer is None


def test_terminal_approver_without_a_terminal_is_no_answer(tmp_path: Path) -> None:
    approver = TerminalApprover("a", tty_path=str(tmp_path / "no-tty"))
    assert asyncio.run(approver.ask(_request())) is None
    assert TerminalApprover.available(str(tmp_path / "no-tty")) is False


# -- the silence budget (--max-idle) ----------------------------------------------------------

SCRIPTED_AGENT = Path(__file__).with_name("scripted_acp_agent.py")


def _idle_run(tmp_path: Path, scenario: str, approver: Any, max_idle: float) -> Any:
    import sys

    from supervisor.acp.client import run_acp_agent
    from supervisor.acp.fold import AcpFold

    root = tmp_path / "wt"
    root.mkdir(exist_ok=True)
    seq = SeqCounter()
    client = SupervisorClient(
        root=root,
        agent="fake",
        policy=run_policy(Mode.READ_ONLY),
        seq=seq,
        emit=lambda _e: None,
        approver=approver,
    )
    return asyncio.run(
        run_acp_agent(
            [sys.executable, str(SCRIPTED_AGENT), scenario],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
            cwd=root,
            prompt="hi",
            client=client,
            fold=AcpFold(seq, cwd=str(root)),
            on_transcript=lambda _b: None,
            max_runtime=60.0,
            max_idle=max_idle,
            grace=1.0,
        )
    )


def test_a_silent_agent_is_ended_by_the_idle_budget(tmp_path: Path) -> None:
    run = _idle_run(tmp_path, "silent", None, max_idle=2.0)
    assert run.outcome.status == "timed_out"
    assert "sent nothing for 2 s (--max-idle)" in run.outcome.reason
    assert run.child.wall_time_s < 30  # not the 60 s runtime budget


def test_a_question_open_to_the_person_does_not_count_as_silence(tmp_path: Path) -> None:
    class Slow:
        async def ask(self, request: ApprovalRequest) -> Answer:
            await asyncio.sleep(4.0)  # twice the idle budget
            return True

    run = _idle_run(tmp_path, "ask", Slow(), max_idle=2.0)
    assert run.outcome.status == "completed", run.outcome


@pytest.mark.parametrize(
    ("call", "tool"),
    [
        # opencode titles a write with its path: the kind names the tool
        ({"kind": "edit", "title": "{root}/N.md", "locations": [{"path": "{root}/N.md"}]}, "edit"),
        # codex titles a command with the command it wraps in `bash -lc`
        (
            {
                "kind": "execute",
                "title": "echo hi",
                "rawInput": {"command": ["/bin/bash", "-lc", "echo hi"]},
            },
            "execute",
        ),
        # a title that says more than the target is kept
        ({"kind": "read", "title": "Read file", "locations": [{"path": "{root}/a"}]}, "Read file"),
        ({"kind": "edit", "_meta": {"claudeCode": {"toolName": "Write"}}, "title": "x"}, "Write"),
    ],
)
def test_the_tool_named_in_an_action_is_not_a_repeat_of_its_target(
    tree: Path, call: dict[str, Any], tool: str
) -> None:
    import json

    from supervisor.acp.client import action_for_tool_call

    bound = json.loads(json.dumps(call).replace("{root}", str(tree)))
    assert action_for_tool_call(bound, agent="a", root=tree).tool == tool
