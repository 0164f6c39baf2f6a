"""The prompt a child agent receives. Pure: strings in, a string out; no disk, no git, no clock.

:func:`compose_prompt` lays out, in this order::

    <directive>                           the caller's instructions, verbatim

    ## Your working copy                  only when a DirtyDiff is given
    <what the worktree is, that the user's uncommitted changes are not in it>

    ## Task
    <task>                                verbatim

    ## Uncommitted changes in the user's repository     only when the diff is not empty
    ```diff
    <the unified diff against the base commit, possibly cut>
    ```
    <the cut notice, only when the diff was cut>

The prompt has a budget in UTF-8 bytes. The directive, the working-copy note and the task are
never shortened; only the diff is. It is cut after the last whole line that fits, so the cut
never splits a line (nor, since a newline is one byte, a UTF-8 sequence), and the notice below
the diff says how many bytes and files were left out. When even the directive and the task with
the shortest diff section do not fit, :func:`compose_prompt` raises :class:`PromptTooLarge`.

:class:`DirtyDiff` is the value :func:`supervisor.worktree.dirty_diff` reads from the user's
repository; it is defined here so this module needs nothing that does I/O.

The diff goes to the vendor's model API, so it is secret-redacted first
(:func:`redact_dirty`, the same scanner as a review's patch): every added line of every text
file's patch — the user's uncommitted work, untracked files included — with each finding
replaced by ``[REDACTED:<rule>]``. Context and removed lines are left as they are: they are the
base commit's, which the agent reads in its worktree anyway.

Errors (the tree is in :mod:`supervisor.errors`)::

    SupervisorError
    └── Refusal
        └── PromptTooLarge    the directive and the task alone exceed the prompt budget
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum

from supervisor.errors import Refusal
from supervisor.redact import Finding, redact_patch

__all__ = [
    "ChangeKind",
    "ComposedPrompt",
    "DirtyDiff",
    "FileDiff",
    "PromptTooLarge",
    "compose_prompt",
    "redact_dirty",
]


class PromptTooLarge(Refusal):
    code = "prompt_too_large"


class ChangeKind(StrEnum):
    """How a path differs from the base commit in the user's repository."""

    ADDED = "added"  # new and staged
    UNTRACKED = "untracked"  # new, not staged, not ignored
    MODIFIED = "modified"
    DELETED = "deleted"
    RENAMED = "renamed"
    TYPE_CHANGED = "type_changed"  # e.g. a file became a symlink


@dataclass(frozen=True, slots=True)
class FileDiff:
    """One path's part of the diff. ``patch`` is its unified diff text (``diff --git`` header
    included); a binary file's patch only says that it differs."""

    path: str
    kind: ChangeKind
    binary: bool
    patch: str


