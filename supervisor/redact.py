"""Secret scanning and redaction for review patches: a pure function of the text.

What a child wrote is captured as a unified diff; before it is hashed and kept as a pending review,
:func:`redact_patch` replaces every credential-shaped value on an *added* line with
``[REDACTED:<rule-id>]``. Context and removed lines are the user's existing content and are left
exactly as they are. The patch keeps its line structure: only spans inside a line are replaced, so
the line count and the hunk headers stay valid. :func:`scan` and :func:`redact_text` do the same
for plain text (every line counts as added), for callers that are not holding a diff.

No I/O, no clock, no randomness: the same input gives the same output, byte for byte.

Rules, in priority order (an earlier rule's span wins over a later one's; a match that a rule
rejects as a documented example or a placeholder also keeps later rules off that span):

* vendor shapes — ``aws-access-key-id``, ``aws-secret-access-key``, ``github-token``,
  ``gitlab-token``, ``slack-token``, ``slack-webhook``, ``stripe-key``, ``google-api-key``,
  ``anthropic-key``, ``openai-key``, ``npm-token``, ``pypi-token``, ``jwt``, ``private-key``;
* context shapes — ``url-credentials`` (the password of ``scheme://user:pass@host``),
  ``auth-header`` (``Authorization: Bearer|Basic|Token <value>``), ``secret-assignment`` (a value
  assigned to a name ending in password, secret, token, api key … with value checks);
* ``high-entropy`` — a base64-ish run of at least 20 characters whose Shannon entropy is close to
  that of random data (see :data:`ENTROPY_RATIO`), with suppressions for non-secrets.

The rules, the threshold and how it was calibrated are described in ``docs/redaction.md``.

A :class:`Finding` never holds the secret: only the rule, where it is, and a short fingerprint
(a few leading characters and the length).

Errors (the tree is in :mod:`supervisor.errors`)::

    SupervisorError
    └── RedactionError     the scan cannot complete (not text, or larger than the limit)
"""

from __future__ import annotations

import bisect
import math
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from supervisor.errors import SupervisorError

__all__ = [
    "ENTROPY_MIN_LENGTH",
    "ENTROPY_RATIO",
    "MAX_INPUT_CHARS",
    "RULE_IDS",
    "Finding",
    "Redaction",
    "RedactionError",
    "redact_patch",
    "redact_text",
    "scan",
    "scan_patch",
]

MAX_INPUT_CHARS = 8 * 1024 * 1024
"""Inputs longer than this (in characters) are refused rather than scanned."""

ENTROPY_MIN_LENGTH = 20
ENTROPY_RATIO = 0.82
"""A candidate is flagged when its Shannon entropy in bits per character is at least this fraction
of ``log2(min(length, 64))``, the entropy of a string of that length with no repeated character
(capped at the 64-symbol base64 alphabet). Calibrated on ``tests/redaction_corpus``."""


class RedactionError(SupervisorError):
    """The scan cannot complete. The message is the reason only, never a preview of the input."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One redacted secret. ``start``/``end`` are character offsets into the scanned text
    (``text[start:end]`` is the secret; for a multi-line private key block the span runs from the
    first to the last body character and includes the line breaks and diff markers between).
    ``line`` is the 1-based line of ``start``. ``fingerprint`` is at most four leading characters
    (fewer for short values) and the length, e.g. ``ghp_...40``."""

    rule: str
    line: int
    start: int
    end: int
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Redaction:
    """The redacted text and what was redacted in it."""

    patch: str
    findings: tuple[Finding, ...]

    @property
    def flagged(self) -> bool:
        return bool(self.findings)


# --------------------------------------------------------------------------------------------
# Value checks


