"""The gemini-acp and opencode-acp records and launch recipes: what the lab measured on the
pinned binaries (docs/acp.md), as data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from supervisor.acp.recipes import (
    GEMINI_SETTINGS,
    OPENCODE_CONFIG,
    OPENCODE_ENV,
    acp_recipe,
)
from supervisor.env import XDG_SUBDIRS, build_child_env, is_credential_shaped
from supervisor.errors import Refusal
from supervisor.registry import AGENTS, Mode, get_agent

GEMINI = get_agent("gemini-acp")
OPENCODE = get_agent("opencode-acp")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "external"


def lab_meta(agent: str, version: str) -> dict[str, Any]:
    """What the lab recorded the pinned binary with (the plain_text meta file)."""
    meta: dict[str, Any] = json.loads(
        (FIXTURES / agent / version / "plain_text.meta.json").read_text()
    )
    assert meta["synthetic"] is False
    return meta


GEMINI_LAB = lab_meta("gemini-acp", "0.61.0")
OPENCODE_LAB = lab_meta("opencode-acp", "1.18.33")


def test_records() -> None:
    assert (GEMINI.binary, GEMINI.transport, GEMINI.signing_key) == (
        "gemini",
        "acp",
        "GEMINI_API_KEY",
    )
    assert (OPENCODE.binary, OPENCODE.transport, OPENCODE.signing_key) == (
        "opencode",
        "acp",
        "OPENAI_API_KEY",
    )
    # the recorded range is the pinned, recorded version
    assert GEMINI.recorded_range.contains(GEMINI_LAB["vendor_version"])
    assert OPENCODE.recorded_range.contains(OPENCODE_LAB["vendor_version"])
    assert not GEMINI.recorded_range.contains("0.62.0")
    for spec in (GEMINI, OPENCODE):
        assert spec.modes == (Mode.READ_ONLY, Mode.WORKTREE_WRITE)
        assert spec.parse_version_output("0.61.0\n") == "0.61.0"
        assert spec.write_needs_recorded_version
        assert not any(is_credential_shaped(p) for p in spec.env_prefixes)


@pytest.mark.parametrize("agent", ["gemini-acp", "opencode-acp"])
def test_host_switches_that_undo_the_recipe_do_not_reach_the_child(agent: str) -> None:
    host = {
        "GEMINI_MODEL": "auto",
        "GEMINI_CLI_APPROVAL_MODE": "yolo",
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH": "/etc/other.json",
        "GEMINI_CLI": "1",
        "OPENCODE_PERMISSION": '{"edit": "allow"}',
        "OPENCODE_CONFIG_CONTENT": "{}",
        "OPENCODE_CONFIG_DIR": "/elsewhere",
        "GOOGLE_GEMINI_BASE_URL": "https://gateway.example",
        "GEMINI_API_KEY": "g",
        "OPENAI_API_KEY": "o",
    }
    child = build_child_env(host, AGENTS[agent], home="/h", tmpdir="/t")
    passed = set(child.vars) & set(host)
    if agent == "gemini-acp":
        assert passed == {"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"}
    else:
        assert passed == {"OPENAI_API_KEY"}


def test_gemini_recipe_is_the_labs() -> None:
    recipe = acp_recipe(
        GEMINI,
        mode=Mode.WORKTREE_WRITE,
        home="/run/home/",
        now_ms=0,
        endpoint="http://127.0.0.1:9/",
    )
    assert recipe.argv == ["gemini", "--acp"]  # not the deprecated --experimental-acp
    assert recipe.env == {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"}
    assert list(recipe.home_files) == [GEMINI_SETTINGS]
    # the settings the lab recorded with (model pinned: "auto" adds a router request), but
    # folder trust on: the worktree is untrusted and its own .gemini/settings.json unread
    settings = json.loads(recipe.home_files[GEMINI_SETTINGS])
    lab = json.loads(json.dumps(GEMINI_LAB["settings"]))
    assert lab["security"].pop("folderTrust") == {"enabled": False}
    assert settings["security"].pop("folderTrust") == {"enabled": True}
    assert settings == lab


def test_gemini_recipe_model_and_no_endpoint() -> None:
    recipe = acp_recipe(GEMINI, mode=Mode.READ_ONLY, home="/h", now_ms=0, model="gemini-2.5-flash")
    assert recipe.env == {}
    settings = json.loads(recipe.home_files[GEMINI_SETTINGS])
    assert settings["model"] == {"name": "gemini-2.5-flash"}
    # no endpoint: gemini picks its auth type from the environment (the API key)
    assert "auth" not in settings["security"]
    assert settings["general"]["maxAttempts"] == 1


def test_opencode_recipe() -> None:
    recipe = acp_recipe(
        OPENCODE,
        mode=Mode.READ_ONLY,
        home="/run/home/",
        now_ms=0,
        endpoint="http://127.0.0.1:9/",
        model="lab-model",
    )
    assert recipe.argv == ["opencode", "acp", "--pure"]
    assert recipe.env == {"OPENCODE_CONFIG": f"/run/home/{OPENCODE_CONFIG}", **OPENCODE_ENV}
    # every switch the lab used, and the project config off
    lab_switches = [n for n in OPENCODE_LAB["env_names"] if n.startswith("OPENCODE_DISABLE_")]
    assert len(lab_switches) == 7
    assert all(recipe.env[n] == "1" for n in lab_switches)
    assert recipe.argv[1:] == OPENCODE_LAB["argv"][1:]
    assert recipe.env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert recipe.env["npm_config_offline"] == "true"
    # the XDG dirs are the env builder's (under the per-run HOME), never the recipe's
    assert not set(recipe.env) & set(XDG_SUBDIRS)
    config = json.loads(recipe.home_files[OPENCODE_CONFIG])
    lab = OPENCODE_LAB["config"]
    provider = config["provider"][config["enabled_providers"][0]]
    assert config["enabled_providers"] == list(config["provider"])
    assert provider["npm"] == lab["provider"]["lab"]["npm"]
    assert provider["options"] == {
        "baseURL": "http://127.0.0.1:9/v1",
        "apiKey": "{env:OPENAI_API_KEY}",  # a reference: the key never lands in the file
    }
    assert list(provider["models"]) == ["lab-model"]
    assert config["model"] == config["small_model"] == f"{config['enabled_providers'][0]}/lab-model"
    assert lab["permission"].items() <= config["permission"].items()
    assert (config["autoupdate"], config["share"], config["snapshot"]) == (False, "disabled", False)


def test_opencode_recipe_without_endpoint_uses_openai() -> None:
    recipe = acp_recipe(OPENCODE, mode=Mode.WORKTREE_WRITE, home="/h", now_ms=0)
    config = json.loads(recipe.home_files[OPENCODE_CONFIG])
    (provider,) = config["provider"].values()
    assert provider["options"]["baseURL"] == "https://api.openai.com/v1"
    assert re.fullmatch(r"[a-z0-9.-]+", next(iter(provider["models"])))


def test_recipes_refuse_turn_limits_and_bad_endpoints() -> None:
    for agent in (GEMINI, OPENCODE):
        with pytest.raises(Refusal, match="--max-runtime"):
            acp_recipe(agent, mode=Mode.READ_ONLY, home="/h", now_ms=0, max_turns=2)
        with pytest.raises(Refusal, match="not an http"):
            acp_recipe(agent, mode=Mode.READ_ONLY, home="/h", now_ms=0, endpoint="x")
