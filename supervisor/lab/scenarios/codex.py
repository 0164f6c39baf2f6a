"""Codex (``codex exec --json``) lab scenarios.

Codex 0.171.0 offers the model these tools (among others): ``exec_command`` (a function whose
``cmd`` string runs through ``/bin/bash -lc``, or ``-c`` with ``"login": false``) for running
commands and for reading files, and ``apply_patch`` (a *freeform* custom tool whose input is the
raw patch text: ``*** Begin Patch`` … ``*** End Patch``) for writing and editing files. Paths in a
patch are relative to the cwd (the repo) or absolute. Write scenarios run ``-s workspace-write``
(``Mode.WORKTREE_WRITE``); the rest read-only.

The stream never names the model's tools: an ``exec_command`` call shows as a
``command_execution`` item, an ``apply_patch`` call as a ``file_change`` item. ``Expect.tools``
and ``failed_tools`` are therefore in the stream's vocabulary (what a correct decode yields);
:data:`MODEL_TOOLS` maps them back. Some calls leave no item at all (a command whose sandbox
could not start, a patch rejected for its path): they are absent from ``tools``. See
docs/lab-codex.md for what each recording shows.
"""

from __future__ import annotations

from supervisor.events import FailureKind, OutcomeStatus
from supervisor.lab.scenarios import Expect, Scenario, Step
from supervisor.lab.script import Reply, Text, Thinking, ToolCall
from supervisor.registry import Mode

__all__ = ["CUT_MID_TOOL_CALL_REPLY", "MODEL_TOOLS", "SCENARIOS"]

EXEC = "exec_command"
PATCH = "apply_patch"
# the stream's item type for each tool of the model
COMMAND = "command_execution"
FILE_CHANGE = "file_change"
MODEL_TOOLS = {COMMAND: EXEC, FILE_CHANGE: PATCH}

README = "# Demo project\n\nA tiny project the lab runs agents in.\n"
NOTES = "alpha\nbeta\ngamma\n"


def _run(cmd: str) -> ToolCall:
    return ToolCall(EXEC, {"cmd": cmd})


def _patch(body: str) -> ToolCall:
    return ToolCall(PATCH, f"*** Begin Patch\n{body}*** End Patch\n", kind="custom")


# Frames of this reply (see supervisor.lab.wire_openai): 0 created, 1 in_progress, 2-8 the
# message "Running the check." (added, part added, 2 deltas, text done, part done, item done),
# 9 function_call added, 10-12 argument deltas, 13 arguments done, 14 item done, 15 completed.
# Cutting after 11 frames ends the stream after the first argument delta.
CUT_MID_TOOL_CALL_REPLY = Reply(
    (Text("Running the check."), _run("ls -la && cat README.md")),
    cut_after_events=11,
)

