"""Claude Code scenarios: what each recording of ``claude -p`` is meant to show.

Claude's file tools take absolute paths, so tool inputs use the ``<repo>`` / ``<outside>``
placeholders. Failure scenarios set ``CLAUDE_CODE_MAX_RETRIES=1`` (the default of 10 means about
90 s of backoff) and script enough failing replies for every attempt the CLI makes.
"""

from __future__ import annotations

from supervisor.events import FailureKind, OutcomeStatus
from supervisor.lab.scenarios import Expect, Scenario, Step
from supervisor.lab.script import Reply, Text, Thinking, ToolCall
from supervisor.registry import Mode

__all__ = ["SCENARIOS"]

SEED: dict[str, str] = {
    "README.md": "# greeter\n\nA tiny module that greets.\n",
    "src/app.py": "def greet(name: str) -> str:\n    return 'hello ' + name\n",
}

FAILURE_ENV: dict[str, str] = {"CLAUDE_CODE_MAX_RETRIES": "1"}

_APP = "<repo>/src/app.py"


def _scenario(
    name: str,
    description: str,
    steps: tuple[Step, ...],
    expect: Expect,
    *,
    mode: Mode = Mode.READ_ONLY,
    env: dict[str, str] | None = None,
) -> Scenario:
    return Scenario(
        name=name,
        description=description,
        steps=steps,
        expect=expect,
        mode=mode,
        seed_files=SEED,
        env=env or {},
    )


