"""The user's policy layer in config.toml and the run's own rules on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.config import Config, disable, enable, load_config, render_config
from supervisor.errors import ConfigError
from supervisor.policy import Decision, Policy, RiskClass, Rule

ROOT = Path(__file__).resolve().parents[2]

WITH_RULES = """\
enabled = true

[[policy.rules]]
risk = "shell"
pattern = "git *"
decision = "allow"

[[policy.rules]]
risk = "write"
pattern = "docs/*"
decision = "deny"
hard = true
"""


def test_policy_rules_are_read_in_order(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(WITH_RULES)
    config = load_config(path)
    assert config.policy == Policy(
        rules=(
            Rule(risk=RiskClass.SHELL, pattern="git *", decision=Decision.ALLOW),
            Rule(risk=RiskClass.WRITE, pattern="docs/*", decision=Decision.DENY, hard=True),
        )
    )
    assert load_config(tmp_path / "missing.toml").policy == Policy()


def test_enable_and_disable_keep_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(WITH_RULES)
    before = load_config(path).policy
    disable(path)
    assert load_config(path).policy == before
    assert load_config(path).enabled is False
    enable(path)
    assert load_config(path) == Config(enabled=True, policy=before)


def test_render_round_trips_awkward_patterns(tmp_path: Path) -> None:
    rules = (
        Rule(risk="*", pattern='say "hi"\\there', decision=Decision.ASK),
        Rule(risk=RiskClass.SHELL, pattern="a\nb", decision=Decision.DENY),
    )
    config = Config(enabled=True, policy=Policy(rules=rules))
    path = tmp_path / "config.toml"
    path.write_text(render_config(config))
    assert load_config(path) == config


@pytest.mark.parametrize(
    ("text", "line", "fix"),
    [
        (
            'enabled = true\n[[policy.rules]]\nrisk = "disk"\npattern = "a"\ndecision = "allow"\n',
            2,
            "risk must be one of read, write",
        ),
        ('enabled = true\n[[policy.rules]]\nrisk = "read"\npattern = "a"\n', 2, "decision is "),
        ("policy = 3\n", 1, "policy must be a table"),
        ("[policy]\nrule = []\n", 1, "policy.rule is not a policy setting"),
        (
            '[[policy.rules]]\nrisk = "read"\npattern = "a"\ndecision = "allow"\nhard = true\n',
            1,
            "hard = true only applies to decision = deny",
        ),
    ],
)
def test_a_bad_policy_names_the_file_the_line_and_the_fix(
    tmp_path: Path, text: str, line: int, fix: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}, line {line}: ")
    assert fix in str(caught.value)
    assert path.read_text() == text  # nothing is lost


def _asup(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "supervisor.cli.main", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_rules_on_a_line_stream_agent_are_refused_not_ignored(tmp_path: Path) -> None:
    done = _asup(tmp_path, "run", "claude-cli", "--task", "x", "--allow", "shell:git *")
    assert done.returncode == 2
    assert "--allow set rules for the permission requests of ACP agents" in done.stderr
    assert "claude-cli asks none" in done.stderr


def test_a_malformed_rule_option_is_a_usage_error(tmp_path: Path) -> None:
    done = _asup(tmp_path, "run", "claude-acp", "--task", "x", "--deny", "git status")
    assert done.returncode == 2
    assert "--deny 'git status': write it as RISK:PATTERN" in done.stderr


def test_a_bad_config_policy_stops_the_run_with_its_sentence(tmp_path: Path) -> None:
    (tmp_path / "config" / "agent-supervisor").mkdir(parents=True)
    conf = tmp_path / "config" / "agent-supervisor" / "config.toml"
    conf.write_text('enabled = true\n[[policy.rules]]\nrisk = "disk"\npattern = "a"\n')
    done = _asup(tmp_path, "run", "claude-acp", "--task", "x")
    assert done.returncode == 1
    assert f"{conf}, line 2: [[policy.rules]] entry 1" in done.stderr
    assert "decision is missing; add it" in done.stderr


def test_max_idle_on_a_line_stream_agent_is_refused(tmp_path: Path) -> None:
    done = _asup(tmp_path, "run", "codex-cli", "--task", "x", "--max-idle", "30")
    assert done.returncode == 2
    assert "--max-idle bounds the silence of ACP agents; codex-cli is not one" in done.stderr


def test_max_idle_must_not_be_negative(tmp_path: Path) -> None:
    done = _asup(tmp_path, "run", "opencode-acp", "--task", "x", "--max-idle", "-1")
    assert done.returncode == 2
    assert "--max-idle must be 0 (off) or a number of seconds" in done.stderr
