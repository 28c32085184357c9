"""Where a delivery send may connect: public addresses, and the internal hosts the admin
names (``WEBRACE_DELIVERY_ALLOW_HOSTS``), checked when the connection is made.

Every connection a send opens (Apprise's webhooks through requests and urllib3, mail through
smtplib, and any other library that calls ``socket.create_connection``) finds its addresses
with ``socket.getaddrinfo``. While a send runs, :func:`Guard.applied` makes that call go
through the guard: the name is resolved once (by ``Guard.resolver``), the answers that are
not allowed are dropped, and the connection is made to what remains, or refused when nothing
does. The addresses checked are the ones connected to: no second lookup a DNS rebinding
could answer differently. Integer and octal forms of an address (``2130706433``,
``0x7f.1``) come back from ``getaddrinfo`` as the address they stand for, so they are
checked as that; an IPv6 address that embeds an IPv4 one (mapped, 6to4, NAT64) is checked as
the IPv4 one.

The wrapper is installed once per process, on first use, and passes every other lookup
through untouched: the guard is a context variable, set only around a send. Apprise runs a
send with a time limit in a thread of its own, copying the context (so the guard goes with
it); a lookup made from Apprise's code in a context without a guard (a thread that did not
copy it) gets the strict guard, public addresses only: never none.

A proxy in the environment (``HTTPS_PROXY``) is where requests connects: it is checked, and
the name behind it is the proxy's to resolve; allow the proxy's host only if it is trusted
with that.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[..., list]  # socket.getaddrinfo's signature and answers

SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not global, not "private" in Python < 3.13
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: the last 32 bits are an IPv4 address
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use NAT64 (RFC 8215)
REFUSED = "refused: "  # how a send's error starts when the delivery policy or the guard refused it
MAX_FRAMES = 200  # how far up the stack a lookup is looked at for Apprise's code

_getaddrinfo = socket.getaddrinfo  # the real one, before the wrapper is installed
_current: contextvars.ContextVar[_Send | None] = contextvars.ContextVar("webrace_delivery_guard", default=None)
_installing = threading.Lock()
_installed = False


class Refused(socket.gaierror):
    """No address of the name may be connected to. A ``gaierror``, so that every library
    handles it as the name not resolving: the send fails, nothing is connected."""


def parse_address(text: str) -> Address | None:
    """``text`` as an IP address, in any form ``getaddrinfo`` reads as one (``[::1]``,
    ``fe80::1%eth0``, ``2130706433``, ``0x7f.1``, ``127.1``); None for a name."""
    text = text.strip().strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if not text or not all(c in "0123456789abcdefABCDEFxX." for c in text):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))  # the forms inet_aton (and getaddrinfo) accept
    except OSError:
        return None


def public(address: Address | str) -> bool:
    """Whether ``address`` is one the Internet routes to someone else: not private,
    loopback, link-local, site-local, multicast, reserved, unspecified or shared (100.64/10),
    and, for an IPv6 address embedding an IPv4 one, that IPv4 address neither."""
    ip = ipaddress.ip_address(address.split("%", 1)[0]) if isinstance(address, str) else address
    if ip.version == 6:
        embedded = ip.ipv4_mapped or ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
                                                       if ip in NAT64 else None)
        if embedded is not None:
            return public(embedded)
        if ip in NAT64_LOCAL or ip.is_site_local:
            return False
    return ip.is_global and not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
                                 or ip.is_reserved or ip.is_unspecified or ip in SHARED)


@dataclass(frozen=True)
class AllowList:
    """The internal hosts the admin allows: names (every address they resolve to) and
    addresses or networks (``10.0.0.5``, ``10.1.0.0/16``, ``fd00::/8``)."""

    names: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, value: Any) -> AllowList:
        """A list, or entries separated by commas; ValueError (one line) for a bad network."""
        entries = value.split(",") if isinstance(value, str) else list(value or ())
        names, networks = set(), []
        for entry in (str(e).strip() for e in entries):
            if not entry:
                continue
            address = parse_address(entry) if "/" not in entry else None
            if address is not None:
                networks.append(ipaddress.ip_network(address))
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if "/" in entry:
                    raise ValueError(f"WEBRACE_DELIVERY_ALLOW_HOSTS: {entry!r} is not a network "
                                     "(expected a host name, an address or a network such as 10.0.0.0/8)") from None
                names.add(_name(entry))
        return cls(frozenset(names), tuple(networks))

    def allows_address(self, address: Address) -> bool:
        mapped = address.ipv4_mapped if address.version == 6 else None
        return any(a in n for n in self.networks for a in (address, mapped) if a is not None and a.version == n.version)


@dataclass(frozen=True)
class Guard:
    """Which hosts and addresses a send may connect to, and how names are resolved
    (``resolver``: ``socket.getaddrinfo`` by default; tests give their own)."""

    allow: AllowList = AllowList()
    resolver: Resolver = _getaddrinfo

    def allows(self, host: str, address: str) -> bool:
        """May a connection to ``host`` go to ``address`` (one of its answers)?"""
        if _name(host) in self.allow.names:
            return True
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        return self.allow.allows_address(ip) or public(ip)

    def refusal(self, host: str) -> str | None:
        """Why a channel to ``host`` could never connect (None: it may), for the check when a
        channel is added: a literal address that is not allowed, or a name none of whose
        addresses is. A name that does not resolve now is left to the send."""
        name = _name(host)
        if not name or name in self.allow.names:
            return None
        literal = parse_address(name)
        if literal is not None:
            return None if self.allows(name, str(literal)) else _why(host, [str(literal)])
        try:
            answers = {a[4][0] for a in self.resolver(name, None, 0, socket.SOCK_STREAM)}
        except (OSError, UnicodeError):
            return None
        if answers and not any(self.allows(name, a) for a in answers):
            return _why(host, sorted(answers))
        return None

    def resolve(self, host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,  # noqa: A002
                flags: int = 0) -> list:
        """``getaddrinfo``'s answers for ``host`` that are allowed; :class:`Refused` if none is."""
        answers = self.resolver(host, port, family, type, proto, flags)
        name = host.decode() if isinstance(host, bytes) else str(host or "")
        kept = [a for a in answers if self.allows(name, str(a[4][0]))]
        if not kept:
            reason = _why(name, sorted({str(a[4][0]) for a in answers}))
            send = _current.get()
            if send is not None:
                send.refused.append(reason)
            raise Refused(socket.EAI_NONAME, f"refused by WebRACE's delivery guard: {reason}")
        return kept

    @contextlib.contextmanager
    def applied(self) -> Iterator[_Send]:
        """Every connection made in this context (and in contexts copied from it) is checked.
        Yields the send's record: ``refused`` lists what the guard refused."""
        install()
        send = _Send(self)
        token = _current.set(send)
        try:
            yield send
        finally:
            _current.reset(token)