@dataclass(frozen=True, slots=True)
class DirtyDiff:
    """The user's uncommitted work (staged, unstaged, untracked) against ``base_commit``."""

    base_commit: str
    files: tuple[FileDiff, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    @property
    def text(self) -> str:
        """The whole diff as one text, every file's patch ending in a newline."""
        return "".join(_terminated(f.patch) for f in self.files)

    @property
    def is_clean(self) -> bool:
        return not self.files


def redact_dirty(dirty: DirtyDiff) -> tuple[DirtyDiff, tuple[tuple[str, Finding], ...]]:
    """``dirty`` with the secrets on the added lines of each text file's patch redacted, and
    what was found, per path. A binary file's patch (only that it differs) is kept as is."""
    files: list[FileDiff] = []
    found: list[tuple[str, Finding]] = []
    for f in dirty.files:
        if f.binary:
            files.append(f)
            continue
        redaction = redact_patch(f.patch)
        files.append(replace(f, patch=redaction.patch) if redaction.flagged else f)
        found.extend((f.path, finding) for finding in redaction.findings)
    return DirtyDiff(dirty.base_commit, tuple(files)), tuple(found)


@dataclass(frozen=True, slots=True)
class ComposedPrompt:
    text: str
    bytes: int  # len(text.encode("utf-8")), never more than the budget
    diff_cut: bool
    omitted_bytes: int = 0  # bytes of the diff left out
    omitted_files: int = 0  # files whose patch is missing or incomplete


def compose_prompt(
    *, directive: str, task: str, dirty: DirtyDiff | None, budget_bytes: int
) -> ComposedPrompt:
    """The prompt for one run, at most ``budget_bytes`` UTF-8 bytes long.

    ``dirty`` None leaves out the working-copy note (the caller has no worktree to describe).
    Raises :class:`PromptTooLarge` when the directive, the note and the task do not fit with
    room for the notice that the diff was left out.
    """
    if budget_bytes < 1:
        raise ValueError(f"budget_bytes must be positive, got {budget_bytes}")
    parts = [directive]
    if dirty is not None:
        parts.append(_working_copy_note(dirty))
    parts.append(f"## Task\n{task}")
    fixed = "\n\n".join(parts)
    fixed_size = _size(fixed)

    if dirty is None or dirty.is_clean:
        if fixed_size > budget_bytes:
            raise _too_large(fixed_size, fixed_size, budget_bytes)
        return ComposedPrompt(text=fixed, bytes=fixed_size, diff_cut=False)

    diff = dirty.text.encode("utf-8")
    fence = "`" * max(3, _longest_backtick_run(dirty.text) + 1)
    opening = f"\n\n## Uncommitted changes in the user's repository\n{fence}diff\n"
    closing = f"{fence}\n"
    full = fixed + opening + dirty.text + closing
    if _size(full) <= budget_bytes:
        return ComposedPrompt(text=full, bytes=_size(full), diff_cut=False)

    total_files = len(dirty.files)
    # The notice with its largest possible numbers bounds the room the diff may take.
    frame = _size(fixed + opening + closing + _cut_notice(len(diff), len(diff), total_files))
    if frame > budget_bytes:
        raise _too_large(fixed_size, frame, budget_bytes)
    kept = diff[: budget_bytes - frame]
    kept = kept[: kept.rfind(b"\n") + 1]
    omitted_files = total_files - _whole_files(dirty.files, len(kept))
    omitted_bytes = len(diff) - len(kept)
    text = (
        fixed
        + opening
        + kept.decode("utf-8")
        + closing
        + _cut_notice(omitted_bytes, len(diff), omitted_files)
    )
    return ComposedPrompt(
        text=text,
        bytes=_size(text),
        diff_cut=True,
        omitted_bytes=omitted_bytes,
        omitted_files=omitted_files,
    )


def _working_copy_note(dirty: DirtyDiff) -> str:
    where = (
        "## Your working copy\n"
        "You work in a disposable git worktree: a clean checkout of commit "
        f"{dirty.base_commit} (detached HEAD), kept outside the user's repository."
    )
    if dirty.is_clean:
        return f"{where} The user's repository had no uncommitted changes when it was made."
    return (
        f"{where} It does NOT contain the user's uncommitted changes: they are shown below as"
        " one unified diff against that commit (untracked files appear as new files; binary"
        " files are named, not shown). Take them into account, and apply them yourself where"
        " the task needs them."
    )


def _cut_notice(omitted_bytes: int, total_bytes: int, omitted_files: int) -> str:
    return (
        f"(The diff was cut to fit the prompt: the last {omitted_bytes} of its {total_bytes}"
        f" bytes are left out, and {omitted_files} file(s) are missing or incomplete.)"
    )


def _too_large(fixed_size: int, needed: int, budget: int) -> PromptTooLarge:
    return PromptTooLarge(
        f"the directive, the task and the note on the worktree take {fixed_size} bytes and the"
        f" prompt needs at least {needed}, more than its budget of {budget} bytes; shorten the"
        " task or raise the prompt budget"
    )


def _whole_files(files: tuple[FileDiff, ...], kept_bytes: int) -> int:
    end = 0
    whole = 0
    for f in files:
        end += _size(_terminated(f.patch))
        if end > kept_bytes:
            break
        whole += 1
    return whole


def _longest_backtick_run(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)


def _terminated(patch: str) -> str:
    return patch if patch.endswith("\n") or not patch else patch + "\n"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))
