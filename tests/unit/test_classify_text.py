"""One classification of error texts and HTTP statuses, shared by every codec."""

from __future__ import annotations

import pytest

from supervisor.codecs.base import classify_error_text
from supervisor.events import FailureKind

CASES: list[tuple[str, int | None, FailureKind | None]] = [
    ("", 401, FailureKind.AUTH),
    ("", 403, FailureKind.AUTH),
    ("", 429, None),
    ("", 529, FailureKind.OVERLOADED),
    ("", 500, FailureKind.SERVER_ERROR),
    ("", 503, FailureKind.SERVER_ERROR),
    ("Failed to authenticate. API Error: 401 invalid x-api-key", None, FailureKind.AUTH),
    ("unexpected status 401 Unauthorized: bad key", None, FailureKind.AUTH),
    ("API Error: Overloaded", None, FailureKind.OVERLOADED),
    ("stream disconnected before completion: eof", None, FailureKind.STREAM_CUT),
    ("API Error: Connection closed mid-response", None, FailureKind.STREAM_CUT),
    (
        "We're currently experiencing high demand, which may cause temporary errors.",
        None,
        FailureKind.SERVER_ERROR,
    ),
    ("API Error: 500 Internal server error", None, FailureKind.SERVER_ERROR),
    ("You've hit your usage limit.", None, None),
    ("Rate limit reached for requests", None, None),
    ("connect ECONNREFUSED 127.0.0.1:9", None, FailureKind.NETWORK),
    ("something odd happened", None, FailureKind.UNKNOWN),
]


@pytest.mark.parametrize(("text", "status", "kind"), CASES)
def test_classify_error_text(text: str, status: int | None, kind: FailureKind | None) -> None:
    assert classify_error_text(text, status) is kind


def test_status_beats_text() -> None:
    assert classify_error_text("overloaded", 401) is FailureKind.AUTH
