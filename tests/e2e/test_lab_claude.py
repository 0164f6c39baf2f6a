"""The real claude binary against the fake model server, one test per claude lab scenario.

Each scenario runs in its own network namespace (only loopback) through the recorder's
:func:`~supervisor.lab.recorder.run_scenario`. Checked without any codec: exit codes, what landed
on disk (git status of the scratch repo, file contents, paths that must stay absent, an empty
``outside/``), the final ``result`` line, and which tool calls claude executed and answered back
to the model (from the fake server's request log). Then the live stdout goes through the codec
and the shared scenario check (:func:`~supervisor.lab.expect.scenario_mismatches`), as the replay
suite does for recordings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import check_decoded, check_files, check_steps

from supervisor.lab.agents.claude import ClaudeLab
from supervisor.lab.recorder import RecordedRun, run_scenario
from supervisor.lab.scenarios import scenarios_for

AGENT = "claude-cli"
LAB = ClaudeLab()
SCENARIOS = scenarios_for(AGENT)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not LAB.installed(), reason=f"claude is not installed at {LAB.binary()} (run make vendor)"
    ),
]


@dataclass(frozen=True, slots=True)
class Executed:
    """A tool call the model made and whose result claude sent back."""

    name: str
    is_error: bool
    content: str


def main_requests(run: RecordedRun) -> list[dict[str, Any]]:
    return [r for step in run.step_requests for r in step if r["lane"] == "main"]


def executed_calls(run: RecordedRun) -> list[Executed]:
    """tool_use blocks in the conversation history of the requests, paired with their results."""
    uses: dict[str, str] = {}
    results: dict[str, tuple[bool, str]] = {}
    for req in main_requests(run):
        for message in req["body"].get("messages", []):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_use":
                    uses.setdefault(block["id"], block["name"])
                elif block.get("type") == "tool_result":
                    results[block["tool_use_id"]] = (
                        bool(block.get("is_error")),
                        json.dumps(block.get("content")),
                    )
    return [Executed(name, *results[cid]) for cid, name in uses.items() if cid in results]


def result_line(stdout: bytes) -> dict[str, Any]:
    results = [json.loads(line) for line in stdout.splitlines() if b'"type":"result"' in line]
    assert len(results) == 1, f"expected one result line, got {len(results)}"
    result: dict[str, Any] = results[0]
    return result


def check_write_file(run: RecordedRun) -> None:
    assert (run.repo / "NOTES.md").read_text() == "greeter: a tiny module that greets.\n"


def check_edit_file(run: RecordedRun) -> None:
    assert (run.repo / "src/app.py").read_text() == (
        "def greet(name: str) -> str:\n    return 'hi ' + name\n"
    )
    assert any(b'"type":"thinking"' in line for line in run.stdout.splitlines()), (
        "the thinking block was not shown"
    )


def check_tool_error(run: RecordedRun) -> None:
    calls = executed_calls(run)
    assert "File does not exist" in calls[0].content
    assert "File has not been read yet" in calls[1].content


def check_write_outside_cwd(run: RecordedRun) -> None:
    (denial,) = result_line(run.stdout)["permission_denials"]
    assert denial["tool_input"]["file_path"] == str(run.workdir / "outside" / "escape.txt")


def check_resume(run: RecordedRun) -> None:
    first, second = (result_line(s)["session_id"] for s in run.step_stdouts)
    assert first == second
    assert run.meta["steps"][0]["argv"][-2] == "--session-id"
    assert run.meta["steps"][1]["argv"][-2:] == ["--resume", first]
    # the resumed request carries the first exchange
    resumed = next(r for r in run.step_requests[1] if r["lane"] == "main")
    history = json.dumps(resumed["body"]["messages"])
    assert "Remember the code word: pelican." in history
    assert "Noted: the code word is pelican." in history


def check_http_500(run: RecordedRun) -> None:
    result = result_line(run.stdout)
    assert (result["subtype"], result["is_error"], result["api_error_status"]) == (
        "success",
        True,
        500,
    )
    assert [r["status"] for r in main_requests(run)] == [500, 500]  # one try, one retry


def check_http_401(run: RecordedRun) -> None:
    assert result_line(run.stdout)["api_error_status"] == 401
    assert {r["status"] for r in main_requests(run)} == {401}


def check_cut_mid_tool_call(run: RecordedRun) -> None:
    assert "Connection closed mid-response" in result_line(run.stdout)["result"]
    assert [r["stream"] for r in main_requests(run)] == [True]


def check_cut_before_block(run: RecordedRun) -> None:
    # the cut stream is silently retried once without streaming
    assert [r["stream"] for r in main_requests(run)] == [True, False]
    assert b"api_retry" not in run.stdout


def check_stream_error(run: RecordedRun) -> None:
    result = result_line(run.stdout)
    assert result["is_error"] is True
    assert result["result"] == "API Error: Overloaded"


EXTRA_CHECKS: dict[str, Callable[[RecordedRun], None]] = {
    "write_file": check_write_file,
    "edit_file": check_edit_file,
    "tool_error": check_tool_error,
    "write_outside_cwd": check_write_outside_cwd,
    "resume": check_resume,
    "http_500": check_http_500,
    "http_401": check_http_401,
    "cut_mid_tool_call": check_cut_mid_tool_call,
    "cut_before_block": check_cut_before_block,
    "stream_error": check_stream_error,
}


def test_every_extra_check_names_a_scenario() -> None:
    assert set(EXTRA_CHECKS) <= set(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_claude_scenario(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    expect = scenario.expect
    run = run_scenario(AGENT, name, tmp_path / "run")

    assert len(run.meta["netns_links"]) == 1
    assert ": lo:" in run.meta["netns_links"][0]
    assert run.meta["vendor_version"] == "2.1.197"
    check_steps(scenario, run)
    assert run.exit_code == expect.exit_code, run.meta["stderr_tail"]

    check_files(scenario, run)
    assert list((run.workdir / "outside").iterdir()) == []

    result = result_line(run.stdout)
    assert result["is_error"] is (expect.exit_code != 0)
    for fragment in expect.final_text_contains:
        assert fragment in result["result"]
    assert [d["tool_name"] for d in result["permission_denials"]] == list(expect.denied_tools)

    calls = executed_calls(run)
    assert [c.name for c in calls] == list(expect.tools)
    assert [c.name for c in calls if c.is_error] == list(expect.failed_tools)

    check = EXTRA_CHECKS.get(name)
    if check is not None:
        check(run)

    check_decoded(AGENT, run)
