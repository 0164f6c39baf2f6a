"""Secret redaction: recall and false-positive rate on the corpus, each rule, the diff's shape."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from supervisor import redact
from supervisor.errors import SupervisorError
from supervisor.redact import (
    RULE_IDS,
    Finding,
    RedactionError,
    redact_patch,
    redact_text,
    scan,
    scan_patch,
)

CORPUS = Path(__file__).resolve().parents[1] / "redaction_corpus"
MIN_RECALL = 0.95
MAX_FPR = 0.02

LOWER, UPPER, DIGITS = "abcdefghijklmnopqrstuvwxyz", "ZYXWVUTSRQPONMLKJIHGFEDCBA", "0123456789"
# the three classes interleaved, so that stepping through it never yields a word-like run
ALNUM = "".join(a + b + d for a, b, d in zip(LOWER, UPPER, DIGITS * 3, strict=False))


def mix(n: int, alphabet: str = ALNUM, step: int = 7) -> str:
    """``n`` well-spread characters of ``alphabet``: high entropy, no randomness."""
    return "".join(alphabet[(i * step + 3) % len(alphabet)] for i in range(n))


def load(name: str) -> list[dict[str, Any]]:
    lines = (CORPUS / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def findings_of(case: dict[str, Any]) -> list[Finding]:
    if case["form"] == "patch":
        return list(redact_patch(case["text"]).findings)
    return scan(case["text"])


def patch(path: str, added: list[str], *, before: str = "import os", removed: str = "") -> str:
    body = [f" {before}"] + ([f"-{removed}"] if removed else []) + [f"+{a}" for a in added]
    body.append(" ")
    old, new = 2 + bool(removed), 2 + len(added)
    head = [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]
    return "\n".join([*head, f"@@ -1,{old} +1,{new} @@", *body]) + "\n"


# ------------------------------------------------------------------------------------------------
# the corpus


def test_corpus_recall_and_false_positive_rate() -> None:
    positives, negatives = load("positives.jsonl"), load("negatives.jsonl")
    missed = [c["id"] for c in positives if not findings_of(c)]
    flagged = [c["id"] for c in negatives if findings_of(c)]
    recall = 1 - len(missed) / len(positives)
    fpr = len(flagged) / len(negatives)
    report = (
        f"redaction corpus: recall {recall:.3f} ({len(positives) - len(missed)}/{len(positives)}),"
        f" false-positive rate {fpr:.3f} ({len(flagged)}/{len(negatives)});"
        f" missed {missed}, flagged {flagged}"
    )
    print(report)
    assert recall >= MIN_RECALL, report
    assert fpr <= MAX_FPR, report


def test_corpus_positives_are_found_by_their_own_rule() -> None:
    per_rule: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for case in load("positives.jsonl"):
        per_rule[case["rule"]] += 1
        own[case["rule"]] += case["rule"] in {f.rule for f in findings_of(case)}
    report = {rule: f"{own[rule]}/{per_rule[rule]}" for rule in RULE_IDS}
    print("per-rule recall:", report)
    assert set(per_rule) == set(RULE_IDS), report
    assert all(per_rule[rule] >= 5 for rule in RULE_IDS), report
    assert all(own[rule] >= 0.85 * per_rule[rule] for rule in RULE_IDS), report


def test_corpus_is_large_enough_and_labelled() -> None:
    positives, negatives = load("positives.jsonl"), load("negatives.jsonl")
    assert len(positives) >= 150
    assert len(negatives) >= 290
    assert {c["label"] for c in positives} == {"positive"}
    assert {c["label"] for c in negatives} == {"negative"}
    assert all(c["note"] and c["form"] in ("patch", "text") for c in positives + negatives)
    assert len({c["id"] for c in positives + negatives}) == len(positives) + len(negatives)


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_corpus_is_the_generator_output() -> None:
    gen = _generator()
    corpus = gen.build()
    for label, name in (("positive", "positives.jsonl"), ("negative", "negatives.jsonl")):
        assert gen.render(corpus, label) == (CORPUS / name).read_text(encoding="utf-8"), name


def test_committed_corpus_holds_no_raw_vendor_prefixes() -> None:
    raw = (CORPUS / "positives.jsonl").read_text(encoding="utf-8")
    for prefix in ("gh" + "p_", "sk" + "_live_", "AK" + "IA", "xo" + "xb-", "PRIVATE" + " KEY"):
        assert prefix not in raw


# ------------------------------------------------------------------------------------------------
# each rule

GH = "gh" + "p_"
RULE_CASES: list[tuple[str, str, str]] = [
    (
        "aws-access-key-id",
        "app.py",
        'aws_id = "AK' + "IAFAKE" + mix(12, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") + '"',
    ),
    ("aws-secret-access-key", ".env", "AWS_SECRET_ACCESS_KEY=FAKE" + mix(36, ALNUM + "/+")),
    ("github-token", "ci.sh", "gh auth login --with-token " + GH + "FAKE" + mix(32)),
    ("github-token", "a.txt", "github" + "_pat_FAKE" + mix(18) + "_" + mix(59, step=11)),
    ("gitlab-token", "a.sh", "TOKEN_OF_CI glp" + "at-FAKE" + mix(20)),
    (
        "slack-token",
        "a.js",
        "const t = 'xo" + "xb-123456789012-1234567890123-FAKE" + mix(20) + "';",
    ),
    (
        "slack-webhook",
        "a.yml",
        "url: https://hooks.sl" + "ack.com/services/TABC23456/BDEF234567/FAKE" + mix(20),
    ),
    ("stripe-key", "a.rb", "Stripe.api_key = 'sk" + "_live_FAKE" + mix(24) + "'"),
    ("google-api-key", "a.html", "<script src='maps.js?key=AI" + "zaFAKE" + mix(31) + "'>"),
    ("anthropic-key", "a.py", "Anthropic(api_key='sk" + "-ant-api03-FAKE" + mix(90) + "AA')"),
    ("openai-key", "a.py", "OpenAI(api_key='sk" + "-proj-FAKE" + mix(60) + "')"),
    ("npm-token", ".npmrc", "//registry.npmjs.org/:_authToken=np" + "m_FAKE" + mix(32)),
    ("pypi-token", "a.sh", "uv publish --token py" + "pi-AgEIcHlwaS5vcmcFAKE" + mix(60)),
    ("jwt", "a.ts", "const s = 'ey" + "JhbGciOiJIUzI1NiJ9.eyJzdWIiOiJGQUtFIn0." + mix(43) + "';"),
    ("url-credentials", ".env", "DATABASE_URL=postgres://app:FAKE" + mix(12) + "@db:5432/app"),
    ("auth-header", "a.sh", 'curl -H "Authorization: Bearer FAKE' + mix(28) + '" $URL'),
    ("secret-assignment", "a.py", 'DB_PASSWORD = "Fk3!' + mix(10) + '"'),
    ("secret-assignment", "config.yml", "  client_secret: Fk3" + mix(16)),
    ("high-entropy", "a.go", 'c := vendor.Dial("' + mix(32, step=5) + '")'),
]


@pytest.mark.parametrize(("rule", "path", "line"), RULE_CASES)
def test_rule(rule: str, path: str, line: str) -> None:
    result = redact_patch(patch(path, [line]))
    assert [f.rule for f in result.findings] == [rule]
    finding = result.findings[0]
    secret = patch(path, [line])[finding.start : finding.end]
    assert secret in line
    assert secret not in result.patch
    assert f"[REDACTED:{rule}]" in result.patch
    assert finding.line == 6  # diff, ---, +++, the hunk header, one context line
    assert result.flagged


def test_rule_table_covers_every_line_rule() -> None:
    assert {rule for rule, _, _ in RULE_CASES} == set(RULE_IDS) - {"private-key"}


def test_private_key_block_is_redacted_line_by_line() -> None:
    body = ["MIIEFAKE" + mix(56), mix(64, step=11), mix(40, step=13)]
    label = "RSA PRIVATE" + " KEY"
    lines = [f"-----BEGIN {label}-----", *body, f"-----END {label}-----"]
    text = patch("deploy/id_rsa", lines)
    result = redact_patch(text)
    assert [f.rule for f in result.findings] == ["private-key"]
    out = result.patch.split("\n")
    assert out[5] == f"+-----BEGIN {label}-----"
    assert out[6:9] == ["+[REDACTED:private-key]"] * 3
    assert out[9] == f"+-----END {label}-----"
    finding = result.findings[0]
    assert finding.line == 7
    assert text[finding.start : finding.end] == "\n+".join(body)


def test_private_key_in_a_json_string() -> None:
    label = "PRIVATE" + " KEY"
    key = f"-----BEGIN {label}-----\\nMIIEFAKE{mix(60)}\\n-----END {label}-----\\n"
    result = redact_patch(patch("sa.json", [f'  "private_key": "{key}",']))
    assert [f.rule for f in result.findings] == ["private-key"]
    assert f'"-----BEGIN {label}-----[REDACTED:private-key]-----END {label}-----' in result.patch


def test_public_blocks_and_documented_examples_are_not_flagged() -> None:
    cert = ["-----BEGIN CERTIFICATE-----", mix(64), mix(64, step=11), "-----END CERTIFICATE-----"]
    assert not redact_patch(patch("ca.pem", cert)).flagged
    assert not scan("aws_access_key_id = AK" + "IAIOSFODNN7EXAMPLE\n")
    assert not scan("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")


@pytest.mark.parametrize(
    "line",
    [
        'password = ""',
        "password = None",
        'api_key = os.environ["API_KEY"]',
        "  token: ${{ secrets.GITHUB_TOKEN }}",
        'API_KEY = "<your-api-key-here>"',
        'token_type = "bearer"',
        "max_tokens = 4096",
        'TOKEN_ENV = "GITHUB_TOKEN"',
        "amqp://guest:guest@localhost:5672//",
        '      "integrity": "sha512-' + mix(86, ALNUM + "+/") + '==",',
    ],
)
def test_tempting_non_secrets(line: str) -> None:
    assert not redact_patch(patch("app.py", [line])).flagged


def test_code_files_count_only_quoted_values() -> None:
    line = "password = user_supplied_Password1"
    assert not redact_patch(patch("app.py", [line])).flagged
    assert [f.rule for f in redact_patch(patch("app.ini", [line])).findings] == [
        "secret-assignment"
    ]


def test_lockfiles_have_no_entropy_rule_but_keep_vendor_rules() -> None:
    noisy = "  resolved: " + mix(40, step=5)
    assert redact_patch(patch("src/a.txt", [noisy])).flagged
    assert not redact_patch(patch("yarn.lock", [noisy])).flagged
    leaked = "  token: " + GH + "FAKE" + mix(32)
    assert redact_patch(patch("yarn.lock", [leaked])).flagged


# ------------------------------------------------------------------------------------------------
# the diff's structure


def test_only_added_lines_are_scanned_and_touched() -> None:
    old = 'API_TOKEN = "' + GH + "FAKE" + mix(32) + '"'
    new = 'API_TOKEN = "' + GH + "FAKE" + mix(32, step=11) + '"'
    text = patch("app/config.py", [new], before=old, removed=old)
    result = redact_patch(text)
    assert len(result.findings) == 1
    before, after = text.split("\n"), result.patch.split("\n")
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [result.findings[0].line - 1]
    assert after[changed[0]] == '+API_TOKEN = "[REDACTED:github-token]"'
    assert not scan_patch(patch("app/config.py", ["TIMEOUT = 3"], before=old, removed=old))


def test_redaction_keeps_the_line_structure() -> None:
    cases = [c for c in load("positives.jsonl") if c["form"] == "patch"]
    for case in cases:
        text = case["text"]
        out = redact_patch(text).patch
        before, after = text.split("\n"), out.split("\n")
        assert len(after) == len(before), case["id"]
        for a, b in zip(before, after, strict=True):
            assert a[:1] == b[:1], case["id"]
            if not a.startswith("+") or a.startswith("+++ "):
                assert a == b, case["id"]


def test_an_added_line_that_starts_with_plus_plus_is_still_scanned() -> None:
    line = "++ token: " + GH + "FAKE" + mix(32)
    result = redact_patch(patch("notes.txt", [line]))
    assert [f.rule for f in result.findings] == ["github-token"]
    assert "+++ b/notes.txt" in result.patch


def test_headers_outside_hunks_are_not_scanned() -> None:
    text = "+++ b/" + GH + "FAKE" + mix(32) + "\n"
    assert not scan_patch(text)
    assert [f.rule for f in scan(text)] == ["github-token"]


def test_planted_key_in_a_realistic_patch() -> None:
    (case,) = [
        c for c in load("positives.jsonl") if "planted" in c["note"] and c["form"] == "patch"
    ]
    result = redact_patch(case["text"])
    assert [f.rule for f in result.findings] == ["stripe-key"]
    lines = result.patch.split("\n")
    assert lines[result.findings[0].line - 1] == '+        self.key = "[REDACTED:stripe-key]"'
    assert sum(a != b for a, b in zip(case["text"].split("\n"), lines, strict=True)) == 1


def test_plain_text_scans_every_line() -> None:
    text = "first line\nkey " + GH + "FAKE" + mix(32) + " here\n"
    (finding,) = scan(text)
    assert finding.line == 2
    assert text[finding.start : finding.end].startswith(GH)
    assert redact_text(text).patch == "first line\nkey [REDACTED:github-token] here\n"


# ------------------------------------------------------------------------------------------------
# fingerprints, determinism, errors


def test_fingerprints_never_hold_the_secret() -> None:
    for case in load("positives.jsonl"):
        text = case["text"]
        for finding in findings_of(case):
            secret = text[finding.start : finding.end]
            assert secret not in finding.fingerprint, case["id"]
            shown, _, length = finding.fingerprint.partition("...")
            assert len(shown) <= min(4, len(secret) // 4), case["id"]
            assert length.isdigit(), case["id"]
        assert all(
            text[f.start : f.end] not in redact_patch(text).patch
            for f in findings_of(case)
            if case["form"] == "patch"
        ), case["id"]


def test_fingerprint_of_a_short_value() -> None:
    (finding,) = scan('DB_PASSWORD = "Hx7!kq2"\n')
    assert finding.fingerprint == "H...7"


_DIGEST_SCRIPT = """
import hashlib, json, sys
from supervisor.redact import redact_patch, scan
h = hashlib.sha256()
for name in ("positives.jsonl", "negatives.jsonl"):
    for line in open(sys.argv[1] + "/" + name, encoding="utf-8"):
        case = json.loads(line)
        result = redact_patch(case["text"])
        h.update(result.patch.encode())
        h.update(repr(result.findings).encode())
        h.update(repr(scan(case["text"])).encode())