def _fingerprint(value: str) -> str:
    shown = min(4, len(value) // 4)
    return f"{value[:shown]}...{len(value)}"


_REPEAT = re.compile(r"(.)\1{5}")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_DOTTED = re.compile(r"[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+")
_PLACEHOLDER_PARTS = (
    "example",
    "placeholder",
    "changeme",
    "change_me",
    "change-me",
    "your",
    "xxxx",
    "****",
    "....",
    "redacted",
    "dummy",
    "sample",
    "replace",
    "insert",
    "todo",
    "fixme",
    "mock",
    "<",
    ">",
    "${",
    "{{",
    "}}",
    "%(",
)
_PLACEHOLDER_WORDS = frozenset(
    {
        "password",
        "passwd",
        "secret",
        "token",
        "none",
        "null",
        "nil",
        "undefined",
        "true",
        "false",
        "empty",
        "default",
        "required",
        "optional",
        "string",
        "bearer",
        "hidden",
    }
)
_PREFIX_PLACEHOLDERS = ("test", "$", "%", "!", "/", "./", "../", "~/")
_TEMPLATE = re.compile(r"\{[^{}]*\}")


def _classes(value: str) -> int:
    lower = any(c.islower() for c in value)
    upper = any(c.isupper() for c in value)
    digit = any(c.isdigit() for c in value)
    other = any(not c.isalnum() and c not in "_-. " for c in value)
    return lower + upper + digit + other


def _is_placeholder(value: str) -> bool:
    low = value.lower()
    return (
        low in _PLACEHOLDER_WORDS
        or any(part in low for part in _PLACEHOLDER_PARTS)
        or low.startswith(_PREFIX_PLACEHOLDERS)
        or _REPEAT.search(value) is not None
        or _TEMPLATE.search(value) is not None
    )


def _vendor_ok(value: str) -> bool:
    """Vendor shapes are specific enough that only filler values are rejected."""
    return _REPEAT.search(value) is None and "EXAMPLE" not in value


def _mixed_ok(value: str) -> bool:
    return _vendor_ok(value) and _classes(value) >= 2


def _assignment_value_ok(value: str, *, quoted: bool) -> bool:
    if len(value) < 6 or len(value) > 512:
        return False
    if _is_placeholder(value) or "://" in value or value.count(" ") >= 2:
        return False
    if _ENV_NAME.fullmatch(value) or _DOTTED.fullmatch(value):
        return False
    if not quoted and any(c in value for c in "([{"):
        return False
    return _classes(value) >= 2


# --------------------------------------------------------------------------------------------
# Line rules: a regex whose group ``s`` is the secret, and a check on that value


@dataclass(frozen=True, slots=True)
class _Rule:
    id: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool]


_B = r"(?<![A-Za-z0-9_])"  # token start: not inside a longer word
_E = r"(?![A-Za-z0-9_])"  # token end

_VENDOR_RULES: tuple[_Rule, ...] = (
    _Rule(
        "aws-access-key-id",
        re.compile(_B + r"(?P<s>(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})" + _E),
        _vendor_ok,
    ),
    _Rule(
        "aws-secret-access-key",
        re.compile(
            r"(?i:aws_?secret(?:_?access)?_?key|secret_?access_?key)[\"']?\s*(?::=|=>|=|:)\s*"
            r"[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        _mixed_ok,
    ),
    _Rule(
        "github-token",
        re.compile(
            _B + r"(?P<s>gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{40,240})" + _E
        ),
        _vendor_ok,
    ),
    _Rule("gitlab-token", re.compile(_B + r"(?P<s>glpat-[A-Za-z0-9_-]{20,80})" + _E), _vendor_ok),
    _Rule(
        "slack-token",
        re.compile(_B + r"(?P<s>xox[abpr]-[0-9]{6,20}-[A-Za-z0-9-]{8,200})" + _E),
        _vendor_ok,
    ),
    _Rule(
        "slack-webhook",
        re.compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"(?P<s>T[A-Z0-9]{6,16}/[A-Z0-9]{6,16}/[A-Za-z0-9]{16,64})"
        ),
        _vendor_ok,
    ),
    _Rule(
        "stripe-key",
        re.compile(_B + r"(?P<s>[sr]k_(?:live|test)_[A-Za-z0-9]{20,247})" + _E),
        _mixed_ok,
    ),
    _Rule(
        "google-api-key", re.compile(r"(?<![\w-])(?P<s>AIza[A-Za-z0-9_-]{35})(?![\w-])"), _vendor_ok
    ),
    _Rule(
        "anthropic-key",
        re.compile(r"(?<![\w-])(?P<s>sk-ant-[a-z]{3,8}[0-9]{2}-[A-Za-z0-9_-]{32,400})(?![\w-])"),
        _vendor_ok,
    ),
    _Rule(
        "openai-key",
        re.compile(
            r"(?<![\w-])(?P<s>sk-(?!ant-)(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{32,400})(?![\w-])"
        ),
        lambda v: _vendor_ok(v) and _classes(v[3:].replace("-", "").replace("_", "")) >= 3,
    ),
    _Rule("npm-token", re.compile(_B + r"(?P<s>npm_[A-Za-z0-9]{36})" + _E), _mixed_ok),
    _Rule(
        "pypi-token",
        re.compile(r"(?<![\w-])(?P<s>pypi-AgE[A-Za-z0-9_-]{50,400})(?![\w-])"),
        _vendor_ok,
    ),
    _Rule(
        "jwt",
        re.compile(
            r"(?<![\w-])(?P<s>eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{16,1024})"
            r"(?![\w-])"
        ),
        _vendor_ok,
    ),
)