STRICT = Guard()  # public addresses only: a lookup from Apprise's code outside any send's context


@dataclass
class _Send:
    guard: Guard
    refused: list[str] = field(default_factory=list)


def install() -> None:
    """Put the guarded ``getaddrinfo`` in the ``socket`` module (once per process)."""
    global _installed
    with _installing:
        if not _installed:
            socket.getaddrinfo = _guarded_getaddrinfo
            _installed = True


def _guarded_getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,  # noqa: A002
                         flags: int = 0) -> list:
    send = _current.get()
    if send is not None:
        return send.guard.resolve(host, port, family, type, proto, flags)
    if _from_apprise():
        return STRICT.resolve(host, port, family, type, proto, flags)
    return _getaddrinfo(host, port, family, type, proto, flags)


def _from_apprise() -> bool:
    """Is Apprise's code (or one of its threads) asking?"""
    if threading.current_thread().name.startswith("apprise"):
        return True
    frame = sys._getframe(1)
    for _ in range(MAX_FRAMES):
        if frame is None:
            return False
        if str(frame.f_globals.get("__name__", "")).startswith("apprise"):
            return True
        frame = frame.f_back
    return False


def _why(host: str, addresses: list[str]) -> str:
    """``127.0.0.1 is not a public address``, ``2130706433 is 127.0.0.1, ...``,
    ``hooks.example.com resolves to 127.0.0.1, ...``."""
    if not addresses:
        return f"{host or '(no host)'} has no address"
    if parse_address(host) is not None:
        same = _name(host) == addresses[0]
        return f"{host} is not a public address" if same else f"{host} is {addresses[0]}, not a public address"
    return f"{host or '(no host)'} resolves to {addresses[0]}, not a public address"


def _name(host: str) -> str:
    return host.strip().strip("[]").lower().rstrip(".")