print(h.hexdigest())
"""


def test_same_input_same_output_across_processes() -> None:
    digests = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", _DIGEST_SCRIPT, str(CORPUS)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1
    local = hashlib.sha256()
    for name in ("positives.jsonl", "negatives.jsonl"):
        for case in load(name):
            result = redact_patch(case["text"])
            local.update(result.patch.encode())
            local.update(repr(result.findings).encode())
            local.update(repr(scan(case["text"])).encode())
    assert digests == {local.hexdigest()}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("token = 'abc'\x00\x01binary", "NUL"),
        ("password = '\udcff\udcfe'", "surrogates"),
    ],
)
def test_input_that_is_not_text_is_refused(text: str, reason: str) -> None:
    with pytest.raises(RedactionError, match=reason) as info:
        redact_patch(text)
    assert "abc" not in str(info.value)
    assert "password" not in str(info.value)
    assert isinstance(info.value, SupervisorError)


def test_input_beyond_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "MAX_INPUT_CHARS", 64)
    secret = "DB_PASSWORD=Fk3" + mix(60)
    with pytest.raises(RedactionError, match="limit") as info:
        scan(secret)
    assert "Fk3" not in str(info.value)
    assert scan(secret[:60])


def test_non_str_input_is_refused() -> None:
    data: Any = b"password = 'Fk3kq9x!z'"
    with pytest.raises(RedactionError, match="not text"):
        scan(data)


def test_all_lists_the_public_names() -> None:
    public = {n for n in vars(redact) if not n.startswith("_") and n.isidentifier()}
    imported = {
        "annotations",
        "bisect",
        "math",
        "posixpath",
        "re",
        "Counter",
        "Callable",
        "Iterator",
    }
    imported |= {"dataclass", "Enum", "SupervisorError"}
    assert set(redact.__all__) == public - imported


def test_many_findings_on_one_line_scan_in_linear_time() -> None:
    line = 'token="' * 40_000
    started = time.perf_counter()
    findings = scan(line)
    elapsed = time.perf_counter() - started
    assert len(findings) == 20_000
    assert elapsed < 2.0, f"{elapsed:.2f}s"