_URL_PASSWORD_PLACEHOLDERS = frozenset({"pass", "pw", "pwd", "passwd", "password", "secret", "x"})


def _url_password_ok(value: str) -> bool:
    low = value.lower()
    return not (
        low in _URL_PASSWORD_PLACEHOLDERS
        or low.startswith(("$", "%", "{", "<", ":"))
        or _is_placeholder(value)
        or low == "*" * len(low)
    )


_CONTEXT_RULES: tuple[_Rule, ...] = (
    _Rule(
        "url-credentials",
        re.compile(
            r"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://(?P<u>[^\s:/@\"'`]{0,64}):(?!(?P=u)@)"
            r"(?P<s>[^\s@/\"'`]{1,128})@"
            r"[A-Za-z0-9\[]"
        ),
        _url_password_ok,
    ),
    _Rule(
        "auth-header",
        re.compile(
            r"(?i:\b(?:proxy-)?authorization)[\"']?\s*[:=,]\s*[\"']?"
            r"(?i:bearer|basic|token)\s+(?P<s>[A-Za-z0-9._~+/-]{12,2048}=*)"
        ),
        lambda v: not _is_placeholder(v) and _classes(v) >= 2,
    ),
)

# secret-assignment: NAME <op> VALUE, with NAME ending in a credential word
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.])(?P<key>[A-Za-z_][A-Za-z0-9_.-]{0,80})[\"']?"
    r"(?:\s*:\s*[A-Za-z_][\w.\[\], |]{0,40}?(?=\s*=[^=]))?"  # an annotation: `password: str = ...`
    r"\s*(?::=|=>|\?=|(?<![=!<>])=(?![=>~])|:(?![:/=]))\s*"
    r"(?:\"(?P<dq>[^\"\n]{0,513})\"|'(?P<sq>[^'\n]{0,513})'|`(?P<bq>[^`\n]{0,513})`"
    r"|(?P<uv>[^\s\"'`,;&)}\]<>]{1,513}))"
)
_KEY_WORDS = (
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "signingkey",
    "encryptionkey",
    "masterkey",
    "authkey",
    "credential",
    "credentials",
)
_KEY_NOT_CREDENTIAL = (
    "pagetoken",
    "nexttoken",
    "continuationtoken",
    "synctoken",
    "resumetoken",
    "csrftoken",
    "xsrftoken",
    "cancellationtoken",
)


def _credential_key(key: str) -> bool:
    norm = "".join(c for c in key.lower() if c.isalnum()).rstrip("0123456789")
    return norm.endswith(_KEY_WORDS) and not norm.endswith(_KEY_NOT_CREDENTIAL)


# --------------------------------------------------------------------------------------------
# high-entropy


