"""The real codex binary against the fake model server, one test per codex lab scenario.

Each scenario runs in its own network namespace (only loopback) through the recorder's
:func:`~supervisor.lab.recorder.run_scenario`. Checked without any codec: exit codes, what landed
on disk (git status of the scratch repo, paths that must stay absent), the final agent message,
the tool items of the stream (``command_execution`` / ``file_change``, with their status), and
that codex executed every tool call the model completed and answered it back (from the fake
server's request log). Then the live stdout goes through the codec and the shared scenario check
(:func:`~supervisor.lab.expect.scenario_mismatches`), as the replay suite does for recordings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import check_decoded, check_files, check_steps

from supervisor.lab.agents.codex import CodexLab
from supervisor.lab.recorder import RecordedRun, run_scenario
from supervisor.lab.scenarios import Scenario, scenarios_for
from supervisor.lab.scenarios.codex import MODEL_TOOLS
from supervisor.lab.script import ToolCall

AGENT = "codex-cli"
LAB = CodexLab()
SCENARIOS = scenarios_for(AGENT)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not LAB.installed(), reason=f"codex is not installed at {LAB.binary()} (run make vendor)"
    ),
]


@dataclass(frozen=True, slots=True)
class Executed:
    """A tool call codex ran and whose result it sent back to the model."""

    name: str
    output: str


def last_model_request(run: RecordedRun) -> dict[str, Any]:
    """The body of the last conversation request codex sent in the last step."""
    log = run.workdir / f"server.step{len(run.scenario.steps)}.jsonl"
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    main = [e for e in entries if e["lane"] == "main"]
    assert main, "codex sent no model request"
    body: dict[str, Any] = main[-1]["body"]
    return body


def executed_calls(run: RecordedRun) -> list[Executed]:
    """Calls in the thread's history (the last request's ``input``) that have an output."""
    items = last_model_request(run)["input"]
    outputs = {
        i["call_id"]: str(i["output"])
        for i in items
        if i.get("type") in ("function_call_output", "custom_tool_call_output")
    }
    return [
        Executed(i["name"], outputs[i["call_id"]])
        for i in items
        if i.get("type") in ("function_call", "custom_tool_call") and i["call_id"] in outputs
    ]


def completed_model_calls(scenario: Scenario) -> list[str]:
    """Names of the tool calls the script streams to the end (replies without a fault)."""
    assert scenario.steps[0].session != "resume"
    assert all(step.session == "resume" for step in scenario.steps[1:]), "one thread"
    return [
        block.name
        for step in scenario.steps
        for reply in step.replies
        if reply.http_status is None
        and reply.cut_after_events is None
        and reply.stream_error is None
        for block in reply.blocks
        if isinstance(block, ToolCall)
    ]


def tool_items(run: RecordedRun) -> list[dict[str, Any]]:
    """The finished tool items of the stream (every step), in order."""
    return [
        event["item"]
        for stdout in run.step_stdouts
        for event in map(json.loads, stdout.splitlines())
        if event["type"] == "item.completed" and event["item"]["type"] in MODEL_TOOLS
    ]


def final_message(run: RecordedRun) -> str:
    texts = [
        e["item"]["text"]
        for e in run.lines()
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]
    return texts[-1] if texts else ""


def usage_of(stdout: bytes) -> dict[str, int]:
    for line in stdout.splitlines():
        event = json.loads(line)
        if event["type"] == "turn.completed":
            usage: dict[str, int] = event["usage"]
            return usage
    raise AssertionError("no turn.completed")


def check_write_file(run: RecordedRun) -> None:
    assert (run.repo / "hello.txt").read_text() == "hello\nfrom codex\n"


def check_edit_file(run: RecordedRun) -> None:
    assert (run.repo / "notes.txt").read_text() == "alpha\nBETA\ngamma\n"


def check_command_execution(run: RecordedRun) -> None:
    assert (run.repo / "build.log").read_text().split() == ["3", "README.md"]


def check_resume(run: RecordedRun) -> None:
    first, second = run.step_stdouts
    thread = json.loads(first.splitlines()[0])
    assert thread["type"] == "thread.started"
    assert json.loads(second.splitlines()[0]) == thread
    before, after = usage_of(first), usage_of(second)
    # usage is a running total per thread: the resumed turn reports both turns
    assert after["input_tokens"] > before["input_tokens"]
    assert after["reasoning_output_tokens"] == before["reasoning_output_tokens"]


def check_sandbox_unavailable(run: RecordedRun) -> None:
    assert "Refusing to create helper binaries under temporary dir" in run.meta["stderr_tail"]
    assert not (run.workdir / "home" / ".codex").exists()
    assert (run.workdir / "tmp" / "codex-home" / "config.toml").exists()


def check_apply_patch_outside(run: RecordedRun) -> None:
    assert "patch rejected: writing outside of the project" in run.meta["stderr_tail"]


EXTRA_CHECKS: dict[str, Callable[[RecordedRun], None]] = {
    "write_file": check_write_file,
    "edit_file": check_edit_file,
    "command_execution": check_command_execution,
    "resume": check_resume,
    "sandbox_unavailable": check_sandbox_unavailable,
    "apply_patch_outside": check_apply_patch_outside,
}


def test_every_extra_check_names_a_scenario() -> None:
    assert set(EXTRA_CHECKS) <= set(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_codex_scenario(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    expect = scenario.expect
    run = run_scenario(AGENT, name, tmp_path / "run")

    assert all(": lo:" in link for link in run.meta["netns_links"])
    check_steps(scenario, run)
    assert run.exit_code == expect.exit_code

    check_files(scenario, run, ("outside", "home", "tmp"))

    lines = run.lines()
    assert lines[0]["type"] == "thread.started"
    assert lines[-1]["type"] == ("turn.completed" if expect.exit_code == 0 else "turn.failed")
    final = final_message(run)
    for fragment in expect.final_text_contains:
        assert fragment in final

    items = tool_items(run)
    assert [i["type"] for i in items] == list(expect.tools)
    assert [i["type"] for i in items if i["status"] != "completed"] == list(expect.failed_tools)

    calls = executed_calls(run)
    assert [c.name for c in calls] == completed_model_calls(scenario)
    for denied in expect.denied_tools:
        assert any(c.name == denied and "rejected" in c.output for c in calls), denied

    check = EXTRA_CHECKS.get(name)
    if check is not None:
        check(run)

    check_decoded(AGENT, run)
