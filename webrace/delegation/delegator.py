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

from collections.abc import Callable
from dataclasses import replace

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
)
from webrace.delegation.hierarchy import Hierarchy, IPAddress, Subnet, target_ip
from webrace.delegation.ledger import Ledger
from webrace.delegation.probing import Prober
from webrace.delegation.search import SearchPolicy

__all__ = ["BALANCED", "DELEGATED", "FASTEST", "HIERARCHY", "KNOWLEDGE", "KNOWN", "ORGANISATION", "PROBED",
           "RECALIBRATED", "SEARCH", "CapacityError", "Crawler", "Decision", "DelegationError", "Delegator", "Move"]

STRATEGIES = {KNOWLEDGE: KnowledgePolicy, SEARCH: SearchPolicy}


class Delegator(Ledger):
    """Delegates subnets, and through them URLs, to registered crawlers. Its books (who holds
    which subnet and page) are a :class:`~webrace.delegation.ledger.Ledger`.

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
        super().__init__(hierarchy, prober, clock)
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
        self.movable = movable
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
        if self._events is not None:
            self._events.append((key, crawler_id, False))

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