_ENTROPY_RUN = re.compile(r"[A-Za-z0-9+/=_-]{20,}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_DIGEST_PREFIX = re.compile(r"(?:sha1|sha224|sha256|sha384|sha512|md5)[-_:]", re.IGNORECASE)
_NOT_SECRET_BEFORE = re.compile(
    r"(?:base64,|h1:|sha\d{1,3}:|md5:|ssh-(?:rsa|dss|ed25519)\s+|ecdsa-sha2-nistp\d+\s+)$"
)
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+){2,}")
_ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_WORDY = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}")


def _shannon(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _entropy_candidate(token: str, before: str, ratio: float) -> bool:
    body = token.rstrip("=")
    if len(body) < ENTROPY_MIN_LENGTH:
        return False
    bare = body.replace("-", "").replace("_", "")
    if _HEX.fullmatch(bare):  # digests, git object ids, UUIDs: hex is not judged by entropy
        return False
    if _DIGEST_PREFIX.match(body) or _NOT_SECRET_BEFORE.search(before):
        return False
    if body.startswith(("pk_live_", "pk_test_")):  # Stripe publishable keys are public
        return False
    if _SLUG.fullmatch(body):  # k8s pod names, image tags, slugs: lowercase words and ids
        return False
    if _ULID.fullmatch(body):  # sortable ids: a timestamp and randomness, not a credential
        return False
    if "/" in body and all(_WORDY.fullmatch(part) for part in body.split("/") if part):
        return False  # a path made of words
    has_lower = any(c.islower() for c in body)
    has_upper = any(c.isupper() for c in body)
    has_digit = any(c.isdigit() for c in body)
    if has_lower + has_upper + has_digit < 2 or not has_digit:
        return False
    words = sum(len(m.group()) for m in _WORDY.finditer(body))
    if words >= 0.6 * len(body):  # identifiers and prose
        return False
    return _shannon(body) >= ratio * math.log2(min(len(body), 64))


# --------------------------------------------------------------------------------------------
# Lines of a diff


class _Kind(Enum):
    CODE = "code"  # only quoted values count in assignments
    CONFIG = "config"  # quoted or bare values count
    LOCKFILE = "lockfile"  # like config, and the entropy rule is off


# fmt: off
_CODE_EXTENSIONS = frozenset({
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".kt",
    ".kts", ".scala", ".rb", ".php", ".cs", ".c", ".h", ".cc", ".cpp", ".hpp", ".swift", ".m",
    ".mm", ".lua", ".pl", ".dart", ".ex", ".exs", ".erl", ".clj", ".groovy", ".vue", ".svelte",
    ".r", ".jl",
})
_LOCKFILES = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock",
    "Pipfile.lock", "uv.lock", "pdm.lock", "Cargo.lock", "go.sum", "Gemfile.lock",
    "composer.lock", "flake.lock", "mix.lock", "Podfile.lock", "packages.lock.json",
    "gradle.lockfile", "bun.lock",
})
# fmt: on


def _kind_of(path: str | None) -> _Kind:
    if path is None:
        return _Kind.CONFIG
    name = posixpath.basename(path)
    if name in _LOCKFILES or name.endswith(".lock"):
        return _Kind.LOCKFILE
    if posixpath.splitext(name)[1].lower() in _CODE_EXTENSIONS:
        return _Kind.CODE
    return _Kind.CONFIG


@dataclass(frozen=True, slots=True)
class _Line:
    number: int  # 1-based
    start: int  # offset of the content (after the diff marker) in the whole text
    text: str  # the content, without the marker and without the line break
    kind: _Kind
    run: int  # lines with the same run id are consecutive scannable lines


_HUNK = re.compile(r"@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")


def _plain_lines(text: str) -> Iterator[_Line]:
    offset = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        yield _Line(number, offset, raw, _Kind.CONFIG, 0)
        offset += len(raw) + 1


