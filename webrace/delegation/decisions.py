"""What the IPMicra coordinator decides and with what: crawlers, decisions and their reasons,
moves, and the probes of one decision (pure: no Scrapy, no Redis)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webrace.delegation.hierarchy import IPAddress, Subnet, target_ip
from webrace.delegation.probing import Prober, Unreachable

if TYPE_CHECKING:
    from webrace.delegation.knowledge import Knowledge

# strategies
KNOWLEDGE = "knowledge"          # probes kept as knowledge, a probe only where it cannot decide (the default)
SEARCH = "search"                # the seed's bottom-up search and variance balancing (the baseline)

# reasons
DELEGATED = "delegated"          # the subnet was already delegated: no probe
KNOWN = "known"                  # a new subnet decided from what is known: no probe
PROBED = "probed"                # a new subnet: what is known could not decide, probes did
ORGANISATION = "organisation"    # search: a crawler of the same organisation probed under the threshold
HIERARCHY = "hierarchy"          # search: a crawler found bottom-up probed under the threshold
FASTEST = "fastest"              # search: nobody under the threshold: the fastest probe
BALANCED = "balanced"            # the best crawler was full: balancing decided
RECALIBRATED = "recalibrated"    # slow fetches re-decided the subnet


class DelegationError(ValueError):
    """A request the coordinator cannot serve (bad target, unknown crawler...)."""


class CapacityError(DelegationError):
    """Every crawler is at capacity."""


@dataclass(frozen=True)
class Crawler:
    """A migrating crawler: where it runs and how many pages it can take (``None``: no limit)."""

    id: str
    ip: IPAddress
    capacity: int | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "ip", target_ip(self.ip))
        except ValueError as exc:
            raise DelegationError(f"crawler {self.id!r}: {exc}") from None
        if self.capacity is not None and (not isinstance(self.capacity, int) or isinstance(self.capacity, bool)):
            raise DelegationError(f"crawler {self.id!r}: capacity {self.capacity!r} is not a whole number")
        if self.capacity is not None and self.capacity < 0:
            raise DelegationError(f"crawler {self.id!r}: capacity {self.capacity} is negative")


@dataclass(frozen=True)
class Move:
    """Pages of a subnet re-delegated from one crawler to another: all of them (search, and
    calibration), or one (the knowledge strategy making room on a full crawler)."""

    subnet: Subnet | None
    source: str
    target: str


@dataclass(frozen=True)
class Decision:
    """Where a URL went and why: ``results`` are the probes made for it (crawler -> ms)."""

    crawler: str
    ip: IPAddress
    subnet: Subnet | None
    probes: int
    reason: str
    results: Mapping[str, float] = field(default_factory=dict)
    moved: tuple[Move, ...] = ()


class Session:
    """The probes of one decision: each crawler probed at most once; with ``knowledge``,
    every result is kept there."""

    def __init__(self, prober: Prober, ip: IPAddress, knowledge: Knowledge | None = None) -> None:
        self.prober = prober
        self.ip = ip
        self.knowledge = knowledge
        self.results: dict[str, float] = {}

    def probe(self, crawler_id: str) -> float:
        if crawler_id not in self.results:
            try:
                self.results[crawler_id] = float(self.prober.probe(crawler_id, self.ip))
            except Unreachable:
                self.results[crawler_id] = math.inf
            if self.knowledge is not None:
                self.knowledge.observe(crawler_id, self.ip, self.results[crawler_id])
        return self.results[crawler_id]
