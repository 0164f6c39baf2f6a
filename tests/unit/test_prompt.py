"""compose_prompt: the byte budget cuts the diff, never the directive or the task."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.errors import Refusal
from supervisor.prompt import (
    ChangeKind,
    ComposedPrompt,
    DirtyDiff,
    FileDiff,
    PromptTooLarge,
    compose_prompt,
    redact_dirty,
)

BASE = "0123456789abcdef0123456789abcdef01234567"
DIRECTIVE = "You are a careful engineer. Change only what the task asks."
TASK = "Rename `foo` to `bar` in src/app.py."


def patch(path: str, *added: str) -> FileDiff:
    body = "".join(f"+{line}\n" for line in added)
    text = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(added)} @@\n{body}"
    )
    return FileDiff(path=path, kind=ChangeKind.UNTRACKED, binary=False, patch=text)


def dirty(*files: FileDiff) -> DirtyDiff:
    return DirtyDiff(base_commit=BASE, files=files)


def size(text: str) -> int:
    return len(text.encode("utf-8"))


def compose(d: DirtyDiff | None, budget: int, task: str = TASK) -> ComposedPrompt:
    return compose_prompt(directive=DIRECTIVE, task=task, dirty=d, budget_bytes=budget)


def fenced_diff(prompt: str) -> str:
    found = re.search(r"\n(`{3,})diff\n(.*?)^\1$", prompt, flags=re.S | re.M)
    assert found is not None
    return found.group(2)


TWO_FILES = dirty(
    patch("a.txt", "alpha", "beta"),
    patch("b/ü.txt", *[f"ünïcödé ωμέγα {i}" for i in range(20)]),
)


def fixed_size(d: DirtyDiff) -> int:
    """The bytes of directive, working-copy note and task: what is never cut."""
    text = compose(d, 10**6).text
    return size(text[: text.index("\n\n## Uncommitted changes")])


def test_without_a_worktree_the_prompt_is_directive_and_task() -> None:
    got = compose(None, 10_000)
    assert got.text == f"{DIRECTIVE}\n\n## Task\n{TASK}"
    assert got.bytes == size(got.text)
    assert not got.diff_cut


def test_clean_worktree_is_described_without_a_diff_section() -> None:
    got = compose(dirty(), 10_000)
    assert f"a clean checkout of commit {BASE}" in got.text
    assert "had no uncommitted changes" in got.text
    assert "```" not in got.text
    assert got.text.endswith(f"## Task\n{TASK}")


def test_diff_that_fits_is_shown_whole_after_the_task() -> None:
    got = compose(TWO_FILES, 10_000)
    assert not got.diff_cut
    assert (got.omitted_bytes, got.omitted_files) == (0, 0)
    assert got.bytes == size(got.text) <= 10_000
    assert fenced_diff(got.text) == TWO_FILES.text
    note, task, diff = (got.text.index(s) for s in ("does NOT contain", "## Task", "```diff"))
    assert note < task < diff
    assert "cut to fit" not in got.text


def test_overflow_cuts_the_diff_on_a_line_boundary_and_says_so() -> None:
    full = compose(TWO_FILES, 10_000)
    budget = full.bytes - 20
    got = compose(TWO_FILES, budget)
    assert got.diff_cut
    assert got.bytes == size(got.text) <= budget
    kept = fenced_diff(got.text)
    assert TWO_FILES.text.startswith(kept)
    assert kept.endswith("\n")
    assert got.omitted_bytes == size(TWO_FILES.text) - size(kept)
    assert got.omitted_files == 1  # the second file lost its last lines
    assert (
        f"the last {got.omitted_bytes} of its {size(TWO_FILES.text)} bytes are left out,"
        " and 1 file(s) are missing or incomplete" in got.text
    )
    assert got.text.index(TASK) < got.text.index("```diff")


def test_tiny_room_keeps_no_diff_lines_but_the_whole_task() -> None:
    bare = compose(TWO_FILES, 10_000)
    frame = bare.bytes - size(TWO_FILES.text)
    notice = "(The diff was cut to fit the prompt: the last 999 of its 999 bytes are left out,"
    got = compose(TWO_FILES, frame + len(notice) + 60)
    assert got.diff_cut
    assert fenced_diff(got.text) == ""
    assert got.omitted_files == 2
    assert got.omitted_bytes == size(TWO_FILES.text)
    assert TASK in got.text


def test_a_line_is_never_split_inside_a_utf8_sequence() -> None:
    wide = dirty(patch("w.txt", *["ü" * 40 for _ in range(20)]))
    full = compose(wide, 100_000).bytes
    for budget in range(full - 400, full):
        got = compose(wide, budget)
        assert got.bytes <= budget
        kept = fenced_diff(got.text)
        assert wide.text.startswith(kept)
        assert all(
            line == "" or line.startswith(("diff", "new", "---", "+++", "@@", "+"))
            for line in kept.split("\n")
        )


def test_fence_is_longer_than_any_backtick_run_in_the_diff() -> None:
    with_fences = dirty(patch("README.md", "```python", "x = 1", "````"))
    got = compose(with_fences, 10_000)
    assert "\n`````diff\n" in got.text
    assert fenced_diff(got.text) == with_fences.text


def test_patch_without_a_final_newline_is_terminated() -> None:
    unterminated = FileDiff(path="x", kind=ChangeKind.MODIFIED, binary=False, patch="+x")
    followed = dirty(unterminated, patch("y", "y"))
    assert followed.text.startswith("+x\ndiff --git a/y")


@pytest.mark.parametrize("extra", [0, 1, 50])
def test_directive_and_task_over_the_budget_are_refused(extra: int) -> None:
    task = "t" * 500
    whole = compose(None, 10_000, task=task).bytes
    with pytest.raises(PromptTooLarge, match="shorten the task or raise the prompt budget") as err:
        compose(None, whole - 1 - extra, task=task)
    assert isinstance(err.value, Refusal)
    assert err.value.code == "prompt_too_large"
    assert compose(None, whole, task=task).text.endswith(task)


def test_no_room_for_the_cut_notice_is_refused_not_cut_into_the_task() -> None:
    fixed = fixed_size(TWO_FILES)
    with pytest.raises(PromptTooLarge, match=f"take {fixed} bytes"):
        compose(TWO_FILES, fixed + 40)


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        compose(None, 0)


def test_dirty_diff_lists_its_paths_and_joins_its_patches() -> None:
    assert TWO_FILES.paths == ("a.txt", "b/ü.txt")
    assert TWO_FILES.text == TWO_FILES.files[0].patch + TWO_FILES.files[1].patch
    assert not TWO_FILES.is_clean
    assert dirty().is_clean


# --- properties ---------------------------------------------------------------------------------

lines = st.lists(
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=30), max_size=8
)
files = st.lists(
    st.builds(lambda path, added: patch(path, *added), st.text(min_size=1, max_size=10), lines),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(
    directive=st.text(max_size=200),
    task=st.text(max_size=200),
    patches=st.one_of(st.none(), files),
    budget=st.integers(min_value=1, max_value=3000),
)
def test_never_over_budget_and_the_task_is_always_whole(
    directive: str, task: str, patches: list[FileDiff] | None, budget: int
) -> None:
    d = None if patches is None else DirtyDiff(base_commit=BASE, files=tuple(patches))
    try:
        got = compose_prompt(directive=directive, task=task, dirty=d, budget_bytes=budget)
    except PromptTooLarge:
        # Refused only when not even the prompt without any diff line fits.
        roomy = compose_prompt(directive=directive, task=task, dirty=d, budget_bytes=10**9)
        assert roomy.bytes > budget
        return
    assert got.bytes == size(got.text) <= budget
    assert got.text.startswith(directive)
    assert f"## Task\n{task}" in got.text
    if d is None or d.is_clean:
        assert not got.diff_cut
        return
    kept = fenced_diff(got.text)
    assert d.text.startswith(kept)
    assert kept == "" or kept.endswith("\n")
    assert got.diff_cut == (kept != d.text)
    assert got.omitted_bytes == size(d.text) - size(kept)
    assert ("cut to fit" in got.text) == got.diff_cut


# -- the diff's secrets never reach the model ------------------------------------------------

FAKE_KEY = "ghp_" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"  # shaped like a GitHub token, not one


def test_redact_dirty_redacts_added_lines_and_names_each_finding() -> None:
    secret = FileDiff(
        path="config/.env",
        kind=ChangeKind.UNTRACKED,
        binary=False,
        patch=(
            "diff --git a/config/.env b/config/.env\nnew file mode 100644\n--- /dev/null\n"
            f"+++ b/config/.env\n@@ -0,0 +1,2 @@\n+GITHUB_TOKEN={FAKE_KEY}\n+DEBUG=1\n"
        ),
    )
    plain = patch("src/app.py", "print('hello')")
    binary = FileDiff(path="logo.png", kind=ChangeKind.ADDED, binary=True, patch="Binary differs\n")
    redacted, found = redact_dirty(dirty(secret, plain, binary))
    assert FAKE_KEY not in redacted.text
    assert "+GITHUB_TOKEN=[REDACTED:" in redacted.text
    assert "+DEBUG=1\n" in redacted.text
    assert redacted.files[1] == plain
    assert redacted.files[2] == binary
    assert redacted.base_commit == BASE
    assert [path for path, _ in found] == ["config/.env"]
    prompt = compose_prompt(directive="d", task="t", dirty=redacted, budget_bytes=10_000)
    assert FAKE_KEY not in prompt.text


def test_redact_dirty_leaves_a_clean_diff_as_it_is() -> None:
    clean = dirty(patch("a.py", "x = 1"))
    redacted, found = redact_dirty(clean)
    assert redacted == clean
    assert found == ()