def _added_lines(patch: str) -> Iterator[_Line]:
    """The added lines of a unified diff, tracking hunk lengths so that an added line whose
    content starts with ``++`` is still an added line, and ``+++`` headers are not."""
    offset = 0
    old = new = 0
    path: str | None = None
    run = 0
    for number, raw in enumerate(patch.split("\n"), start=1):
        in_hunk = old > 0 or new > 0
        marker = raw[:1]
        if in_hunk and marker in ("+", "-", " ", "\\", ""):
            if marker == "+":
                new -= 1
                yield _Line(number, offset + 1, raw[1:], _kind_of(path), run)
            else:
                run += 1
                if marker == "-":
                    old -= 1
                elif marker != "\\":
                    old -= 1
                    new -= 1
        else:
            run += 1
            old = new = 0
            if raw.startswith("+++ "):
                target = raw[4:].split("\t")[0].strip().strip('"')
                path = None if target == "/dev/null" else target.removeprefix("b/")
            elif raw.startswith("diff --git "):
                path = None
            elif (hunk := _HUNK.match(raw)) is not None:
                old = int(hunk.group("old") or 1)
                new = int(hunk.group("new") or 1)
        offset += len(raw) + 1


# --------------------------------------------------------------------------------------------
# The scan


@dataclass(frozen=True, slots=True)
class _Hit:
    rule: str
    line: int
    edits: tuple[tuple[int, int], ...]  # absolute spans replaced by the marker, one per line
    value: str


_PEM_BEGIN = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40})-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}-----")
_PEM_INLINE_BODY = re.compile(r"(?P<s>[^\"'`]*?)(?=-----END|[\"'`]|$)")


def _is_private(label: str) -> bool:
    return label.endswith("PRIVATE KEY") or label.endswith("PRIVATE KEY BLOCK")


def _scan_lines(lines: list[_Line], ratio: float) -> list[_Hit]:
    hits: list[_Hit] = []
    block: list[_Line] | None = None  # body lines of an open private key block
    public_run: int | None = None  # run id inside an open public PEM block (entropy off)
    previous_run = -1

    def close_block() -> None:
        nonlocal block
        if block:
            edits = []
            for body in block:
                stripped = body.text.strip()
                if stripped:
                    lead = len(body.text) - len(body.text.lstrip())
                    edits.append((body.start + lead, body.start + lead + len(stripped)))
            if edits:
                value = "".join(b.text.strip() for b in block)
                hits.append(_Hit("private-key", block[0].number, tuple(edits), value))
        block = None

    for line in lines:
        if line.run != previous_run:
            close_block()
            public_run = None
            previous_run = line.run
        if block is not None:
            if _PEM_END.search(line.text):
                close_block()
            else:
                block.append(line)
            continue
        if public_run is not None:
            if _PEM_END.search(line.text):
                public_run = None
            continue
        begin = _PEM_BEGIN.search(line.text)
        if begin is not None:
            rest = line.text[begin.end() :]
            if _is_private(begin.group("label")):
                body = _PEM_INLINE_BODY.match(rest)
                if body is not None and len(body.group("s").strip()) >= 16:
                    s, e = begin.end() + body.start("s"), begin.end() + body.end("s")
                    hits.append(
                        _Hit("private-key", line.number, ((line.start + s, line.start + e),), rest)
                    )
                elif not _PEM_END.search(rest):
                    block = []
                continue
            if not _PEM_END.search(rest):
                public_run = line.run
            continue
        hits.extend(_scan_line(line, ratio))
    close_block()
    return hits


