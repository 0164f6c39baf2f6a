"""Which destinations a child under ``network = "restricted"`` may reach. Pure: no DNS, no I/O.

A :class:`NetworkPolicy` is data: allowed host patterns, denied host patterns and named port
forwards. :func:`decide` turns one request (host, port, the addresses the host resolved to) into
a :class:`Decision`, in this order:

1. the host must be a canonical host name or IP literal, the port 1–65535;
2. a host matching a denied pattern is refused (denied wins over everything);
3. a named forward (``model``) is allowed to its own loopback port on the host, nothing else;
4. a host matching no allowed pattern is refused;
5. the addresses: none → refused; one matching a denied IP → refused; one that is not global
   (loopback, private, link-local, cloud metadata, multicast, reserved …) → refused unless the
   host is listed *exactly* (not through ``*.``) in the allowed patterns;
6. allowed: :attr:`Decision.targets` are the exact addresses that were checked, and the proxy
   connects to those and nowhere else, so a second DNS answer cannot change the destination.

Patterns are ``example.com`` (that host only), ``*.example.com`` (any subdomain, not
``example.com`` itself) or an IP literal (that address only).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from supervisor.sandbox.profile import SandboxProfile

__all__ = [
    "FORWARD_ADDRESS",
    "Decision",
    "IPAddress",
    "NetworkPolicy",
    "PortForward",
    "address_category",
    "decide",
    "needs_resolution",
    "parse_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

FORWARD_ADDRESS = "127.0.0.1"
"""Where every named forward points: the host's IPv4 loopback."""

