"""Probing (seed 002, sections II and III.D): how far, in milliseconds, a target IP is from a
crawler. The delegator asks a ``Prober``; what answers is one of

- ``TcpProber`` / ``HttpProber``: a timed TCP connect or HTTP HEAD from *this* machine, for a
  worker measuring itself (the paper found HEAD times and pings rank crawlers as downloads do);
- ``TableProber``: a latency table, one row per (crawler, target IP), for the simulator and
  for tests.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import time
from collections.abc import Iterable
from typing import Protocol

from webrace.delegation.hierarchy import IPAddress, target_ip


class ProbeError(Exception):
    """A probe that could not be made."""


class Unreachable(ProbeError):
    """The target did not answer the crawler: the delegator counts it as infinitely far."""


class UnknownProbe(ProbeError, LookupError):
    """A (crawler, target) pair the latency table has no row for."""


class Prober(Protocol):
    def probe(self, crawler_id: str, ip: IPAddress) -> float:
        """Milliseconds from crawler ``crawler_id`` to ``ip``."""
        ...


class TableProber:
    """Latencies read from a table: ``rows`` of (crawler id, target IP, ms)."""

    def __init__(self, rows: Iterable[tuple[str, str | IPAddress, float]] = ()) -> None:
        self._ms: dict[tuple[str, IPAddress], float] = {}
        self.calls = 0
        for crawler_id, ip, ms in rows:
            self.set(crawler_id, ip, ms)

    def set(self, crawler_id: str, ip: str | IPAddress, ms: float) -> None:
        """Add or change a row (a route that changed, for calibration)."""
        self._ms[crawler_id, target_ip(ip)] = float(ms)

    def probe(self, crawler_id: str, ip: IPAddress) -> float:
        self.calls += 1
        try:
            return self._ms[crawler_id, target_ip(ip)]
        except KeyError:
            raise UnknownProbe(f"the latency table has no row for crawler {crawler_id!r} to {ip}: "
                               "add a (crawler, ip, ms) row") from None


class TcpProber:
    """The time to open a TCP connection from this machine to ``ip:port``. A worker uses it
    to measure itself, so ``crawler_id``, when given, must be this worker's."""

    def __init__(self, port: int = 80, timeout: float = 5.0, crawler_id: str | None = None) -> None:
        self.port = port
        self.timeout = timeout
        self.crawler_id = crawler_id

    def probe(self, crawler_id: str, ip: IPAddress) -> float:
        self._check(crawler_id)
        address = str(target_ip(ip))
        start = time.perf_counter()
        try:
            with socket.create_connection((address, self.port), timeout=self.timeout):
                return (time.perf_counter() - start) * 1000
        except OSError as exc:
            raise Unreachable(f"TCP connect to {_hostport(address, self.port)} failed: "
                              f"{exc.strerror or exc}") from None

    def _check(self, crawler_id: str) -> None:
        if self.crawler_id is not None and crawler_id != self.crawler_id:
            raise ProbeError(f"this prober measures from crawler {self.crawler_id!r}, not {crawler_id!r}")


class HttpProber(TcpProber):
    """The time an HTTP ``HEAD path`` to ``ip:port`` takes from this machine, connection
    included; any HTTP status counts as an answer."""

    def __init__(self, port: int = 80, timeout: float = 5.0, crawler_id: str | None = None, path: str = "/") -> None:
        super().__init__(port, timeout, crawler_id)
        self.path = path

    def probe(self, crawler_id: str, ip: IPAddress) -> float:
        self._check(crawler_id)
        address = str(target_ip(ip))
        connection = http.client.HTTPConnection(address, self.port, timeout=self.timeout)
        start = time.perf_counter()
        try:
            connection.request("HEAD", self.path, headers={"User-Agent": "webrace-ipmicra-probe"})
            connection.getresponse().read()
            return (time.perf_counter() - start) * 1000
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(f"HTTP HEAD {self.path} to {_hostport(address, self.port)} failed: "
                              f"{getattr(exc, 'strerror', None) or exc!r}") from None
        finally:
            connection.close()


def _hostport(address: str, port: int) -> str:
    return f"[{address}]:{port}" if isinstance(ipaddress.ip_address(address), ipaddress.IPv6Address) else \
        f"{address}:{port}"
