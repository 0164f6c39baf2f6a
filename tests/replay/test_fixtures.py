"""The offline suite: every recorded transcript decodes to its expectation.

The transcripts were printed by the real pinned vendor binaries (the lab records them); the
expectations pin what the codec makes of them, and each scenario's own expectations (written
with the scenario, not derived from any codec) are checked too.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from supervisor.codecs import CODECS
from supervisor.lab.expect import (
    FIXTURES,
    Transcript,
    decode_fixture,
    expected_for,
    scenario_mismatches,
    transcripts,
)

ALL = transcripts()


def test_every_codec_has_recorded_fixtures() -> None:
    agents = {t.agent for t in ALL}
    assert agents == set(CODECS), f"agents with fixtures: {sorted(agents)}"


def test_no_stray_files_in_fixtures() -> None:
    for path in FIXTURES.glob("*/*/*"):
        assert path.name.endswith((".jsonl", ".meta.json", ".expected.json")), path


@pytest.mark.parametrize("t", ALL, ids=repr)
def test_transcript_decodes_to_its_expectation(t: Transcript) -> None:
    assert t.expected_path.exists(), (
        f"{t.path.name} has no expectation: run `python -m supervisor.lab.expect` and review it"
    )
    expected = json.loads(t.expected_path.read_text())
    assert expected_for(t, expected) == expected


@pytest.mark.parametrize("t", ALL, ids=repr)
def test_unknown_lines_are_each_explained(t: Transcript) -> None:
    expected = json.loads(t.expected_path.read_text())
    run = decode_fixture(t)
    assert run.summary.unknown_lines == len(expected["unknown_lines"])
    for entry in expected["unknown_lines"]:
        assert entry["reason"].strip(), f"unexplained unknown line in {t}: {entry['sample']}"


@pytest.mark.parametrize("t", ALL, ids=repr)
def test_recording_is_real_and_was_offline(t: Transcript) -> None:
    assert t.meta["synthetic"] is False
    names = [line.split(":")[1].strip() for line in t.meta["netns_links"] if ":" in line]
    assert names == ["lo"], f"the recording's namespace had interfaces {names}"
    assert t.meta["vendor_version"] == t.version


def _scenarios() -> list[tuple[str, list[Transcript]]]:
    grouped: dict[str, list[Transcript]] = defaultdict(list)
    for t in ALL:
        grouped[f"{t.agent}/{t.version}/{t.scenario}"].append(t)
    # steps first, the last step (``<scenario>.jsonl``) last
    return [
        (key, sorted(ts, key=lambda t: (t.is_last_step, t.path.name)))
        for key, ts in sorted(grouped.items())
    ]


@pytest.mark.parametrize(("key", "steps"), _scenarios(), ids=[k for k, _ in _scenarios()])
def test_decoded_fixture_matches_the_scenario(key: str, steps: list[Transcript]) -> None:
    runs = [decode_fixture(t) for t in steps]
    assert scenario_mismatches(steps[-1].meta["expect"], runs) == [], key