# Ordered: the first table entry an address falls in names it in the refusal.
_NON_GLOBAL: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cloud metadata", ("169.254.169.254/32", "fd00:ec2::254/128")),
    ("loopback", ("127.0.0.0/8", "::1/128")),
    ("unspecified", ("0.0.0.0/8", "::/128")),
    ("private", ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")),
    ("shared address space", ("100.64.0.0/10",)),
    ("link-local", ("169.254.0.0/16", "fe80::/10")),
    ("site-local", ("fec0::/10",)),
    ("multicast", ("224.0.0.0/4", "ff00::/8")),
    ("reserved", ("240.0.0.0/4", "192.0.0.0/24", "198.18.0.0/15", "::/96", "100::/64")),
    ("documentation", ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")),
)
_CATEGORIES: tuple[tuple[str, tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]], ...] = (
    tuple((name, tuple(ipaddress.ip_network(n) for n in nets)) for name, nets in _NON_GLOBAL)
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_FORWARD_NAME = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?")


def parse_host(host: str) -> str | IPAddress:
    """A request's host → a lower-case name without trailing dot, or an IP address.

    Raises ``ValueError`` for anything else, including the numeric shapes ``getaddrinfo``
    would still read as an address (``127.1``, ``0x7f000001``, ``2130706433``), so an address
    can only ever arrive as a canonical literal and is checked as one.
    """
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        inner = h[1:-1]
        if "%" in inner:
            raise ValueError(f"{host!r} carries an interface scope")
        return ipaddress.IPv6Address(inner)
    if h.endswith(".") and not h.endswith(".."):
        h = h[:-1]
    if not h:
        raise ValueError("the host is empty")
    try:
        return ipaddress.ip_address(h)
    except ValueError:
        pass
    if len(h) > 253 or not _NAME.fullmatch(h):
        raise ValueError(f"{host!r} is not a host name or an IP address")
    if _NUMERIC_LABEL.fullmatch(h.rsplit(".", 1)[-1]):
        raise ValueError(f"{host!r} is an IP address in a non-canonical form")
    return h


def address_category(addr: IPAddress) -> str | None:
    """Why ``addr`` is not a public internet address (``"private"``, ``"loopback"`` …), or
    None when it is one. An IPv6 address that embeds an IPv4 one (mapped, 6to4, Teredo,
    NAT64) is judged by the embedded address as well."""
    if isinstance(addr, ipaddress.IPv6Address) and addr.scope_id is not None:
        addr = ipaddress.IPv6Address(str(addr).split("%", 1)[0])
    for name, networks in _CATEGORIES:
        if any(addr in net for net in networks if net.version == addr.version):
            return name
    if isinstance(addr, ipaddress.IPv6Address):
        for inner in _embedded_ipv4(addr):
            category = address_category(inner)
            if category is not None:
                return f"{category}, embedded {inner}"
    if not addr.is_global:
        return "not global"
    return None


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found: list[ipaddress.IPv4Address] = []
    if addr.ipv4_mapped is not None:
        found.append(addr.ipv4_mapped)
    if addr.sixtofour is not None:
        found.append(addr.sixtofour)
    if addr.teredo is not None:
        found.extend(addr.teredo)
    if addr in _NAT64:
        found.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    return found


def _normalize_pattern(pattern: str) -> str:
    """An allowed/denied entry → its canonical text; ``ValueError`` when it is not one."""
    if pattern.startswith("*."):
        suffix = parse_host(pattern[2:])
        if not isinstance(suffix, str):
            raise ValueError(f"{pattern!r}: a wildcard cannot stand before an IP address")
        return "*." + suffix
    return str(parse_host(pattern))


class PortForward(BaseModel):
    """A name the sandbox can reach on the host's loopback: ``model`` → 127.0.0.1:``port``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(
        description="A single DNS-style label (no dot, not 'localhost'), so it can never be a"
        " real host on the internet."
    )
    port: int = Field(ge=1, le=65535, description="The port on the host's 127.0.0.1.")

    @field_validator("name")
    @classmethod
    def _name_is_a_label(cls, v: str) -> str:
        if not _FORWARD_NAME.fullmatch(v) or v == "localhost":
            raise ValueError(
                f"{v!r} is not a forward name: use one lower-case label such as 'model'"
                " (letters, digits, '-'; no dot; not 'localhost')"
            )
        return v


class NetworkPolicy(BaseModel):
    """Where a restricted child may connect, built up from nothing: an empty policy refuses
    every destination."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed: tuple[str, ...] = Field(
        default=(),
        description="Host patterns let through: 'host', '*.suffix' or an IP literal. Empty"
        " means nothing is let through.",
    )
    denied: tuple[str, ...] = Field(
        default=(),
        description="Host patterns refused even when allowed matches them. Empty means no"
        " exception.",
    )
    forwards: tuple[PortForward, ...] = Field(
        default=(), description="Named forwards to the host's loopback. Empty means none."
    )

    @field_validator("allowed", "denied")
    @classmethod
    def _patterns(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for pattern in v:
            if pattern in ("*", "*."):
                raise ValueError(
                    "'*' would allow every host; list the hosts, or use network = \"open\""
                )
            out.append(_normalize_pattern(pattern))
        return tuple(dict.fromkeys(out))

    @model_validator(mode="after")
    def _forward_names_are_unique(self) -> NetworkPolicy:
        names = [f.name for f in self.forwards]
        if len(set(names)) != len(names):
            raise ValueError("a forward name is used twice")
        for name in names:
            if name in self.allowed or name in self.denied:
                raise ValueError(
                    f"{name!r} is both a forward and an allowed or denied host; rename the forward"
                )
        return self

    @classmethod
    def from_profile(
        cls, profile: SandboxProfile, forwards: Iterable[PortForward] = ()
    ) -> NetworkPolicy:
        """The policy of a ``network = "restricted"`` profile, plus the run's forwards."""
        from supervisor.sandbox.profile import NetworkMode, SandboxRefused

        if profile.network is not NetworkMode.RESTRICTED:
            raise SandboxRefused(
                f'profile {profile.name!r} has network = "{profile.network.value}"; a proxy'
                ' policy only applies to network = "restricted"'
            )
        return cls(
            allowed=profile.allowed_domains,
            denied=profile.denied_domains,
            forwards=tuple(forwards),
        )

    def decide(self, host: str, port: int, resolved: Sequence[str]) -> Decision:
        """Shorthand for :func:`decide` on this policy."""
        return decide(self, host, port, resolved)


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer for one request. ``targets`` are the (address, port) pairs the proxy may
    connect to: empty exactly when ``allow`` is false."""

    allow: bool
    reason: str
    targets: tuple[tuple[str, int], ...] = ()


def _deny(reason: str) -> Decision:
    return Decision(allow=False, reason=reason)


def _match(host: str | IPAddress, patterns: Sequence[str]) -> str | None:
    """The pattern ``host`` matches, the exact entry before any wildcard; None when none does."""
    text = str(host)
    if text in patterns:
        return text
    if isinstance(host, str):
        return next((p for p in patterns if p.startswith("*.") and text.endswith(p[1:])), None)
    return None


def _forward(policy: NetworkPolicy, host: str | IPAddress) -> PortForward | None:
    return next((f for f in policy.forwards if f.name == host), None)


def needs_resolution(policy: NetworkPolicy, host: str) -> str | None:
    """The name the proxy should resolve for ``host``, or None when :func:`decide` does not need
    addresses (an IP literal, a forward, or a host it refuses anyway). So a name the policy
    refuses never reaches DNS."""
    try:
        parsed = parse_host(host)
    except ValueError:
        return None
    if not isinstance(parsed, str) or _forward(policy, parsed) is not None:
        return None
    if _match(parsed, policy.denied) is not None or _match(parsed, policy.allowed) is None:
        return None
    return parsed


def decide(policy: NetworkPolicy, host: str, port: int, resolved: Sequence[str]) -> Decision:
    """Whether a request for ``host``:``port`` may go out, given the addresses ``host`` resolved
    to (ignored for IP literals and forwards). See the module docstring for the order."""
    try:
        parsed = parse_host(host)
    except ValueError as exc:
        return _deny(str(exc))
    if not 1 <= port <= 65535:
        return _deny(f"port {port} is out of range")
    if (pattern := _match(parsed, policy.denied)) is not None:
        return _deny(f"{parsed} matches the denied pattern {pattern}")
    if (fwd := _forward(policy, parsed)) is not None:
        if port != fwd.port:
            return _deny(f"{fwd.name} is a forward to port {fwd.port}, not {port}")
        return Decision(
            True,
            f"named forward {fwd.name} → {FORWARD_ADDRESS}:{fwd.port}",
            ((FORWARD_ADDRESS, port),),
        )
    if (pattern := _match(parsed, policy.allowed)) is None:
        return _deny(f"{parsed} is not in the allowed list")

    if isinstance(parsed, str):
        addresses: list[IPAddress] = []
        for text in dict.fromkeys(resolved):
            try:
                addresses.append(ipaddress.ip_address(text))
            except ValueError:
                return _deny(f"{parsed} resolved to {text!r}, which is not an IP address")
        if not addresses:
            return _deny(f"{parsed} did not resolve to any address")
    else:
        addresses = [parsed]

    exact = pattern == str(parsed)
    for addr in addresses:
        if (denied := _match(addr, policy.denied)) is not None:
            return _deny(f"{parsed} resolves to {addr}, which matches the denied pattern {denied}")
        category = address_category(addr)
        if category is not None and not exact:
            what = "is" if addr == parsed else f"resolves to {addr},"
            return _deny(
                f"{parsed} {what} not a public address ({category}); only a host listed"
                " exactly in the allowed list may reach such an address"
            )
    return Decision(
        True, f"{parsed} is allowed by {pattern}", tuple((str(a), port) for a in addresses)
    )
