"""Launch recipes: argv, the agent's own env and HOME files, refusals."""

from __future__ import annotations

import tomllib

import pytest

from supervisor.dispatch import shell_form
from supervisor.errors import Refusal
from supervisor.launch import endpoint_host, plan_launch
from supervisor.registry import AGENTS, Mode

CLAUDE = AGENTS["claude-cli"]
CODEX = AGENTS["codex-cli"]


def test_claude_read_only_plan() -> None:
    plan = plan_launch(CLAUDE, prompt="do it", mode=Mode.READ_ONLY, home="/h")
    assert plan.argv[:3] == ["claude", "-p", "do it"]
    assert plan.argv[plan.argv.index("--tools") + 1] == "Read,Grep,Glob"
    assert plan.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert "ANTHROPIC_BASE_URL" not in plan.env
    assert plan.home_files == {}


def test_claude_endpoint_and_turn_budget() -> None:
    plan = plan_launch(
        CLAUDE,
        prompt="p",
        mode=Mode.READ_ONLY,
        home="/h",
        endpoint="http://127.0.0.1:8080/",
        max_turns=3,
    )
    assert plan.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080"
    assert plan.argv[plan.argv.index("--max-turns") + 1] == "3"


def test_codex_plan_writes_its_config_under_the_per_run_home() -> None:
    plan = plan_launch(
        CODEX, prompt="p", mode=Mode.READ_ONLY, home="/run/h", endpoint="https://gw.example"
    )
    assert plan.env == {"CODEX_HOME": "/run/h/.codex"}
    config = tomllib.loads(plan.home_files[".codex/config.toml"])
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "https://gw.example/v1"
    assert provider["env_key"] == "OPENAI_API_KEY"
    assert config["features"]["plugins"] is False
    assert config["analytics"]["enabled"] is False
    # asup's sandbox contains codex; its own sandbox cannot nest inside
    assert plan.argv[plan.argv.index("-s") + 1] == "danger-full-access"
    assert plan.argv[-1] == "p"


def test_codex_default_endpoint_is_the_vendors() -> None:
    plan = plan_launch(CODEX, prompt="p", mode=Mode.READ_ONLY, home="/h")
    config = tomllib.loads(plan.home_files[".codex/config.toml"])
    assert config["model_providers"]["asup"]["base_url"] == "https://api.openai.com/v1"


@pytest.mark.parametrize(
    ("agent", "kwargs", "code"),
    [
        (
            CLAUDE.model_copy(update={"modes": (Mode.READ_ONLY,)}),
            {"mode": Mode.WORKTREE_WRITE},
            "mode_not_implemented",
        ),
        (CODEX, {"max_turns": 2}, "max_turns_unsupported"),
        (CLAUDE, {"endpoint": "ftp://x"}, "bad_endpoint"),
        (CLAUDE, {"endpoint": "http://"}, "bad_endpoint"),
    ],
)
def test_refusals(agent: object, kwargs: dict[str, object], code: str) -> None:
    args: dict[str, object] = {"prompt": "p", "mode": Mode.READ_ONLY, "home": "/h", **kwargs}
    with pytest.raises(Refusal) as info:
        plan_launch(agent, **args)  # type: ignore[arg-type]
    assert info.value.code == code
    assert str(info.value)


def test_claude_write_plan_has_the_edit_tools_and_accept_edits() -> None:
    plan = plan_launch(CLAUDE, prompt="p", mode=Mode.WORKTREE_WRITE, home="/h")
    assert plan.argv[plan.argv.index("--tools") + 1] == "Read,Grep,Glob,Edit,Write"
    assert plan.argv[plan.argv.index("--permission-mode") + 1] == "acceptEdits"
    assert "Bash" not in " ".join(plan.argv)


def test_endpoint_host_defaults_ports() -> None:
    assert endpoint_host("https://gw.example") == ("gw.example", 443)
    assert endpoint_host("http://127.0.0.1:9/") == ("127.0.0.1", 9)


def test_shell_form_names_the_key_never_its_value() -> None:
    env = {"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "sk-secret", "NOTE": "a b"}
    shell = shell_form(["bwrap", "--", "claude", "-p", "it's"], env, "ANTHROPIC_API_KEY")
    assert "sk-secret" not in shell
    assert 'ANTHROPIC_API_KEY="$ANTHROPIC_API_KEY"' in shell
    assert shell.startswith("env -i ")
    assert "NOTE='a b'" in shell
    assert shell.endswith("""claude -p 'it'"'"'s'""")
