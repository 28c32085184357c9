"""The IPMicra coordinator (seed 002, sections III.D-F): URLs are delegated to crawlers by
delegating the subnets they lie in.

For a URL's IP (``delegate``):

1. the smallest subnet containing it; if that subnet is delegated, its crawler (no probe);
2. else the crawlers holding other subnets of the same organisation are probed;
3. then bottom-up through the hierarchy: at the subnet, then its parent, grandparent... the
   crawlers of the delegated subnets inside that level (siblings first, then their children,
   the level's own crawler last) are probed; above the roots every registered crawler is a
   candidate;
4. if no probe was under the threshold, the crawler with the fastest probe.

Stopping: the paper stops at the first probe under the threshold (``lookahead=None``). With
several crawlers per region many are under 50 ms, and the first one probed is often not
the nearest (measured on the simulator with 12 crawlers: 67% of URLs to their optimal
crawler). By default (``lookahead=1``) every candidate of a level is probed, and once a
level holds a probe under the threshold, one more level up is probed too before the fastest
is chosen: 95% optimal at 1.2 probes per URL on the same worlds (``bench/ipmicra.py``).

The subnet is then delegated to that crawler, so later URLs in it cost no probe. No crawler is
probed twice for one URL. A crawler's own subnet (the smallest containing its IP) is delegated
to it when it registers.

Dynamic calibration (``report_fetch``): a fetch is slow when it took more than
``slow_factor`` times the mean of the crawler's earlier fetches of the same IP (or more than
``slow_ms``, if set); ``slow_after`` slow fetches in a row by a subnet's crawler in that subnet
re-run the search for the subnet with fresh probes, the current crawler re-measured like the
others.

Load balancing: a crawler's capacity is a number of pages (distinct URLs), the paper's "size
of the assigned web-pages the crawler has to check". When the chosen crawler is full, the
variance heuristic picks, among its subnets and the new one, the subnet whose stored probe
results vary least, and moves it to its next-best probed crawler, if that crawler's probe is
within ``variance_ms`` of the subnet's best and it has room for the subnet's pages; else the
next subnet is tried. If no subnet can move, the URL goes to the best crawler with room. No
crawler is ever given more pages than its capacity.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import radix

from webrace.delegation.hierarchy import Hierarchy, IPAddress, Subnet, target_ip
from webrace.delegation.probing import Prober, Unreachable

DELEGATED = "delegated"          # the subnet was already delegated: no probe
ORGANISATION = "organisation"    # a crawler of the same organisation probed under the threshold
HIERARCHY = "hierarchy"          # a crawler found bottom-up probed under the threshold
FASTEST = "fastest"              # nobody under the threshold: the fastest probe
BALANCED = "balanced"            # the best crawler was full: balancing decided
RECALIBRATED = "recalibrated"    # slow fetches re-ran the search for the subnet


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
        if self.capacity is not None and self.capacity < 0:
            raise DelegationError(f"crawler {self.id!r}: capacity {self.capacity} is negative")


@dataclass(frozen=True)
class Move:
    """A subnet re-delegated from one crawler to another, with its pages."""

    subnet: Subnet
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


class _Session:
    """The probes of one decision: each crawler probed at most once."""

    def __init__(self, prober: Prober, ip: IPAddress) -> None:
        self.prober = prober
        self.ip = ip
        self.results: dict[str, float] = {}

    def probe(self, crawler_id: str) -> float:
        if crawler_id not in self.results:
            try:
                self.results[crawler_id] = float(self.prober.probe(crawler_id, self.ip))
            except Unreachable:
                self.results[crawler_id] = math.inf
        return self.results[crawler_id]


class Delegator:
    """Delegates subnets, and through them URLs, to registered crawlers."""

    def __init__(self, hierarchy: Hierarchy, prober: Prober, threshold_ms: float = 50.0, variance_ms: float = 25.0,
                 slow_after: int = 2, slow_factor: float = 2.0, slow_ms: float | None = None,
                 lookahead: int | None = 1) -> None:
        if slow_after < 1:
            raise DelegationError(f"slow_after={slow_after}: re-delegation needs at least one slow fetch")
        self.hierarchy = hierarchy
        self.prober = prober
        self.threshold_ms = threshold_ms
        self.lookahead = lookahead  # None: the paper's stopping rule (see _search)
        self.variance_ms = variance_ms
        self.slow_after = slow_after
        self.slow_factor = slow_factor
        self.slow_ms = slow_ms
        self.crawlers: dict[str, Crawler] = {}
        self.stats: Counter[str] = Counter()
        self._owner: dict[Subnet, str] = {}
        self._owned: dict[str, set[Subnet]] = {}
        self._delegated = radix.Radix()  # the delegated subnets, for "delegated subnets inside this one"
        self._probes: dict[Subnet, dict[str, float]] = {}  # stored probe results, for balancing
        self._page_crawler: dict[str, str] = {}
        self._pages_on: dict[tuple[str, Subnet | None], set[str]] = {}
        self._load: Counter[str] = Counter()
        self._fetches: dict[tuple[str, Subnet], dict[IPAddress, tuple[int, float]]] = {}
        self._streak: Counter[tuple[str, Subnet]] = Counter()

    # -- crawlers -----------------------------------------------------------------------

    def register(self, crawler: Crawler) -> Subnet | None:
        """Add a crawler; the smallest subnet containing its IP is delegated to it (returned),
        unless that subnet already belongs to an earlier crawler."""
        if crawler.id in self.crawlers:
            raise DelegationError(f"crawler {crawler.id!r} is already registered")
        self.crawlers[crawler.id] = crawler
        self._owned[crawler.id] = set()
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
        """The probes stored for the subnet (crawler -> ms), which balancing reads."""
        return dict(self._probes.get(subnet, {}))

    # -- delegation ---------------------------------------------------------------------

    def delegate(self, target: str | IPAddress) -> Decision:
        """Delegate a URL (IP literal host) or an IP address to a crawler."""
        ip = self._ip(target)
        if not self.crawlers:
            raise DelegationError("no crawler is registered: register crawlers before delegating URLs")
        key = str(target).strip()
        subnet = self.hierarchy.smallest(ip)
        if key in self._page_crawler:
            return self._decided(Decision(self._page_crawler[key], ip, subnet, 0, DELEGATED))
        session = _Session(self.prober, ip)
        owner = self._owner.get(subnet) if subnet is not None else None
        fresh = owner is None
        if fresh:
            owner, reason = self._search(ip, subnet, session)
        else:
            reason = DELEGATED
        if subnet is not None and session.results:
            self._probes.setdefault(subnet, {}).update(session.results)
        if self._room(owner, 1):
            if fresh and subnet is not None:
                self._delegate(subnet, owner)
            return self._assign(key, ip, subnet, owner, session, reason)
        return self._balance(key, ip, subnet, owner, session, fresh)

    def _search(self, ip: IPAddress, subnet: Subnet | None, session: _Session,
                eligible: Callable[[str], bool] | None = None) -> tuple[str, str]:
        """Steps 2-4 of the procedure, among the ``eligible`` crawlers."""
        ok = eligible or (lambda crawler_id: True)
        if self.lookahead is None:  # the paper's rule: the first probe under the threshold wins
            for crawler_id in self._organisation_candidates(subnet, ip):
                if ok(crawler_id) and session.probe(crawler_id) < self.threshold_ms:
                    return crawler_id, ORGANISATION
            level = subnet
            while True:
                for crawler_id in self._level_candidates(level, ip):
                    if ok(crawler_id) and session.probe(crawler_id) < self.threshold_ms:
                        return crawler_id, HIERARCHY
                if level is None:
                    break
                level = self.hierarchy.parent(level)
            return self._fastest(session, ok), FASTEST
        # ours: every candidate of a level is probed (the organisation's crawlers with the
        # first level); once a level has a probe under the threshold, ``lookahead`` more
        # levels up are probed too, and the fastest of all wins
        for crawler_id in self._organisation_candidates(subnet, ip):
            if ok(crawler_id):
                session.probe(crawler_id)
        level, left = subnet, None
        while True:
            for crawler_id in self._level_candidates(level, ip):
                if ok(crawler_id):
                    session.probe(crawler_id)
            fastest = self._fastest(session, ok, none_ok=True)
            if fastest is not None and session.results[fastest] < self.threshold_ms:
                left = self.lookahead if left is None else left - 1
                if left <= 0:
                    return fastest, HIERARCHY
            if level is None:
                break
            level = self.hierarchy.parent(level)
        fastest = self._fastest(session, ok)
        return fastest, HIERARCHY if session.results[fastest] < self.threshold_ms else FASTEST

    def _fastest(self, session: _Session, ok: Callable[[str], bool], none_ok: bool = False) -> str | None:
        order = {crawler_id: n for n, crawler_id in enumerate(self.crawlers)}
        probed = [(ms, order[c], c) for c, ms in session.results.items() if ok(c)]
        if not probed:
            if none_ok:
                return None
            raise CapacityError(f"every crawler is at capacity ({sum(self._load.values())} pages delegated): "
                                "register more crawlers or raise their capacities")
        return min(probed)[2]

    def _organisation_candidates(self, subnet: Subnet | None, ip: IPAddress) -> list[str]:
        """Crawlers holding other subnets of the subnet's organisation, nearest address first."""
        org = self.hierarchy.organisation(subnet) if subnet is not None else None
        if org is None:
            return []
        held = [s for s in self.hierarchy.organisation_subnets(org) if s in self._owner and s != subnet]
        held.sort(key=lambda s: (-_common_bits(s, ip), self.hierarchy.depth(s), s.network.version, s.network))
        return _distinct(self._owner[s] for s in held)

    def _level_candidates(self, level: Subnet | None, ip: IPAddress) -> list[str]:
        """Crawlers of the delegated subnets inside ``level``: shallowest first (siblings of
        the previous level, then their children), the level's own crawler last. Above the
        roots (``None``): every crawler."""
        if level is None:
            return list(self.crawlers)
        inside = [node.data["subnet"] for node in self._delegated.search_covered(level.prefix)]
        inside.sort(key=lambda s: (s == level, self.hierarchy.depth(s), -_common_bits(s, ip), s.network))
        return _distinct(self._owner[s] for s in inside)

    # -- load balancing -----------------------------------------------------------------

    def _balance(self, key: str, ip: IPAddress, subnet: Subnet | None, full: str, session: _Session,
                 fresh: bool) -> Decision:
        """``full`` is the best crawler for the URL but has no room for it."""
        move = self._make_room(full, subnet)
        if move is not None:
            moved, target = move
            if moved == subnet and fresh:
                self._delegate(subnet, target)
            else:
                if fresh and subnet is not None:
                    self._delegate(subnet, full)
                self._move(moved, full, target)
            crawler_id = target if moved == subnet else full
            return self._assign(key, ip, subnet, crawler_id, session, BALANCED, (Move(moved, full, target),))
        crawler_id, _ = self._search(ip, subnet, session, eligible=lambda c: self._room(c, 1))
        if subnet is not None:
            self._probes.setdefault(subnet, {}).update(session.results)
            if fresh:
                self._delegate(subnet, crawler_id)
        # a subnet already held by the full crawler stays there: only this page goes elsewhere
        return self._assign(key, ip, subnet, crawler_id, session, BALANCED)

    def _make_room(self, full: str, incoming: Subnet | None) -> tuple[Subnet, str] | None:
        """The variance heuristic: (subnet, crawler) to move so the new page fits, or None."""
        candidates = {s for s in self._owned[full] if self._pages_on.get((full, s))}
        if incoming is not None:
            candidates.add(incoming)

        def cost(s: Subnet) -> int:
            return len(self._pages_on.get((full, s), ())) + (s == incoming)

        ranked = []
        for s in candidates:
            results = {c: ms for c, ms in self._probes.get(s, {}).items() if math.isfinite(ms) and c in self.crawlers}
            if len(results) > 1:
                ranked.append((statistics.pvariance(results.values()), s.network.version, s.network, s, results))
        for *_, s, results in sorted(ranked):
            best = min(results.values())
            for ms, crawler_id in sorted((ms, c) for c, ms in results.items() if c != full):
                if ms > best + self.variance_ms:
                    break
                if self._room(crawler_id, cost(s)):
                    return s, crawler_id
        return None

    # -- dynamic calibration ------------------------------------------------------------

    def report_fetch(self, crawler_id: str, target: str | IPAddress, ms: float) -> Decision | None:
        """A worker's fetch (GET or HEAD) time. Returns the re-delegation it caused, if any."""
        self._crawler(crawler_id)
        ip = self._ip(target)
        subnet = self.hierarchy.smallest(ip)
        if subnet is None or self._owner.get(subnet) != crawler_id:
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
            return None
        self._streak[key] += 1
        self.stats["delegation/slow_fetch"] += 1
        if self._streak[key] < self.slow_after:
            return None
        return self._recalibrate(subnet, crawler_id, ip)

    def _recalibrate(self, subnet: Subnet, current: str, ip: IPAddress) -> Decision:
        self._streak.pop((current, subnet), None)
        self._fetches.pop((current, subnet), None)
        pages = self._pages_on.pop((current, subnet), set())
        self._load[current] -= len(pages)
        self._undelegate(subnet)
        self._probes.pop(subnet, None)  # measured before the network changed
        session = _Session(self.prober, ip)
        crawler_id, _ = self._search(ip, subnet, session, eligible=lambda c: self._room(c, len(pages)))
        self._probes[subnet] = dict(session.results)
        self._delegate(subnet, crawler_id)
        self._give(pages, subnet, crawler_id)
        return self._decided(Decision(crawler_id, ip, subnet, len(session.results), RECALIBRATED,
                                      dict(session.results), (Move(subnet, current, crawler_id),)))

    # -- bookkeeping --------------------------------------------------------------------

    def _room(self, crawler_id: str, pages: int) -> bool:
        capacity = self.crawlers[crawler_id].capacity
        return capacity is None or self._load[crawler_id] + pages <= capacity

    def _delegate(self, subnet: Subnet, crawler_id: str) -> None:
        self._owner[subnet] = crawler_id
        self._owned[crawler_id].add(subnet)
        self._delegated.add(subnet.prefix).data["subnet"] = subnet

    def _undelegate(self, subnet: Subnet) -> None:
        self._owned[self._owner.pop(subnet)].discard(subnet)
        self._delegated.delete(subnet.prefix)

    def _move(self, subnet: Subnet, source: str, target: str) -> None:
        self._undelegate(subnet)
        self._delegate(subnet, target)
        pages = self._pages_on.pop((source, subnet), set())
        self._load[source] -= len(pages)
        self._give(pages, subnet, target)
        self._fetches.pop((source, subnet), None)
        self._streak.pop((source, subnet), None)

    def _give(self, pages: Iterable[str], subnet: Subnet | None, crawler_id: str) -> None:
        held = self._pages_on.setdefault((crawler_id, subnet), set())
        for key in pages:
            self._page_crawler[key] = crawler_id
            held.add(key)
            self._load[crawler_id] += 1

    def _assign(self, key: str, ip: IPAddress, subnet: Subnet | None, crawler_id: str, session: _Session,
                reason: str, moved: tuple[Move, ...] = ()) -> Decision:
        self._give([key], subnet, crawler_id)
        return self._decided(Decision(crawler_id, ip, subnet, len(session.results), reason, dict(session.results),
                                      moved))

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


def _common_bits(subnet: Subnet, ip: IPAddress) -> int:
    """Leading bits the subnet's address shares with ``ip`` (0 across address families)."""
    network = subnet.network
    if network.version != ip.version:
        return 0
    return min(network.prefixlen, network.max_prefixlen - (int(network.network_address) ^ int(ip)).bit_length())


def _distinct(crawler_ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(crawler_ids))
