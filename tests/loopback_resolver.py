"""A Twisted DNS resolver for tests: names under ``.test`` and ``localhost`` resolve to
127.0.0.1, every other name fails. Crawls in tests can then use several host names (for
scope tests) while no request can ever leave the machine."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer


@implementer(IResolverSimple)
class LoopbackResolver:
    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> LoopbackResolver:
        return cls(reactor)

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Any = ()) -> defer.Deferred:  # noqa: N802 - Twisted's name
        name = name.lower().rstrip(".")
        if name in ("localhost", "127.0.0.1") or name.endswith(".test") or name.endswith(".localhost"):
            return defer.succeed("127.0.0.1")
        return defer.fail(DNSLookupError(f"{name} does not resolve in tests"))
