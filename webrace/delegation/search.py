"""The seed's delegation procedure (seed 002, sections III.E-F), kept as the baseline
(``Delegator(strategy="search")``). For a URL whose subnet is not delegated yet:

1. the crawlers holding other subnets of the same organisation are probed;
2. then bottom-up through the hierarchy: at the subnet, then its parent, grandparent... the
   crawlers of the delegated subnets inside that level (siblings first, then their children,
   the level's own crawler last) are probed; above the roots every registered crawler is a
   candidate;
3. if no probe was under the threshold, the crawler with the fastest probe.

Stopping: the paper stops at the first probe under the threshold (``lookahead=None``). With
``lookahead=1`` every candidate of a level is probed, and once a level holds a probe under
the threshold, one more level up is probed too before the fastest is chosen. No crawler is
probed twice for one URL; the results are kept per subnet for balancing only, so every new
subnet starts its search again, and the more subnets are delegated, the more candidates a
level holds.

Load balancing: when the chosen crawler is full, the variance heuristic picks, among its
subnets and the new one, the subnet whose stored probe results vary least, and moves it to
its next-best probed crawler, if that crawler's probe is within ``variance_ms`` of the
subnet's best and it has room for the subnet's pages; else the next subnet is tried. If no
subnet can move, the URL goes to the best crawler with room.

Calibration: the subnet's search is re-run with fresh probes, the current crawler
re-measured like the others.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from webrace.delegation.decisions import (
    BALANCED,
    DELEGATED,
    FASTEST,
    HIERARCHY,
    ORGANISATION,
    RECALIBRATED,
    CapacityError,
    Decision,
    Move,
    Session,
)
from webrace.delegation.hierarchy import IPAddress, Subnet

if TYPE_CHECKING:
    from webrace.delegation.ledger import Ledger


class SearchPolicy:
    """The seed's bottom-up search, for the subnets of one :class:`~webrace.delegation.delegator.Delegator`."""

    def __init__(self, delegator: Ledger) -> None:
        self.d = delegator
        self.probes: dict[Subnet, dict[str, float]] = {}  # stored probe results, for balancing

    def delegate(self, key: str, ip: IPAddress, subnet: Subnet | None) -> Decision:
        d = self.d
        session = Session(d.prober, ip)
        owner = d.owner(subnet) if subnet is not None else None
        fresh = owner is None
        if fresh:
            owner, reason = self.search(ip, subnet, session)
        else:
            reason = DELEGATED
        if subnet is not None and session.results:
            self.probes.setdefault(subnet, {}).update(session.results)
        if d._room(owner, 1):
            if fresh and subnet is not None:
                d._delegate(subnet, owner)
            return d._assign(key, ip, subnet, owner, session, reason)
        return self._balance(key, ip, subnet, owner, session, fresh)

    def probe_results(self, subnet: Subnet) -> dict[str, float]:
        return dict(self.probes.get(subnet, {}))

    def search(self, ip: IPAddress, subnet: Subnet | None, session: Session,
               eligible: Callable[[str], bool] | None = None) -> tuple[str, str]:
        """Steps 1-3 of the procedure, among the ``eligible`` crawlers."""
        ok = eligible or (lambda crawler_id: True)
        if self.d.lookahead is None:  # the paper's rule: the first probe under the threshold wins
            return self._first_under_threshold(ip, subnet, session, ok)
        # every candidate of a level is probed (the organisation's crawlers with the first
        # level); once a level has a probe under the threshold, ``lookahead`` more levels up
        # are probed too, and the fastest of all wins
        threshold = self.d.threshold_ms
        for crawler_id in self._organisation_candidates(subnet, ip):
            if ok(crawler_id):
                session.probe(crawler_id)
        level, left = subnet, None
        while True:
            for crawler_id in self._level_candidates(level, ip):
                if ok(crawler_id):
                    session.probe(crawler_id)
            fastest = self._fastest(session, ok, none_ok=True)
            if fastest is not None and session.results[fastest] < threshold:
                left = self.d.lookahead if left is None else left - 1
                if left <= 0:
                    return fastest, HIERARCHY
            if level is None:
                break
            level = self.d.hierarchy.parent(level)
        fastest = self._fastest(session, ok)
        return fastest, HIERARCHY if session.results[fastest] < threshold else FASTEST

    def _first_under_threshold(self, ip: IPAddress, subnet: Subnet | None, session: Session,
                               ok: Callable[[str], bool]) -> tuple[str, str]:
        threshold = self.d.threshold_ms
        for crawler_id in self._organisation_candidates(subnet, ip):
            if ok(crawler_id) and session.probe(crawler_id) < threshold:
                return crawler_id, ORGANISATION
        level = subnet
        while True:
            for crawler_id in self._level_candidates(level, ip):
                if ok(crawler_id) and session.probe(crawler_id) < threshold:
                    return crawler_id, HIERARCHY
            if level is None:
                break
            level = self.d.hierarchy.parent(level)
        return self._fastest(session, ok), FASTEST

    def _fastest(self, session: Session, ok: Callable[[str], bool], none_ok: bool = False) -> str | None:
        order = {crawler_id: n for n, crawler_id in enumerate(self.d.crawlers)}
        probed = [(ms, order[c], c) for c, ms in session.results.items() if ok(c)]
        if not probed:
            if none_ok:
                return None
            raise CapacityError(self.d._full_message())
        return min(probed)[2]

    def _organisation_candidates(self, subnet: Subnet | None, ip: IPAddress) -> list[str]:
        """Crawlers holding other subnets of the subnet's organisation, nearest address first."""
        hierarchy = self.d.hierarchy
        org = hierarchy.organisation(subnet) if subnet is not None else None
        if org is None:
            return []
        owners = self.d._owner
        held = [s for s in hierarchy.organisation_subnets(org) if s in owners and s != subnet]
        held.sort(key=lambda s: (-common_bits(s, ip), hierarchy.depth(s), s.network.version, s.network))
        return _distinct(owners[s] for s in held)

    def _level_candidates(self, level: Subnet | None, ip: IPAddress) -> list[str]:
        """Crawlers of the delegated subnets inside ``level``: shallowest first (siblings of
        the previous level, then their children), the level's own crawler last. Above the
        roots (``None``): every crawler."""
        if level is None:
            return list(self.d.crawlers)
        inside = [node.data["subnet"] for node in self.d._delegated.search_covered(level.prefix)]
        inside.sort(key=lambda s: (s == level, self.d.hierarchy.depth(s), -common_bits(s, ip), s.network))
        return _distinct(self.d._owner[s] for s in inside)

    # -- load balancing -----------------------------------------------------------------

    def _balance(self, key: str, ip: IPAddress, subnet: Subnet | None, full: str, session: Session,
                 fresh: bool) -> Decision:
        """``full`` is the best crawler for the URL but has no room for it."""
        d = self.d
        move = self._make_room(full, subnet) if d.movable else None
        if move is not None:
            moved, target = move
            if moved == subnet and fresh:
                d._delegate(subnet, target)
            else:
                if fresh and subnet is not None:
                    d._delegate(subnet, full)
                d._move(moved, full, target)
            crawler_id = target if moved == subnet else full
            return d._assign(key, ip, subnet, crawler_id, session, BALANCED, (Move(moved, full, target),))
        crawler_id, _ = self.search(ip, subnet, session, eligible=lambda c: d._room(c, 1))
        if subnet is not None:
            self.probes.setdefault(subnet, {}).update(session.results)
            if fresh:
                d._delegate(subnet, crawler_id)
        # a subnet already held by the full crawler stays there: only this page goes elsewhere
        return d._assign(key, ip, subnet, crawler_id, session, BALANCED)

    def _make_room(self, full: str, incoming: Subnet | None) -> tuple[Subnet, str] | None:
        """The variance heuristic: (subnet, crawler) to move so the new page fits, or None."""
        d = self.d
        candidates = {s for s in d._owned[full] if d._pages_on.get((full, s))}
        if incoming is not None:
            candidates.add(incoming)

        def cost(s: Subnet) -> int:
            return len(d._pages_on.get((full, s), ())) + (s == incoming)

        ranked = []
        for s in candidates:
            results = {c: ms for c, ms in self.probes.get(s, {}).items() if math.isfinite(ms) and c in d.crawlers}
            if len(results) > 1:
                ranked.append((statistics.pvariance(results.values()), s.network.version, s.network, s, results))
        for *_, s, results in sorted(ranked):
            best = min(results.values())
            for ms, crawler_id in sorted((ms, c) for c, ms in results.items() if c != full):
                if ms > best + d.variance_ms:
                    break
                if d._room(crawler_id, cost(s)):
                    return s, crawler_id
        return None

    # -- dynamic calibration ------------------------------------------------------------

    def recalibrate(self, subnet: Subnet, current: str, ip: IPAddress) -> Decision:
        """Slow fetches: the search re-run for the subnet with fresh probes."""
        d = self.d
        pages = d._take_pages(subnet, current)
        d._undelegate(subnet)
        self.probes.pop(subnet, None)  # measured before the network changed
        session = Session(d.prober, ip)
        crawler_id, _ = self.search(ip, subnet, session, eligible=lambda c: d._room(c, len(pages)))
        self.probes[subnet] = dict(session.results)
        d._delegate(subnet, crawler_id)
        d._give(pages, subnet, crawler_id)
        return d._decided(Decision(crawler_id, ip, subnet, len(session.results), RECALIBRATED,
                                   dict(session.results), (Move(subnet, current, crawler_id),)))


def common_bits(subnet: Subnet, ip: IPAddress) -> int:
    """Leading bits the subnet's address shares with ``ip`` (0 across address families)."""
    network = subnet.network
    if network.version != ip.version:
        return 0
    return min(network.prefixlen, network.max_prefixlen - (int(network.network_address) ^ int(ip)).bit_length())


def _distinct(crawler_ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(crawler_ids))
