"""The delegator's bookkeeping (seed 002, section III.D): which crawler each subnet is
delegated to, which pages each crawler holds, and so each crawler's load.

:class:`~webrace.delegation.delegator.Delegator` keeps its books in a :class:`Ledger` (it is
one), and its policies (:mod:`~webrace.delegation.choice`, :mod:`~webrace.delegation.search`)
decide by reading and writing them here: this module is below the three, so the delegator
imports its policies and none of them imports the delegator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

import radix

from webrace.delegation.decisions import Crawler, Decision, Move, Session
from webrace.delegation.hierarchy import Hierarchy, IPAddress, Subnet
from webrace.delegation.knowledge import Knowledge
from webrace.delegation.probing import Prober


class Ledger:
    """The subnets delegated, the pages placed and the loads, over registered ``crawlers``,
    with the knowledge of their latencies (``clock``: the time measurements are stamped with)."""

    # the delegator's settings its policies read (see Delegator)
    threshold_ms: float
    lookahead: int | None
    variance_ms: float
    regret: float
    probe_budget: float | None
    probe_credit: float
    explore: float
    horizon: int | None
    movable: bool

    def __init__(self, hierarchy: Hierarchy, prober: Prober, clock: Callable[[], float] | None = None) -> None:
        self.hierarchy = hierarchy
        self.prober = prober
        self.knowledge = Knowledge(hierarchy, clock)
        self.crawlers: dict[str, Crawler] = {}
        self.stats: Counter[str] = Counter()
        self._delegated_urls = 0  # delegate() calls, a URL seen again among them: the batch ends at ``horizon``
        self._owner: dict[Subnet, str] = {}
        self._owned: dict[str, set[Subnet]] = {}
        self._delegated = radix.Radix()  # the delegated subnets, for "delegated subnets inside this one"
        self._page_crawler: dict[str, str] = {}
        self._page_subnet: dict[str, Subnet | None] = {}
        self._pages_on: dict[tuple[str, Subnet | None], set[str]] = {}
        self._held: dict[str, set[str]] = {}
        self._load: Counter[str] = Counter()
        self._fetches: dict[tuple[str, Subnet], dict[IPAddress, tuple[int, float]]] = {}
        self._streak: Counter[tuple[str, Subnet]] = Counter()
        # (page, crawler, whether it came or left) since a policy last read them; None: nobody reads them
        self._events: list[tuple[str, str, bool]] | None = None

    def owner(self, subnet: Subnet) -> str | None:
        """The crawler the subnet is delegated to."""
        return self._owner.get(subnet)

    def _room(self, crawler_id: str, pages: int) -> bool:
        capacity = self.crawlers[crawler_id].capacity
        return capacity is None or self._load[crawler_id] + pages <= capacity

    def _full_message(self) -> str:
        return (
            f"every crawler is at capacity ({sum(self._load.values())} pages delegated): "
            "register more crawlers or raise their capacities"
        )

    def _delegate(self, subnet: Subnet, crawler_id: str) -> None:
        self._owner[subnet] = crawler_id
        self._owned[crawler_id].add(subnet)
        self._delegated.add(subnet.prefix).data["subnet"] = subnet

    def _undelegate(self, subnet: Subnet) -> None:
        self._owned[self._owner.pop(subnet)].discard(subnet)
        self._delegated.delete(subnet.prefix)

    def _move(self, subnet: Subnet, source: str, target: str) -> None:
        """The subnet, and its pages on ``source``, to ``target``."""
        self._undelegate(subnet)
        self._delegate(subnet, target)
        self._give(self._take_pages(subnet, source), subnet, target)
        self._fetches.pop((source, subnet), None)
        self._streak.pop((source, subnet), None)

    def _move_page(self, key: str, target: str) -> Subnet | None:
        """One page to ``target`` (its subnet stays delegated where it was); its subnet."""
        source, subnet = self._page_crawler[key], self._page_subnet[key]
        self._pages_on[source, subnet].discard(key)
        self._held[source].discard(key)
        self._load[source] -= 1
        if self._events is not None:
            self._events.append((key, source, False))
        self._give([key], subnet, target)
        return subnet

    def _take_pages(self, subnet: Subnet, crawler_id: str) -> set[str]:
        pages = self._pages_on.pop((crawler_id, subnet), set())
        self._held.get(crawler_id, set()).difference_update(pages)
        self._load[crawler_id] -= len(pages)
        if self._events is not None:
            self._events.extend((key, crawler_id, False) for key in pages)
        return pages

    def _give(self, pages: Iterable[str], subnet: Subnet | None, crawler_id: str) -> None:
        on = self._pages_on.setdefault((crawler_id, subnet), set())
        held = self._held.setdefault(crawler_id, set())
        for key in pages:
            self._page_crawler[key] = crawler_id
            self._page_subnet[key] = subnet
            on.add(key)
            held.add(key)
            self._load[crawler_id] += 1
            if self._events is not None:
                self._events.append((key, crawler_id, True))

    def _assign(
        self,
        key: str,
        ip: IPAddress,
        subnet: Subnet | None,
        crawler_id: str,
        session: Session,
        reason: str,
        moved: tuple[Move, ...] = (),
        verified: int = 0,
    ) -> Decision:
        """``verified``: probes of pages that moved (at other addresses than ``ip``), counted
        with the decision's own."""
        self._give([key], subnet, crawler_id)
        return self._decided(
            Decision(crawler_id, ip, subnet, len(session.results) + verified, reason, dict(session.results), moved)
        )

    def _decided(self, decision: Decision) -> Decision:
        self.stats[f"delegation/{decision.reason}"] += 1
        self.stats["delegation/probes"] += decision.probes
        return decision
