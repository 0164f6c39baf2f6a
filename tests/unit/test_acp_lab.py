"""The ACP recorder (supervisor/lab/acp_record.py) and its agent labs (supervisor/lab/acp_agents):
each agent is launched the way ``asup run`` launches it, the shared parts (binding, answers,
scrubbing, transcript shapes, the CLI) behave, and every scenario has its recording."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from supervisor.acp.recipes import acp_recipe
from supervisor.lab import acp_record, acp_record_gemini, acp_record_opencode
from supervisor.lab.acp_agents import ACP_LABS, AcpContext, get_acp_lab
from supervisor.lab.acp_agents.base import LAB_HOST_ENV
from supervisor.lab.script import Reply, Text, ToolCall
from supervisor.registry import AGENTS, get_agent

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "external"
LAB_IDS = sorted(ACP_LABS)


def test_every_acp_agent_has_a_lab_at_its_recorded_version() -> None:
    acp_agents = {a.id for a in AGENTS.values() if a.transport == "acp"}
    assert set(ACP_LABS) == acp_agents
    for agent_id in LAB_IDS:
        lab = get_acp_lab(agent_id)
        assert lab.agent_id == agent_id
        assert get_agent(agent_id).recorded_range.contains(lab.version)


@pytest.mark.parametrize("agent_id", LAB_IDS)
def test_the_lab_launches_the_agent_with_the_products_recipe(agent_id: str) -> None:
    lab = get_acp_lab(agent_id)
    spec = get_agent(agent_id)
    workdir = Path("/w")
    for scenario in lab.scenarios.values():
        ctx = AcpContext(scenario, workdir, "http://127.0.0.1:4242")
        launch = lab.launch(ctx, path="/usr/bin:/bin")
        recipe = acp_recipe(
            spec,
            mode=scenario.mode,
            home="/w/home",
            now_ms=0,
            endpoint="http://127.0.0.1:4242",
            model=lab.model,
        )
        assert launch.argv == [str(lab.binary), *recipe.argv[1:]]
        kept = {k: v for k, v in recipe.env.items() if k not in scenario.env}
        assert kept.items() <= launch.env.items()
        assert scenario.env.items() <= launch.env.items()
        # the same files, only the clock may differ (claude's blocklist timestamp)
        assert set(launch.home_files) == set(recipe.home_files)
        assert launch.env["HOME"] == "/w/home"
        assert launch.env["TMPDIR"] == "/w/tmp"
        assert launch.env["XDG_CONFIG_HOME"].startswith("/w/home/")
        assert launch.env[spec.signing_key] == lab.dummy_key
        assert launch.env["PATH"] == "/usr/bin:/bin"
        # nothing of the real host: only what the pretend host, the builder and recipe give
        allowed = {"PATH", "HOME", "TMPDIR", "ASUP_DEPTH", spec.signing_key}
        allowed |= set(LAB_HOST_ENV) | set(recipe.env) | set(scenario.env) | set(spec.tmpdir_env)
        allowed |= {n for n in launch.env if n.startswith("XDG_")}
        assert set(launch.env) <= allowed
        # the endpoint is the fake server, wherever the recipe puts it
        blob = json.dumps([launch.env, launch.home_files])
        assert "127.0.0.1:4242" in blob


def test_codex_acp_config_is_the_recipes_offline_config() -> None:
    lab = get_acp_lab("codex-acp")
    scenario = lab.scenarios["write_file"]
    launch = lab.launch(AcpContext(scenario, Path("/w"), "http://127.0.0.1:9"), path="/bin")
    config = launch.home_files[".codex/config.toml"]
    assert launch.env["CODEX_HOME"] == "/w/home/.codex"  # not under TMPDIR
    assert 'base_url = "http://127.0.0.1:9/v1"' in config
    assert "shell_snapshot = false" in config
    assert 'approval_policy = "untrusted"' in config


def test_bind_replies_binds_the_repo_and_keeps_every_fault() -> None:
    replies = (
        Reply((ToolCall("Read", {"file_path": "<repo>/a.py"}),), hold_after_events=7),
        Reply((ToolCall("apply_patch", "*** Add File: <repo>/N.md\n", kind="custom"),)),
        Reply((Text("<repo> stays in text"),), cut_after_events=2),
    )
    bound = acp_record.bind_replies(replies, "/r")
    first, second, third = bound
    assert isinstance(first.blocks[0], ToolCall)
    assert first.blocks[0].input == {"file_path": "/r/a.py"}
    assert first.hold_after_events == 7
    assert isinstance(second.blocks[0], ToolCall)
    assert second.blocks[0].input == "*** Add File: /r/N.md\n"
    assert second.blocks[0].kind == "custom"
    assert third.cut_after_events == 2
    assert third.blocks == replies[2].blocks


def _recorded_options(agent: str, scenario: str) -> list[Any]:
    """The options of the first permission request of a recording, as the SDK hands them."""
    path = next((FIXTURES / agent).glob(f"*/{scenario}.jsonl"))
    for rec in acp_record.read_records(path):
        msg = rec["message"]
        if msg.get("method") == "session/request_permission":
            return [
                SimpleNamespace(option_id=o["optionId"], kind=o["kind"])
                for o in msg["params"]["options"]
            ]
    raise AssertionError(f"{path} has no permission request")


@pytest.mark.parametrize(
    ("agent", "scenario", "allow", "reject"),
    [
        ("claude-acp", "write_file", "allow", "reject"),
        ("gemini-acp", "write_file", "proceed_once", "cancel"),
        ("opencode-acp", "write_file", "once", "reject"),
        ("codex-acp", "shell_command", "approved", "abort"),
    ],
)
def test_permission_answers_pick_the_agents_own_once_options(
    agent: str, scenario: str, allow: str, reject: str
) -> None:
    options = _recorded_options(agent, scenario)
    assert acp_record.choose_option(options, "allow") == allow
    assert acp_record.choose_option(options, "reject") == reject
    only_always = [o for o in options if o.kind == "allow_always"]
    assert acp_record.choose_option(only_always, "reject") is None  # answered "cancelled"


def test_what_the_recorder_answered_is_in_the_recording() -> None:
    """The committed codex recordings answered as their scenarios say."""
    for scenario, option in (("shell_command", "approved"), ("permission_rejected", "abort")):
        path = FIXTURES / "codex-acp" / "0.16.0" / f"{scenario}.jsonl"
        answers = [
            r["message"]["result"]["outcome"]
            for r in acp_record.read_records(path)
            if r["direction"] == "out" and "outcome" in (r["message"].get("result") or {})
        ]
        assert answers == [{"outcome": "selected", "optionId": option}]


def test_placeholders_replace_the_longest_path_first() -> None:
    lab = get_acp_lab("claude-acp")
    subs = acp_record.placeholders(Path("/s/w"), lab, "http://127.0.0.1:5")
    text = "/s/w/repo/a /s/w/home/.claude /s/w/x http://127.0.0.1:5/v1 " + str(lab.binary)
    assert acp_record.scrub({"k": [text], "/s/w/repo/N.md": 1}, subs) == {
        "k": ["<repo>/a <home>/.claude <workdir>/x <fake>/v1 <vendor-bin>/claude-agent-acp"],
        "<repo>/N.md": 1,  # codex keys apply_patch changes by path
    }


def test_shape_ignores_volatile_values_and_sees_protocol_changes() -> None:
    path = FIXTURES / "claude-acp" / "0.23.1" / "read_file.jsonl"
    records = acp_record.read_records(path)
    shape = acp_record.shape(records)
    assert shape[:3] == ["out request initialize", "in result", "out request session/new"]
    assert shape[-1] == "in result stopReason=end_turn"
    renamed = json.loads(
        json.dumps(records).replace(records[3]["message"]["result"]["sessionId"], "other")
    )
    assert acp_record.shape(renamed) == shape
    changed = json.loads(json.dumps(records))
    changed[-1]["message"]["result"]["stopReason"] = "cancelled"
    assert acp_record.shape(changed) != shape


@pytest.mark.parametrize("agent_id", LAB_IDS)
def test_every_scenario_has_a_real_offline_recording(agent_id: str) -> None:
    lab = get_acp_lab(agent_id)
    target = FIXTURES / agent_id / lab.version
    for name, scenario in lab.scenarios.items():
        meta = json.loads((target / f"{name}.meta.json").read_text())
        assert (target / f"{name}.jsonl").stat().st_size > 0
        assert meta["synthetic"] is False
        assert meta["vendor_version"] == lab.version
        links = [line.split(":")[1].strip() for line in meta["netns_links"]]
        assert links == ["lo"]
        if "description" in meta:
            assert meta["description"] == scenario.description


def test_the_cli_lists_and_refuses_unknown_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert acp_record.main(["--agent", "codex-acp", "--list"]) == 0
    listed = capsys.readouterr().out
    for name in get_acp_lab("codex-acp").scenarios:
        assert f"{name}: " in listed
    with pytest.raises(SystemExit) as exc:
        acp_record.main(["--agent", "codex-acp", "--scenario", "no_such"])
    assert exc.value.code == 2
    assert "no_such" in capsys.readouterr().err


def test_the_gemini_and_opencode_entry_points_pick_their_agent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert acp_record_gemini.main(["--list"]) == 0
    assert "proceed_once" in capsys.readouterr().out
    assert acp_record_opencode.main(["--list"]) == 0
    assert "opencode's read tool" in capsys.readouterr().out


def test_a_missing_binary_is_said_with_its_install_script(tmp_path: Path) -> None:
    lab = get_acp_lab("codex-acp")

    class Missing(type(lab)):  # type: ignore[misc]
        binary_rel = "nowhere/codex-acp"

    with pytest.raises(RuntimeError, match=r"install-acp-vendors\.sh"):
        acp_record.record(Missing(), "plain_text", tmp_path / "out", tmp_path / "scratch")
    assert not (tmp_path / "out").exists()


def test_compare_finds_no_difference_in_a_recording_and_names_a_changed_step(
    tmp_path: Path,
) -> None:
    lab = get_acp_lab("claude-acp")
    assert acp_record.compare(lab, "read_file", FIXTURES, FIXTURES) == []
    rel = Path(lab.agent_id) / lab.version
    (tmp_path / rel).mkdir(parents=True)
    records = acp_record.read_records(FIXTURES / rel / "read_file.jsonl")
    records[-1]["message"]["result"]["stopReason"] = "cancelled"
    text = "".join(json.dumps(r) + "\n" for r in records)
    (tmp_path / rel / "read_file.jsonl").write_text(text)
    meta = json.loads((FIXTURES / rel / "read_file.meta.json").read_text())
    meta["stop_reason"] = "cancelled"
    (tmp_path / rel / "read_file.meta.json").write_text(json.dumps(meta))
    diff = acp_record.compare(lab, "read_file", tmp_path, FIXTURES)
    assert "-in result stopReason=end_turn" in diff
    assert "+in result stopReason=cancelled" in diff
    assert "meta stop_reason: reference 'end_turn', recorded 'cancelled'" in diff
