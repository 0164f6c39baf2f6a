"""Codec for OpenAI Codex's headless stream (``codex exec --json``)."""

from __future__ import annotations

from supervisor.registry import Mode

WRITE_FLAGS = (
    "-s",
    "workspace-write",
    "-c",
    "sandbox_workspace_write.exclude_slash_tmp=true",
    "-c",
    "sandbox_workspace_write.exclude_tmpdir_env_var=true",
    "-c",
    "sandbox_workspace_write.network_access=false",
)


def build_argv(
    prompt: str,
    *,
    mode: Mode = Mode.READ_ONLY,
    model: str | None = None,
    resume: str | None = None,
    config: tuple[str, ...] = (),
    binary: str = "codex",
) -> list[str]:
    """``codex exec --json`` (or ``codex exec resume <thread> …``). ``config`` items become
    ``-c key=value`` overrides; ``--strict-config`` makes an unknown key an error instead of a
    warning. stdin must be /dev/null (an open pipe makes codex wait for EOF)."""
    argv = [binary, "exec"]
    if resume is not None:
        argv += ["resume", resume]
    argv += ["--json", "--strict-config", "--skip-git-repo-check"]
    if model is not None:
        argv += ["-m", model]
    match mode:
        case Mode.READ_ONLY:
            argv += ["-s", "read-only"]
        case Mode.WORKTREE_WRITE:
            argv += list(WRITE_FLAGS)
    for item in config:
        argv += ["-c", item]
    argv.append(prompt)
    return argv