def _scan_line(line: _Line, ratio: float) -> Iterator[_Hit]:
    # spans claimed by a rule (flagged or deliberately cleared): disjoint, sorted by start
    starts: list[int] = []
    ends: list[int] = []

    def claim(start: int, end: int) -> bool:
        i = bisect.bisect_right(starts, start)
        if (i > 0 and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            return False
        starts.insert(i, start)
        ends.insert(i, end)
        return True

    text = line.text
    for rule in (*_VENDOR_RULES, *_CONTEXT_RULES):
        for found in rule.pattern.finditer(text):
            s, e = found.span("s")
            if claim(s, e) and rule.check(found.group("s")):
                yield _hit(rule.id, line, s, e)
    pos = 0
    while (m := _ASSIGNMENT.search(text, pos)) is not None:
        if not _credential_key(m.group("key")):
            pos = m.end("key")  # the value may itself be a name: `$ENV:ADMIN_PASSWORD = '…'`
            continue
        pos = m.end()
        group = next(g for g in ("dq", "sq", "bq", "uv") if m.group(g) is not None)
        quoted = group != "uv"
        if not quoted and line.kind is _Kind.CODE and not text[: m.start()].endswith(("?", "&")):
            continue  # in code a bare right-hand side is an expression, not a value
        s, e = m.span(group)
        if claim(s, e) and _assignment_value_ok(m.group(group), quoted=quoted):
            yield _hit("secret-assignment", line, s, e)
    if line.kind is _Kind.LOCKFILE:
        return
    for m in _ENTROPY_RUN.finditer(text):
        s, e = m.span()
        while s < e and text[s] in "+/=_-":
            s += 1
        while e > s and text[e - 1] in "/_-":
            e -= 1
        token = text[s:e]
        if _entropy_candidate(token, text[max(0, s - 24) : s], ratio) and claim(s, e):
            yield _hit("high-entropy", line, s, e)


def _hit(rule: str, line: _Line, start: int, end: int) -> _Hit:
    return _Hit(rule, line.number, ((line.start + start, line.start + end),), line.text[start:end])


def _check_input(text: str) -> None:
    if not isinstance(text, str):
        raise RedactionError("the input is not text (expected str)")
    if len(text) > MAX_INPUT_CHARS:
        raise RedactionError(f"the input is longer than the scan limit of {MAX_INPUT_CHARS} chars")
    if "\x00" in text:
        raise RedactionError("the input contains NUL characters: binary content is not text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RedactionError("the input holds unpaired surrogates: it is not valid text") from None


def _run(text: str, *, diff: bool, ratio: float) -> Redaction:
    _check_input(text)
    lines = list(_added_lines(text) if diff else _plain_lines(text))
    hits = sorted(_scan_lines(lines, ratio), key=lambda h: h.edits[0])
    findings = tuple(
        Finding(h.rule, h.line, h.edits[0][0], h.edits[-1][1], _fingerprint(h.value)) for h in hits
    )
    edits = sorted((span, f"[REDACTED:{h.rule}]") for h in hits for span in h.edits)
    out: list[str] = []
    cursor = 0
    for (start, end), marker in edits:
        out.append(text[cursor:start])
        out.append(marker)
        cursor = end
    out.append(text[cursor:])
    return Redaction("".join(out), findings)


RULE_IDS: tuple[str, ...] = (
    *(r.id for r in _VENDOR_RULES),
    "private-key",
    *(r.id for r in _CONTEXT_RULES),
    "secret-assignment",
    "high-entropy",
)


def scan(text: str, *, entropy_ratio: float = ENTROPY_RATIO) -> list[Finding]:
    """Findings in plain text: every line is scanned."""
    return list(_run(text, diff=False, ratio=entropy_ratio).findings)


def scan_patch(patch: str, *, entropy_ratio: float = ENTROPY_RATIO) -> list[Finding]:
    """Findings on the added lines of a unified diff."""
    return list(_run(patch, diff=True, ratio=entropy_ratio).findings)


def redact_text(text: str, *, entropy_ratio: float = ENTROPY_RATIO) -> Redaction:
    """Plain text with every finding replaced by ``[REDACTED:<rule-id>]``."""
    return _run(text, diff=False, ratio=entropy_ratio)


def redact_patch(patch: str, *, entropy_ratio: float = ENTROPY_RATIO) -> Redaction:
    """A unified diff with every finding on an added line replaced by ``[REDACTED:<rule-id>]``;
    context and removed lines are untouched and the line structure is unchanged."""
    return _run(patch, diff=True, ratio=entropy_ratio)
