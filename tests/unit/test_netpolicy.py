"""netpolicy: host parsing, address categories and decide(), by table."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from supervisor.sandbox.netpolicy import (
    Decision,
    NetworkPolicy,
    PortForward,
    address_category,
    decide,
    needs_resolution,
    parse_host,
)
from supervisor.sandbox.profile import NetworkMode, SandboxProfile, SandboxRefused, WorktreeAccess

PUBLIC4 = "93.184.216.34"
PUBLIC6 = "2606:2800:220:1:248:1893:25c8:1946"

POLICY = NetworkPolicy(
    allowed=(
        "api.example.com",
        "*.cdn.example",
        "*.corp.example",
        "db.corp.example",
        "10.1.2.3",
        "2001:db8::7",
        "localhost",
        "metadata.internal",
        "public.example",
    ),
    denied=("evil.cdn.example", "*.blocked.cdn.example", "203.0.113.9", "93.184.216.99"),
    forwards=(PortForward(name="model", port=8080), PortForward(name="mcp", port=9000)),
)


# --- parse_host -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("example.com", "example.com"),
        ("Example.COM", "example.com"),
        ("example.com.", "example.com"),
        ("  example.com ", "example.com"),
        ("a-b.c_d.example", "a-b.c_d.example"),
        ("localhost", "localhost"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("1.2.3.4", ipaddress.IPv4Address("1.2.3.4")),
        ("::1", ipaddress.IPv6Address("::1")),
        ("[::1]", ipaddress.IPv6Address("::1")),
        ("[2001:DB8:0:0::1]", ipaddress.IPv6Address("2001:db8::1")),
        ("123.example", "123.example"),
        ("a" * 63 + ".example", "a" * 63 + ".example"),
    ],
)
def test_parse_host_accepts(raw: str, parsed: object) -> None:
    assert parse_host(raw) == parsed


@pytest.mark.parametrize(
    "raw",
    [
        "",
        ".",
        "example..com",
        "example.com..",
        "-example.com",
        "example-.com",
        "exa mple.com",
        "user@example.com",
        "example.com/path",
        "example.com:443",
        "bücher.example",
        "a" * 64 + ".example",
        ".".join(["a" * 63] * 4) + ".ab",
        "127.1",
        "127.0.0.01",
        "2130706433",
        "0x7f000001",
        "0x7f.0.0.1",
        "example.0x1",
        "1.2.3.4.5",
        "[fe80::1%eth0]",
        "[1.2.3.4]",
        "[example.com]",
        "*.example.com",
    ],
)
def test_parse_host_refuses(raw: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - every refusal is a ValueError
        parse_host(raw)


# --- address_category -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("addr", "category"),
    [
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("100.64.0.1", "shared address space"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fec0::1", "site-local"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.0.8", "reserved"),
        ("198.18.0.1", "reserved"),
        ("::7f00:1", "reserved"),
        ("192.0.2.1", "documentation"),
        ("198.51.100.1", "documentation"),
        ("203.0.113.1", "documentation"),
        ("2001:db8::1", "documentation"),
        ("::ffff:127.0.0.1", "loopback, embedded 127.0.0.1"),
        ("::ffff:10.0.0.1", "private, embedded 10.0.0.1"),
        ("::ffff:169.254.169.254", "cloud metadata, embedded 169.254.169.254"),
        ("2002:a00:1::1", "private, embedded 10.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "cloud metadata, embedded 169.254.169.254"),
        ("64:ff9b::c0a8:101", "private, embedded 192.168.1.1"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "documentation, embedded 192.0.2.45"),
        ("2001:2::1", "not global"),
    ],
)
def test_address_category_names_non_global_addresses(addr: str, category: str) -> None:
    assert address_category(ipaddress.ip_address(addr)) == category


@pytest.mark.parametrize(
    "addr",
    [PUBLIC4, "1.1.1.1", "8.8.8.8", "172.32.0.1", "100.128.0.1", PUBLIC6, "2a00:1450::1"],
)
def test_address_category_is_none_for_public_addresses(addr: str) -> None:
    assert address_category(ipaddress.ip_address(addr)) is None


# --- decide -----------------------------------------------------------------------------------

ALLOW_CASES: list[tuple[str, int, list[str], str, tuple[tuple[str, int], ...]]] = [
    ("api.example.com", 443, [PUBLIC4], "allowed by api.example.com", ((PUBLIC4, 443),)),
    ("API.EXAMPLE.COM.", 443, [PUBLIC4], "allowed by api.example.com", ((PUBLIC4, 443),)),
    (
        "api.example.com",
        443,
        [PUBLIC4, PUBLIC6, PUBLIC4],
        "allowed by api.example.com",
        ((PUBLIC4, 443), (PUBLIC6, 443)),
    ),
    ("a.cdn.example", 80, [PUBLIC4], "allowed by *.cdn.example", ((PUBLIC4, 80),)),
    ("a.b.cdn.example", 8443, [PUBLIC6], "allowed by *.cdn.example", ((PUBLIC6, 8443),)),
    # listed exactly: a private, loopback or metadata address is let through
    ("db.corp.example", 5432, ["10.0.0.5"], "allowed by db.corp.example", (("10.0.0.5", 5432),)),
    (
        "localhost",
        8000,
        ["127.0.0.1", "::1"],
        "allowed by localhost",
        (("127.0.0.1", 8000), ("::1", 8000)),
    ),
    (
        "metadata.internal",
        80,
        ["169.254.169.254"],
        "allowed by metadata.internal",
        (("169.254.169.254", 80),),
    ),
    ("10.1.2.3", 22, [], "allowed by 10.1.2.3", (("10.1.2.3", 22),)),
    ("[2001:db8::7]", 443, [], "allowed by 2001:db8::7", (("2001:db8::7", 443),)),
    ("2001:0db8::0007", 443, [PUBLIC4], "allowed by 2001:db8::7", (("2001:db8::7", 443),)),
    ("model", 8080, [], "named forward model → 127.0.0.1:8080", (("127.0.0.1", 8080),)),
    ("MCP", 9000, [PUBLIC4], "named forward mcp → 127.0.0.1:9000", (("127.0.0.1", 9000),)),
]


@pytest.mark.parametrize(("host", "port", "resolved", "reason", "targets"), ALLOW_CASES)
def test_decide_allows(
    host: str, port: int, resolved: list[str], reason: str, targets: tuple[tuple[str, int], ...]
) -> None:
    d = decide(POLICY, host, port, resolved)
    assert d.allow, d.reason
    assert reason in d.reason
    assert d.targets == targets


DENY_CASES: list[tuple[str, int, list[str], str]] = [
    # malformed
    ("", 443, [PUBLIC4], "the host is empty"),
    ("127.1", 80, [], "non-canonical form"),
    ("0x7f000001", 80, [], "non-canonical form"),
    ("api.example.com/x", 443, [PUBLIC4], "not a host name or an IP address"),
    ("api.example.com", 0, [PUBLIC4], "port 0 is out of range"),
    ("api.example.com", 65536, [PUBLIC4], "port 65536 is out of range"),
    # denied first, whatever else matches
    ("evil.cdn.example", 443, [PUBLIC4], "matches the denied pattern evil.cdn.example"),
    ("x.blocked.cdn.example", 443, [PUBLIC4], "denied pattern *.blocked.cdn.example"),
    ("203.0.113.9", 443, [], "denied pattern 203.0.113.9"),
    ("a.cdn.example", 443, [PUBLIC4, "93.184.216.99"], "matches the denied pattern 93.184.216.99"),
    # not allowed
    ("example.com", 443, [PUBLIC4], "not in the allowed list"),
    ("cdn.example", 443, [PUBLIC4], "not in the allowed list"),
    ("xcdn.example", 443, [PUBLIC4], "not in the allowed list"),
    ("api.example.com.evil.test", 443, [PUBLIC4], "not in the allowed list"),
    ("x.api.example.com", 443, [PUBLIC4], "not in the allowed list"),
    ("1.1.1.1", 443, [], "not in the allowed list"),
    ("[::1]", 443, [], "not in the allowed list"),
    ("127.0.0.1", 8080, [], "not in the allowed list"),
    ("models", 8080, [], "not in the allowed list"),
    # forwards: their own port only
    ("model", 80, [], "model is a forward to port 8080, not 80"),
    ("model", 9000, [], "forward to port 8080, not 9000"),
    # resolution
    ("api.example.com", 443, [], "did not resolve to any address"),
    ("api.example.com", 443, ["not-an-ip"], "resolved to 'not-an-ip'"),
    # allowed by a wildcard, but the name leads somewhere not public
    ("x.corp.example", 443, ["10.0.0.1"], "resolves to 10.0.0.1, not a public address (private)"),
    ("a.cdn.example", 443, ["127.0.0.1"], "(loopback)"),
    ("a.cdn.example", 443, ["::1"], "(loopback)"),
    ("a.cdn.example", 443, [PUBLIC4, "192.168.0.7"], "resolves to 192.168.0.7"),
    ("a.cdn.example", 443, [PUBLIC6, "fd00::1"], "(private)"),
    ("a.cdn.example", 443, ["169.254.169.254"], "(cloud metadata)"),
    ("a.cdn.example", 443, ["fd00:ec2::254"], "(cloud metadata)"),
    ("a.cdn.example", 443, ["169.254.10.10"], "(link-local)"),
    ("a.cdn.example", 443, ["fe80::1%2"], "(link-local)"),
    ("a.cdn.example", 443, ["0.0.0.0"], "(unspecified)"),
    ("a.cdn.example", 443, ["100.64.1.1"], "(shared address space)"),
    ("a.cdn.example", 443, ["224.0.0.251"], "(multicast)"),
    ("a.cdn.example", 443, ["::ffff:10.1.1.1"], "private, embedded 10.1.1.1"),
    ("a.cdn.example", 443, ["64:ff9b::7f00:1"], "loopback, embedded 127.0.0.1"),
    # an exact entry for a public name does not cover a different, wildcard-only name
    ("db2.corp.example", 443, ["10.0.0.5"], "(private)"),
]


@pytest.mark.parametrize(("host", "port", "resolved", "reason"), DENY_CASES)
def test_decide_denies(host: str, port: int, resolved: list[str], reason: str) -> None:
    d = decide(POLICY, host, port, resolved)
    assert not d.allow
    assert reason in d.reason
    assert d.targets == ()


def test_private_ip_literal_allowed_only_when_listed_exactly() -> None:
    policy = NetworkPolicy(allowed=("10.1.2.3", "*.example.com"))
    assert decide(policy, "10.1.2.3", 80, []).allow
    d = decide(policy, "10.1.2.4", 80, [])
    assert not d.allow
    assert "not in the allowed list" in d.reason


def test_public_host_allowed_by_wildcard_with_an_exact_entry_for_another() -> None:
    policy = NetworkPolicy(allowed=("*.example.com", "intranet.example.com"))
    assert decide(policy, "intranet.example.com", 443, ["10.9.9.9"]).allow
    assert not decide(policy, "www.example.com", 443, ["10.9.9.9"]).allow
    assert decide(policy, "www.example.com", 443, [PUBLIC4]).allow


def test_empty_policy_refuses_everything() -> None:
    empty = NetworkPolicy()
    for host, resolved in (("api.example.com", [PUBLIC4]), ("1.1.1.1", []), ("model", [])):
        d = decide(empty, host, 443, resolved)
        assert not d.allow
        assert "not in the allowed list" in d.reason


def test_decide_method_is_the_function() -> None:
    assert POLICY.decide("api.example.com", 443, [PUBLIC4]) == decide(
        POLICY, "api.example.com", 443, [PUBLIC4]
    )


# --- needs_resolution -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("api.example.com", "api.example.com"),
        ("A.CDN.example.", "a.cdn.example"),
        ("db.corp.example", "db.corp.example"),
        ("example.com", None),
        ("evil.cdn.example", None),
        ("model", None),
        ("10.1.2.3", None),
        ("1.1.1.1", None),
        ("[::1]", None),
        ("127.1", None),
        ("bad host", None),
    ],
)
def test_needs_resolution_only_for_names_the_policy_admits(host: str, name: str | None) -> None:
    assert needs_resolution(POLICY, host) == name


# --- the policy as data -----------------------------------------------------------------------


def test_patterns_are_normalised_and_deduplicated() -> None:
    policy = NetworkPolicy(
        allowed=("API.Example.com.", "api.example.com", "*.CDN.example", "2001:DB8:0::1"),
        denied=("[::1]",),
    )
    assert policy.allowed == ("api.example.com", "*.cdn.example", "2001:db8::1")
    assert policy.denied == ("::1",)


@pytest.mark.parametrize(
    "pattern",
    ["*", "*.", "*.1.2.3.4", "*.*.example.com", "example.*", "https://example.com", "a b", "127.1"],
)
def test_invalid_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(ValidationError):
        NetworkPolicy(allowed=(pattern,))
    with pytest.raises(ValidationError):
        NetworkPolicy(denied=(pattern,))


@pytest.mark.parametrize(
    ("name", "port"),
    [("a.b", 80), ("localhost", 80), ("Model", 80), ("-x", 80), ("x", 0), ("x", 65536), ("", 80)],
)
def test_invalid_forwards_are_refused(name: str, port: int) -> None:
    with pytest.raises(ValidationError):
        PortForward(name=name, port=port)


def test_forward_names_are_unique_and_distinct_from_hosts() -> None:
    with pytest.raises(ValidationError, match="used twice"):
        NetworkPolicy(forwards=(PortForward(name="m", port=1), PortForward(name="m", port=2)))
    with pytest.raises(ValidationError, match="both a forward and an allowed or denied host"):
        NetworkPolicy(allowed=("model",), forwards=(PortForward(name="model", port=1),))
    with pytest.raises(ValidationError, match="both a forward"):
        NetworkPolicy(denied=("model",), forwards=(PortForward(name="model", port=1),))


def test_policy_is_frozen() -> None:
    with pytest.raises(ValidationError):
        POLICY.allowed = ()  # type: ignore[misc]


def _profile(network: NetworkMode, allowed: tuple[str, ...] = ()) -> SandboxProfile:
    return SandboxProfile(
        name="p", worktree=WorktreeAccess.READ_ONLY, network=network, allowed_domains=allowed
    )


def test_from_profile_takes_the_domains_and_the_forwards() -> None:
    profile = SandboxProfile(
        name="p",
        worktree=WorktreeAccess.READ_ONLY,
        network=NetworkMode.RESTRICTED,
        allowed_domains=("api.anthropic.com", "*.example.com"),
        denied_domains=("bad.example.com",),
    )
    fwd = PortForward(name="model", port=4000)
    policy = NetworkPolicy.from_profile(profile, [fwd])
    assert policy == NetworkPolicy(
        allowed=("api.anthropic.com", "*.example.com"),
        denied=("bad.example.com",),
        forwards=(fwd,),
    )


@pytest.mark.parametrize("network", [NetworkMode.NONE, NetworkMode.OPEN])
def test_from_profile_refuses_other_modes(network: NetworkMode) -> None:
    with pytest.raises(SandboxRefused, match='only applies to network = "restricted"'):
        NetworkPolicy.from_profile(_profile(network))


# --- invariants over arbitrary input ----------------------------------------------------------

_hosts = st.one_of(
    st.sampled_from(
        ["api.example.com", "a.cdn.example", "db.corp.example", "model", "10.1.2.3", "localhost"]
    ),
    st.text(alphabet="abcdexyz0123456789.-_:[]*%@ ", max_size=30),
    st.ip_addresses().map(str),
)
_addresses = st.lists(
    st.one_of(st.ip_addresses().map(str), st.sampled_from(["", "x", "fe80::1%eth0"])), max_size=4
)


@settings(max_examples=400, deadline=None)
@given(host=_hosts, port=st.integers(-1, 70000), resolved=_addresses)
def test_decide_is_total_and_only_targets_checked_addresses(
    host: str, port: int, resolved: list[str]
) -> None:
    d = decide(POLICY, host, port, resolved)
    assert isinstance(d, Decision)
    assert d.allow == bool(d.targets)
    if not d.allow:
        return
    parsed = parse_host(host)
    exact = str(parsed) in POLICY.allowed or str(parsed) in {f.name for f in POLICY.forwards}
    for addr, target_port in d.targets:
        assert target_port == port
        assert exact or address_category(ipaddress.ip_address(addr)) is None
        assert isinstance(parsed, ipaddress.IPv4Address | ipaddress.IPv6Address) or (
            addr in resolved or addr == "127.0.0.1"
        )