_SCENARIOS = (
    Scenario(
        name="plain_text",
        description="One answer with a reasoning summary, no tools.",
        steps=(
            Step(
                "Say hello.",
                (Reply((Thinking("The user wants a greeting."), Text("Hello from the lab."))),),
            ),
        ),
        expect=Expect(0, OutcomeStatus.COMPLETED, final_text_contains=("Hello from the lab.",)),
    ),
    Scenario(
        name="read_file",
        description="Reads README.md by running cat through exec_command (read-only sandbox).",
        seed_files={"README.md": README},
        steps=(
            Step(
                "What does README.md say?",
                (
                    Reply((_run("cat README.md"),)),
                    Reply((Text("README.md describes a tiny demo project."),)),
                ),
            ),
        ),
        expect=Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=(COMMAND,),
            final_text_contains=("tiny demo project",),
        ),
    ),
    Scenario(
        name="write_file",
        description="apply_patch adds hello.txt in the workspace-write sandbox.",
        mode=Mode.WORKTREE_WRITE,
        steps=(
            Step(
                "Create hello.txt saying hello.",
                (
                    Reply((_patch("*** Add File: hello.txt\n+hello\n+from codex\n"),)),
                    Reply((Text("Created hello.txt."),)),
                ),
            ),
        ),
        expect=Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=(FILE_CHANGE,),
            files={"hello.txt": "add"},
            final_text_contains=("Created hello.txt.",),
        ),
    ),
    Scenario(
        name="edit_file",
        description="Reads notes.txt, then apply_patch updates one line of it (with reasoning).",
        mode=Mode.WORKTREE_WRITE,
        seed_files={"notes.txt": NOTES},
        steps=(
            Step(
                "In notes.txt, replace beta with BETA.",
                (
                    Reply((Thinking("Look at the file first."), _run("cat notes.txt"))),
                    Reply(
                        (
                            Thinking("Line two is beta; patch it."),
                            _patch("*** Update File: notes.txt\n@@\n alpha\n-beta\n+BETA\n"),
                        )
                    ),
                    Reply((Text("Replaced beta with BETA in notes.txt."),)),
                ),
            ),
        ),
        expect=Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=(COMMAND, FILE_CHANGE),
            files={"notes.txt": "update"},
            final_text_contains=("BETA",),
        ),
    ),
    Scenario(
        name="tool_error",
        description="A command exits non-zero (cat of a missing file); the model reports it.",
        steps=(
            Step(
                "Show missing.txt.",
                (
                    Reply((_run("cat missing.txt"),)),
                    Reply((Text("missing.txt does not exist."),)),
                ),
            ),
        ),
        expect=Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=(COMMAND,),
            failed_tools=(COMMAND,),
            final_text_contains=("does not exist",),
        ),
    ),
    Scenario(
        name="command_execution",
        description=(
            "In the workspace-write sandbox a command writes build.log in the repo; its attempt "
            "to write outside the repo is refused by the sandbox (read-only file system)."
        ),
        mode=Mode.WORKTREE_WRITE,
        seed_files={"README.md": README},
        steps=(
            Step(
                "Count the lines of README.md into build.log.",
                (
                    Reply(
                        (
                            Text("Counting."),
                            _run(
                                "wc -l README.md > build.log && cat build.log; "
                                "echo escaped > <outside>/escape.txt || echo outside refused"
                            ),
                        )
                    ),
                    Reply((Text("Wrote the line count to build.log."),)),
                ),
            ),
        ),
        expect=Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=(COMMAND,),
            files={"build.log": "add"},
            final_text_contains=("build.log",),
            absent_paths=("<outside>/escape.txt",),
        ),
    ),
    Scenario(
        name="resume",
        description=(
            "Two invocations on one thread: a new one, then `codex exec resume <thread_id>`; "
            "turn.completed usage of the second covers both (cumulative per thread)."
        ),
        steps=(
            Step(
                "Remember the word kumquat.",
                (Reply((Thinking("A word to remember."), Text("I will remember kumquat."))),),
                session="new",
                exit_code=0,
            ),
            Step(
                "Which word did I ask you to remember?",
                (Reply((Text("You asked me to remember kumquat."),)),),
                session="resume",
            ),
        ),
        expect=Expect(0, OutcomeStatus.COMPLETED, final_text_contains=("kumquat",)),
    ),
    Scenario(
        name="http_500",
        description="The model endpoint answers HTTP 500 (no retries configured).",
        steps=(
            Step(
                "Say hello.",
                (Reply(http_status=500, repeat=3, error_message="lab: internal failure"),),
            ),
        ),
        expect=Expect(1, OutcomeStatus.FAILED, FailureKind.SERVER_ERROR),
    ),
    Scenario(
        name="http_401",
        description="The model endpoint answers HTTP 401 (bad key).",
        steps=(
            Step(
                "Say hello.",
                (Reply(http_status=401, repeat=3, error_message="lab: invalid api key"),),
            ),
        ),
        expect=Expect(1, OutcomeStatus.FAILED, FailureKind.AUTH),
    ),
    Scenario(
        name="cut_mid_tool_call",
        description=(
            "The connection is reset while a function_call's arguments stream, after a finished "
            "message item."
        ),
        steps=(Step("Check the project.", (CUT_MID_TOOL_CALL_REPLY,)),),
        expect=Expect(1, OutcomeStatus.FAILED, FailureKind.STREAM_CUT),
    ),
    Scenario(
        name="stream_error",
        description="The stream ends with response.failed (code server_error) after a message.",
        steps=(
            Step(
                "Say hello.",
                (
                    Reply(
                        (Text("Starting."),),
                        stream_error="server_error",
                        error_message="lab: the model failed mid-response",
                    ),
                ),
            ),
        ),
        expect=Expect(1, OutcomeStatus.FAILED, FailureKind.SERVER_ERROR),
    ),
    Scenario(
        name="stream_overloaded",
        description=(
            "The stream ends with response.failed (code server_is_overloaded, the script's "
            "overloaded_error); codex replaces the server's message with its own."
        ),
        steps=(
            Step(
                "Say hello.",
                (
                    Reply(
                        (Text("Starting."),),
                        stream_error="overloaded_error",
                        error_message="lab: overloaded",
                    ),
                ),
            ),
        ),
        expect=Expect(1, OutcomeStatus.FAILED, FailureKind.OVERLOADED),
    ),
    Scenario(
        name="sandbox_unavailable",
        description=(
            "CODEX_HOME under $TMPDIR: codex refuses to create its helper binaries (a WARNING "
            "on stderr); the sandboxed command fails without any stream item, the patch's "
            "file_change item fails, and the run still exits 0."
        ),
        mode=Mode.WORKTREE_WRITE,
        env={"CODEX_HOME": "<tmp>/codex-home"},
        steps=(
            Step(
                "Create made.txt and p.txt.",
                (
                    Reply((_run("echo made > made.txt"),)),
                    Reply((_patch("*** Add File: p.txt\n+patched\n"),)),
                    Reply((Text("Done."),)),
                ),
            ),
        ),
        expect=Expect(
            0,
            OutcomeStatus.FAILED,
            FailureKind.SANDBOX_UNAVAILABLE,
            tools=(FILE_CHANGE,),
            failed_tools=(FILE_CHANGE,),
            absent_paths=("<repo>/made.txt", "<repo>/p.txt"),
        ),
    ),
    Scenario(
        name="apply_patch_outside",
        description=(
            "apply_patch targets a file outside the project: rejected, only an ERROR line on "
            "stderr and no item in the stream, exit 0."
        ),
        mode=Mode.WORKTREE_WRITE,
        steps=(
            Step(
                "Write escape.txt next to the project.",
                (
                    Reply((_patch("*** Add File: <outside>/escape.txt\n+escaped\n"),)),
                    Reply((Text("I could not write outside the project."),)),
                ),
            ),
        ),
        expect=Expect(
            0,
            OutcomeStatus.DENIED,
            denied_tools=(PATCH,),
            absent_paths=("<outside>/escape.txt",),
        ),
    ),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in _SCENARIOS}