_ALL = (
    _scenario(
        "plain_text",
        "A thinking block, then one text answer; no tools.",
        (
            Step(
                "Say hello to the lab.",
                (
                    Reply(
                        (
                            Thinking("The user wants a short greeting. No tools are needed."),
                            Text("Hello from the lab."),
                        )
                    ),
                ),
            ),
        ),
        Expect(0, OutcomeStatus.COMPLETED, final_text_contains=("Hello from the lab.",)),
    ),
    _scenario(
        "read_file",
        "Read a file of the repo, then answer from it.",
        (
            Step(
                "What does greet() in src/app.py return?",
                (
                    Reply((Text("Let me look."), ToolCall("Read", {"file_path": _APP}))),
                    Reply((Text("greet() returns 'hello ' followed by the name."),)),
                ),
            ),
        ),
        Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=("Read",),
            final_text_contains=("returns 'hello '",),
        ),
    ),
    _scenario(
        "write_file",
        "Create a new file with Write (worktree-write mode).",
        (
            Step(
                "Create NOTES.md with a one-line summary of the project.",
                (
                    Reply(
                        (
                            ToolCall(
                                "Write",
                                {
                                    "file_path": "<repo>/NOTES.md",
                                    "content": "greeter: a tiny module that greets.\n",
                                },
                            ),
                        )
                    ),
                    Reply((Text("Created NOTES.md."),)),
                ),
            ),
        ),
        Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=("Write",),
            files={"NOTES.md": "add"},
            final_text_contains=("Created NOTES.md",),
        ),
        mode=Mode.WORKTREE_WRITE,
    ),
    _scenario(
        "edit_file",
        "Read then Edit an existing file, with thinking before the edit (worktree-write mode).",
        (
            Step(
                "Make greet() say 'hi' instead of 'hello'.",
                (
                    Reply((ToolCall("Read", {"file_path": _APP}),)),
                    Reply(
                        (
                            Thinking("The return statement holds the word; one edit suffices."),
                            ToolCall(
                                "Edit",
                                {
                                    "file_path": _APP,
                                    "old_string": "return 'hello ' + name",
                                    "new_string": "return 'hi ' + name",
                                },
                            ),
                        )
                    ),
                    Reply((Text("greet() now says 'hi'."),)),
                ),
            ),
        ),
        Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=("Read", "Edit"),
            files={"src/app.py": "update"},
            final_text_contains=("now says 'hi'",),
        ),
        mode=Mode.WORKTREE_WRITE,
    ),
    _scenario(
        "tool_error",
        "Two failing tool calls: Read of a missing file, then Edit without a prior Read of that "
        "file; both tool results are errors and nothing changes on disk.",
        (
            Step(
                "Rename greet() to welcome() in src/app.py.",
                (
                    Reply((ToolCall("Read", {"file_path": "<repo>/src/missing.py"}),)),
                    Reply(
                        (
                            ToolCall(
                                "Edit",
                                {
                                    "file_path": _APP,
                                    "old_string": "def greet(",
                                    "new_string": "def welcome(",
                                },
                            ),
                        )
                    ),
                    Reply((Text("Both tool calls failed; I changed nothing."),)),
                ),
            ),
        ),
        Expect(
            0,
            OutcomeStatus.COMPLETED,
            tools=("Read", "Edit"),
            failed_tools=("Read", "Edit"),
            final_text_contains=("changed nothing",),
        ),
        mode=Mode.WORKTREE_WRITE,
    ),
    _scenario(
        "write_outside_cwd",
        "Write to a path outside the repo: refused, listed in result.permission_denials, exit 0.",
        (
            Step(
                "Save a copy of the summary next to the repo.",
                (
                    Reply(
                        (
                            ToolCall(
                                "Write",
                                {
                                    "file_path": "<outside>/escape.txt",
                                    "content": "should never land\n",
                                },
                            ),
                        )
                    ),
                    Reply((Text("I could not write outside the project."),)),
                ),
            ),
        ),
        Expect(
            0,
            OutcomeStatus.DENIED,
            tools=("Write",),
            failed_tools=("Write",),
            denied_tools=("Write",),
            final_text_contains=("could not write",),
            absent_paths=("<outside>/escape.txt",),
        ),
        mode=Mode.WORKTREE_WRITE,
    ),
    _scenario(
        "resume",
        "Two invocations: the first starts a session with --session-id, the second resumes it "
        "with --resume and the model sees the first exchange.",
        (
            Step(
                "Remember the code word: pelican.",
                (Reply((Text("Noted: the code word is pelican."),)),),
                session="new",
                exit_code=0,
            ),
            Step(
                "What was the code word?",
                (Reply((Text("The code word was pelican."),)),),
                session="resume",
            ),
        ),
        Expect(0, OutcomeStatus.COMPLETED, final_text_contains=("pelican",)),
    ),
    _scenario(
        "http_500",
        "Every request answers HTTP 500: api_retry events, an assistant 'API Error: 500' "
        "message, then result success with is_error true, exit 1.",
        (Step("Say hello.", (Reply(http_status=500, repeat=10),)),),
        Expect(1, OutcomeStatus.FAILED, FailureKind.SERVER_ERROR),
        env=FAILURE_ENV,
    ),
    _scenario(
        "http_401",
        "Every request answers HTTP 401 (bad key): authentication failure, exit 1.",
        (Step("Say hello.", (Reply(http_status=401, repeat=10),)),),
        Expect(1, OutcomeStatus.FAILED, FailureKind.AUTH),
        env=FAILURE_ENV,
    ),
    _scenario(
        "cut_mid_tool_call",
        "The connection resets while a tool_use block's input streams (after a text block "
        "was shown); every attempt is cut the same way.",
        (
            Step(
                "What does src/app.py do?",
                tuple(
                    Reply(
                        (
                            Text("Let me read the file."),
                            ToolCall("Read", {"file_path": _APP}),
                        ),
                        cut_after_events=7,
                    )
                    for _ in range(4)
                ),
            ),
        ),
        Expect(1, OutcomeStatus.FAILED, FailureKind.STREAM_CUT),
        env=FAILURE_ENV,
    ),
    _scenario(
        "cut_before_block",
        "The stream is cut before any content block: the CLI silently retries without "
        "streaming (a non-stream request) and that answer completes the run.",
        (
            Step(
                "Say hello.",
                (
                    Reply((Text("never shown"),), cut_after_events=2),
                    Reply((Text("Hello after the fallback."),)),
                ),
            ),
        ),
        Expect(0, OutcomeStatus.COMPLETED, final_text_contains=("Hello after the fallback.",)),
        env=FAILURE_ENV,
    ),
    _scenario(
        "stream_error",
        "An in-stream overloaded_error event after a text block; every attempt gets it.",
        (
            Step(
                "Say hello.",
                tuple(Reply((Text("Hello"),), stream_error="overloaded_error") for _ in range(4)),
            ),
        ),
        Expect(1, OutcomeStatus.FAILED, FailureKind.OVERLOADED),
        env=FAILURE_ENV,
    ),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in _ALL}
