"""The IPMicra coordinator (seed 002, sections III.D-F): URLs are delegated to crawlers by
delegating the subnets they lie in.

For a URL's IP, the smallest subnet containing it; if that subnet is delegated (and its
crawler has room), its crawler, with no probe. A crawler's own subnet (the smallest
containing its IP) is delegated to it when it registers. Otherwise a policy decides:

- ``strategy="knowledge"`` (the default, :mod:`webrace.delegation.choice`): every probe is
  kept as knowledge (:mod:`webrace.delegation.knowledge`), which estimates, with its
  uncertainty, every crawler's latency to any address from what was measured in the same
  subnet, organisation, siblings, ancestors, country and registry; a probe is sent only where
  those estimates cannot decide, so the cost per URL falls as the run goes on. Full crawlers
  make room by moving pages along the cheapest chain (the min-cost assignment's step).
- ``strategy="search"`` (:mod:`webrace.delegation.search`): the seed's bottom-up search with
  its probing threshold (``lookahead=None``: stop at the first probe under it; ``lookahead=1``:
  probe one more level), and its variance heuristic for full crawlers. The baseline.

The subnet is then delegated, so later URLs in it cost nothing. Capacity is a number of pages
(distinct URLs), the paper's "size of the assigned web-pages the crawler has to check"; no
crawler is ever given more pages than its capacity.

Dynamic calibration (``report_fetch``): a fetch is slow when it took more than
``slow_factor`` times the mean of the crawler's earlier fetches of the same IP (or more than
``slow_ms``, if set); ``slow_after`` slow fetches in a row by a subnet's crawler in that subnet
re-decide the subnet (search: fresh probes of everybody; knowledge: the crawler's latency
there replaced by what the fetches show, the others' from what is known). With the knowledge
strategy every other fetch time is knowledge too (:meth:`Knowledge.fetched`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace

import radix

from webrace.delegation.choice import MAX_EXPLORE, KnowledgePolicy
from webrace.delegation.decisions import (
    BALANCED,
    DELEGATED,
    FASTEST,
    HIERARCHY,
    KNOWLEDGE,
    KNOWN,
    ORGANISATION,
    PROBED,
    RECALIBRATED,
    SEARCH,
    CapacityError,
    Crawler,
    Decision,
    DelegationError,
    Move,
    Session,
)
from webrace.delegation.hierarchy import Hierarchy, IPAddress, Subnet, target_ip
from webrace.delegation.knowledge import Knowledge
from webrace.delegation.probing import Prober
from webrace.delegation.search import SearchPolicy

__all__ = ["BALANCED", "DELEGATED", "FASTEST", "HIERARCHY", "KNOWLEDGE", "KNOWN", "ORGANISATION", "PROBED",
           "RECALIBRATED", "SEARCH", "CapacityError", "Crawler", "Decision", "DelegationError", "Delegator", "Move"]

STRATEGIES = {KNOWLEDGE: KnowledgePolicy, SEARCH: SearchPolicy}


class Delegator:
    """Delegates subnets, and through them URLs, to registered crawlers.

    ``regret`` (knowledge): the expected share of a page's latency a choice may lose rather
    than probe (0.003: three tenths of a percent).
    ``probe_budget``, ``probe_credit`` (knowledge): the probes a URL the run aims to spend, after
    ``probe_credit`` probes a crawler for learning where the crawlers are; spent beyond them, a
    probe must be worth more than ``regret`` (:meth:`KnowledgePolicy.price`). ``None``: no budget.
    ``explore`` (knowledge): while crawlers are full, the probes a URL (over the last 100) that
    may look among the pages they hold for one cheap to send away (:meth:`KnowledgePolicy._explore`),
    while all probes over those URLs stay under 0.9 a URL (1.5 before a batch's last tenth, and a
    batch's probes so far under 1.8 a URL; default 1; 0: none).
    ``horizon`` (knowledge): the number of URLs this run will delegate, where it is known (a
    batch, as ``scrapy ipmicra delegate`` reads): what a probe teaches an organisation then
    serves no more pages than the run has left (:meth:`KnowledgePolicy.worth`); at the start of
    its last tenth, where crawlers are full, it probes where the assignment is least sure
    (:meth:`KnowledgePolicy.inquire`), and after its ``horizon``-th call of :meth:`delegate` (a
    URL seen again counts: the batch has ended) it assigns its pages again as a whole
    (:meth:`KnowledgePolicy.settle`), the moves in that call's decision. ``None``: a stream,
    with no end in sight.
    ``movable``: pages already delegated may move to make room on a full crawler (balancing).
    ``False`` where they cannot (the distributed mode: a page is in its worker's queue as soon
    as it is routed): a full crawler is then passed over.
    ``threshold_ms``, ``lookahead``, ``variance_ms``: the search strategy's.
    ``clock``: the time measurements are stamped with (seconds; default ``time.time``)."""

    def __init__(self, hierarchy: Hierarchy, prober: Prober, threshold_ms: float = 50.0, variance_ms: float = 25.0,
                 slow_after: int = 2, slow_factor: float = 2.0, slow_ms: float | None = None,
                 lookahead: int | None = 1, strategy: str = KNOWLEDGE, regret: float = 0.003,
                 clock: Callable[[], float] | None = None, probe_budget: float | None = 0.7,
                 probe_credit: float = 20.0, explore: float = 1.0, horizon: int | None = None,
                 movable: bool = True) -> None:
        if slow_after < 1:
            raise DelegationError(f"slow_after={slow_after}: re-delegation needs at least one slow fetch")
        if (probe_budget is not None and not probe_budget >= 0) or not probe_credit >= 0:
            raise DelegationError(f"probe_budget={probe_budget}, probe_credit={probe_credit}: "
                                  "probes cannot be fewer than none")
        if not 0 <= explore <= MAX_EXPLORE:  # more a URL than one URL may make is no limit
            raise DelegationError(f"explore={explore}: 0 to {MAX_EXPLORE} probes a URL")
        if horizon is not None and not horizon >= 0:
            raise DelegationError(f"horizon={horizon}: a run cannot have fewer URLs than none")
        if strategy not in STRATEGIES:
            raise DelegationError(f"strategy {strategy!r} is none of {', '.join(STRATEGIES)}")
        self.hierarchy = hierarchy
        self.prober = prober
        self.threshold_ms = threshold_ms
        self.lookahead = lookahead  # None: the paper's stopping rule (see search.py)
        self.variance_ms = variance_ms
        self.slow_after = slow_after
        self.slow_factor = slow_factor
        self.slow_ms = slow_ms
        self.strategy = strategy
        self.regret = regret
        self.probe_budget = probe_budget
        self.probe_credit = probe_credit
        self.explore = explore
        self.horizon = horizon
        self._delegated_urls = 0  # delegate() calls, a URL seen again among them: the batch ends at ``horizon``
        self.movable = movable
        self.knowledge = Knowledge(hierarchy, clock)
        self.crawlers: dict[str, Crawler] = {}
        self.stats: Counter[str] = Counter()
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
        self.policy: KnowledgePolicy | SearchPolicy = STRATEGIES[strategy](self)

    # -- crawlers -----------------------------------------------------------------------

    def register(self, crawler: Crawler) -> Subnet | None:
        """Add a crawler; the smallest subnet containing its IP is delegated to it (returned),
        unless that subnet already belongs to an earlier crawler."""
        if crawler.id in self.crawlers:
            raise DelegationError(f"crawler {crawler.id!r} is already registered")
        self.crawlers[crawler.id] = crawler
        self._owned[crawler.id] = set()
        self.knowledge.add_crawler(crawler.id, crawler.ip)
        home = self.hierarchy.smallest(crawler.ip)
        if home is None or home in self._owner:
            return None
        self._delegate(home, crawler.id)
        return home

    def load(self, crawler_id: str) -> int:
        """The number of pages (distinct URLs) delegated to the crawler."""
        self._crawler(crawler_id)
        return self._load[crawler_id]

    def assigned(self, target: str | IPAddress) -> str | None:
        """The crawler a delegated URL (or IP) is with now; balancing and calibration move pages."""
        return self._page_crawler.get(str(target).strip())

    def set_loads(self, loads: dict[str, int]) -> None:
        """Pages delegated elsewhere count too: each crawler's load as counted where every
        decision is seen (the distributed mode's shared counts); crawlers not named keep theirs."""
        for crawler_id, pages in loads.items():
            if crawler_id in self.crawlers:
                self._load[crawler_id] = max(0, int(pages))

    def forget(self, target: str | IPAddress) -> None:
        """Drop a delegated page from the bookkeeping (its place was not taken: the distributed
        mode found the crawler full when it claimed it); its subnet stays delegated."""
        key = str(target).strip()
        crawler_id = self._page_crawler.pop(key, None)
        if crawler_id is None:
            return
        subnet = self._page_subnet.pop(key)
        self._pages_on.get((crawler_id, subnet), set()).discard(key)
        self._held.get(crawler_id, set()).discard(key)
        self._load[crawler_id] = max(0, self._load[crawler_id] - 1)

    def owner(self, subnet: Subnet) -> str | None:
        """The crawler the subnet is delegated to."""
        return self._owner.get(subnet)

    def adopt(self, subnet: Subnet, crawler_id: str) -> None:
        """Record a delegation decided elsewhere (another worker's coordinator, in the
        distributed mode): the subnet is now ``crawler_id``'s, without probing."""
        self._crawler(crawler_id)
        current = self._owner.get(subnet)
        if current == crawler_id:
            return
        if current is not None:
            self._move(subnet, current, crawler_id)
        else:
            self._delegate(subnet, crawler_id)

    def delegations(self) -> dict[Subnet, str]:
        return dict(self._owner)

    def probe_results(self, subnet: Subnet) -> dict[str, float]:
        """The probes stored for the subnet (crawler -> ms)."""
        return self.policy.probe_results(subnet)

    # -- delegation ---------------------------------------------------------------------

    def delegate(self, target: str | IPAddress) -> Decision:
        """Delegate a URL (IP literal host) or an IP address to a crawler."""
        ip = self._ip(target)
        if not self.crawlers:
            raise DelegationError("no crawler is registered: register crawlers before delegating URLs")
        key = str(target).strip()
        subnet = self.hierarchy.smallest(ip)
        self._delegated_urls += 1
        batch = self.horizon if self.movable and self.strategy == KNOWLEDGE else None
        before: tuple[Move, ...] = ()
        extra = 0  # probes the batch's inquiry sent, counted with this call's decision
        if batch and self._delegated_urls == batch - batch // 10:
            before, extra = self.policy.inquire()
            self.stats["delegation/probes"] += extra
        if key in self._page_crawler:
            decision = self._decided(Decision(self._page_crawler[key], ip, subnet, 0, DELEGATED))
        else:
            decision = self.policy.delegate(key, ip, subnet)
        after = self.policy.settle() if self._delegated_urls == batch else ()
        if before or extra or after:
            decision = replace(decision, crawler=self._page_crawler[key], probes=decision.probes + extra,
                               moved=before + decision.moved + after)
        return decision

    # -- dynamic calibration ------------------------------------------------------------

    def report_fetch(self, crawler_id: str, target: str | IPAddress, ms: float) -> Decision | None:
        """A worker's fetch (GET or HEAD) time. Returns the re-delegation it caused, if any."""
        self._crawler(crawler_id)
        ip = self._ip(target)
        subnet = self.hierarchy.smallest(ip)
        if subnet is None or self._owner.get(subnet) != crawler_id:
            self._learn_fetch(crawler_id, ip, ms)
            return None  # only the subnet's own crawler can prove its delegation stale
        key = (crawler_id, subnet)
        history = self._fetches.setdefault(key, {})
        seen = history.get(ip)
        slow = ((self.slow_ms is not None and ms > self.slow_ms)
                or (seen is not None and ms > self.slow_factor * seen[1]))
        if not slow:
            count, mean = seen or (0, 0.0)
            history[ip] = (count + 1, mean + (ms - mean) / (count + 1))
            self._streak.pop(key, None)
            self._learn_fetch(crawler_id, ip, ms)
            return None
        self._streak[key] += 1
        self.stats["delegation/slow_fetch"] += 1
        if self._streak[key] < self.slow_after:
            return None
        self._streak.pop(key, None)
        self._fetches.pop(key, None)
        if self.strategy == KNOWLEDGE:
            self.knowledge.rerouted(crawler_id, ip, ms, seen[1] if seen else None)
        return self.policy.recalibrate(subnet, crawler_id, ip)

    def _learn_fetch(self, crawler_id: str, ip: IPAddress, ms: float) -> None:
        if self.strategy == KNOWLEDGE:
            self.knowledge.fetched(crawler_id, ip, ms)

    # -- bookkeeping --------------------------------------------------------------------

    def _room(self, crawler_id: str, pages: int) -> bool:
        capacity = self.crawlers[crawler_id].capacity
        return capacity is None or self._load[crawler_id] + pages <= capacity

    def _full_message(self) -> str:
        return (f"every crawler is at capacity ({sum(self._load.values())} pages delegated): "
                "register more crawlers or raise their capacities")

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
        self._give([key], subnet, target)
        return subnet

    def _take_pages(self, subnet: Subnet, crawler_id: str) -> set[str]:
        pages = self._pages_on.pop((crawler_id, subnet), set())
        self._held.get(crawler_id, set()).difference_update(pages)
        self._load[crawler_id] -= len(pages)
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

    def _assign(self, key: str, ip: IPAddress, subnet: Subnet | None, crawler_id: str, session: Session,
                reason: str, moved: tuple[Move, ...] = (), verified: int = 0) -> Decision:
        """``verified``: probes of pages that moved (at other addresses than ``ip``), counted
        with the decision's own."""
        self._give([key], subnet, crawler_id)
        return self._decided(Decision(crawler_id, ip, subnet, len(session.results) + verified, reason,
                                      dict(session.results), moved))

    def _decided(self, decision: Decision) -> Decision:
        self.stats[f"delegation/{decision.reason}"] += 1
        self.stats["delegation/probes"] += decision.probes
        return decision

    def _crawler(self, crawler_id: str) -> Crawler:
        try:
            return self.crawlers[crawler_id]
        except KeyError:
            raise DelegationError(f"unknown crawler {crawler_id!r}: register it first") from None

    @staticmethod
    def _ip(target: str | IPAddress) -> IPAddress:
        try:
            return target_ip(target)
        except ValueError as exc:
            raise DelegationError(str(exc)) from None
