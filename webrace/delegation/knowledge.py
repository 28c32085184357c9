"""Probes as knowledge (issue 20): every latency measured between a crawler and an address is
kept, with its time, and stands as an estimate, with its uncertainty, for every other address
around it in the IP hierarchy.

Estimates are of log-milliseconds (latency noise is multiplicative: a route 15% slower is as
likely at 10 ms as at 100 ms). For an address and a crawler, the sources are:

- the address itself, if the crawler measured it (by a probe, or a fetch standing for one);
- the groups the address belongs to, narrowest first: its subnet, the blocks around it inside
  its organisation's (its ancestors of the same organisation), the organisation; then the
  ancestors beyond it, its country code, its registry, and everything the crawler measured
  (addresses outside the hierarchy: their /24 and /16, or /48 and /32);
- where the crawler itself is: the narrowest group holding both the address and the crawler's
  own address (same organisation, same country block, same registry; with none, the pair of
  registries, the crawler's and the address's) predicts by what crawlers so placed measured,
  this crawler's own such measurements counting more the more there are. This is what says a
  crawler next door is likely near before it was ever probed there, and a crawler across the
  world far; and the crawlers of one registry, about as far from another registry's hosts,
  learn that distance together, where each would otherwise learn it host by host;
- peers: another crawler's measurement of the address itself, by how the two crawlers' own
  addresses relate (the narrowest group holding both, and whether the address shares a group
  with neither), with the spread of the differences between crawlers so placed at the
  addresses both measured. Two crawlers of one region are about as far from an address of
  another continent: a probe of one teaches of the other, where each crawler's own groups know
  nothing of it (an organisation its groups misplace, every crawler a rival) and several
  crawlers would otherwise each be probed for one answer;
- vicinity (triangulation, as network coordinates do): the crawler ``p`` that measured the
  address's organisation as nearest places it within that latency of ``p``; this crawler's
  latencies to the organisations ``p`` measured about as near say how far it is from there
  (their mean over the few nearest in ``p``'s latency; their spread, shrunk towards a
  country's, and how far they were from ``p``'s latency, its variance). So one probe of a new
  organisation, by the crawler about to be chosen, tells every other crawler roughly how far
  it is, without a probe of each: where crawlers sit one a country, every crawler would
  otherwise be learnt country by country.

A group predicts by the mean of the crawler's measurements inside it, taken unit by unit (a
subnet's addresses, a block's subnets or blocks, an organisation's blocks; beyond the
organisation, one unit per organisation, however many of its addresses were measured), with
variance ``W * (1 + 1/n)`` (+ ``drift`` times the measurements' age): ``n`` units measured,
``W`` how much one crawler's latencies vary between units of that group. ``W`` is learned from
the measurements: the crawler's spread in the group, shrunk towards the spread of all
crawlers in it, shrunk towards the spread in groups of its kind, shrunk towards the next
broader kind's (a subnet varies like its organisation until shown otherwise), then a prior.

The estimate is the narrowest of the address's subnet, blocks and organisation the crawler
measured in, or its closest peer or vicinity estimate if tighter (all backed by the address or
its organisation: ``near``); failing those, whichever of the peers, the groups beyond and where
the crawler is has the smallest variance (data decides whether the country, an LIR block or the registry says more,
in whichever Internet this is). A crawler that never measured anything in the address's
registry (its broadest group) is unknown there: neither the registry nor other crawlers say
where a crawler really is. Every probe then calibrates its kind of estimate: variances are
multiplied by the mean squared standardised error that kind showed (probing only where a
crawler looks near makes its spreads look smaller than they are).

Surprises: registries misplace hosts now and then (a block says Europe, the host is in Asia).
Each probe against an estimate from beyond the address's subnet and organisation updates the
chance that they misplace this organisation (a mixture: the estimate, or anywhere); past a
half, the group that gave the estimate is no longer used for the organisation, and its
measurements leave that group. That chance, the learned rate of
surprises, and what they cost, tell the delegator how far to trust estimates that nothing
nearer backs.

Fetch times (calibration, section III.F) feed the same knowledge: a fetch of a pair that was
probed teaches the ratio between fetch times and probes; a fetch of a pair never probed
stands for a probe through that ratio (with its spread as variance); slow fetches that prove a
route changed replace the pair's measurement.

Pure: no Scrapy, no Redis.
"""

from __future__ import annotations

import bisect
import ipaddress
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from webrace.delegation.hierarchy import Hierarchy, IPAddress, Subnet

# kinds of source, the first five backed by the address itself, its subnet or its organisation
EXACT, IP, SUBNET, BLOCK, ORG = "exact", "ip", "subnet", "block", "org"
NODE, PREFIX, CC, REGISTRY, ALL = "node", "prefix", "cc", "registry", "all"
RELATION = "relation"  # where the crawler is against where the address is
PEER = "peer"  # another crawler's measurement of the address, by how the two crawlers' places relate
# another crawler's measurement of the address's organisation, by what this crawler measured of the
# organisations that crawler found about as near (triangulation: two targets at the same latency
# from a crawler near them are about as far from any other crawler)
VICINITY = "vicinity"
NEAR = frozenset({EXACT, IP, SUBNET, BLOCK, ORG, PEER, VICINITY})
# a kind with no data yet varies like the next broader one
BROADER = {SUBNET: BLOCK, BLOCK: ORG, ORG: CC, CC: REGISTRY, REGISTRY: ALL, NODE: ALL, PREFIX: ALL, ALL: None}

PRIOR_VAR = 0.25      # variance of a log-latency before anything is known (a factor of 1.65 either way)
SHRINK = 2.0          # pseudo degrees of freedom each prior is worth
JITTER_VAR = 0.0025   # one probe of an address against the next (5%)
DRIFT_PER_DAY = 0.01  # variance a measurement gains a day: routes change (10% in a day, 55% in a month)
MAX_Z2 = 16.0            # one error counts at most this much in a calibration
CALIBRATION_PRIOR = 5.0  # a calibration starts at 1, worth this many errors
MIN_MS = 0.01
VICINITY_K = 6      # organisations a triangulation averages over, at most
VICINITY_MIN = 3    # and at least
VICINITY_FROM = 2   # the crawlers nearest the organisation it triangulates from
VICINITY_GEOMETRY = 0.25  # the triangle inequality's bound, taken as two deviations
CACHE_LIMIT = 100_000  # addresses (and crawler-place pairs) whose groups (relations) are kept, at most
MIN_VAR = 1e-4


@dataclass(frozen=True)
class Estimate:
    """What the knowledge says of a crawler's latency to an address: ``mu`` (log ms) and
    ``var`` (its variance; ``inf``: nothing known), from ``source`` (a group key: ``("org",
    "ripencc:x")``, ``("node", Subnet)``..., ``("ip", address)``), backed by ``n`` measurements."""

    mu: float
    var: float
    source: tuple = ()
    n: int = 0
    scale: float = 1.0  # the calibration its variance was multiplied by

    @classmethod
    def exact(cls, ms: float) -> Estimate:
        """A probe of this very address just now."""
        return cls(math.log(max(ms, MIN_MS)) if math.isfinite(ms) else math.inf, 0.0, (EXACT,), 1)

    @property
    def known(self) -> bool:
        return math.isfinite(self.var)

    @property
    def ms(self) -> float:
        return math.exp(self.mu) if self.known and self.mu < 700 else math.inf

    @property
    def kind(self) -> str:
        return self.source[0] if self.source else ""

    @property
    def near(self) -> bool:
        """Backed by the address itself, its subnet or its organisation."""
        return self.kind in NEAR


UNKNOWN = Estimate(math.nan, math.inf)


@dataclass
class Measurement:
    """One (crawler, address) pair: log ms, its variance, when, how many measurements, and
    whether they were probes or fetches."""

    y: float
    var: float
    at: float
    count: int = 1
    origin: str = "probe"


class _Stat:
    """Count, sum, sum of squares and sum of times of values (one per address)."""

    __slots__ = ("n", "s1", "s2", "st")

    def __init__(self) -> None:
        self.n, self.s1, self.s2, self.st = 0, 0.0, 0.0, 0.0

    def add(self, y: float, at: float, sign: int) -> None:
        self.n += sign
        self.s1 += sign * y
        self.s2 += sign * y * y
        self.st += sign * at

    @property
    def ss(self) -> float:
        return max(0.0, self.s2 - self.s1 * self.s1 / self.n) if self.n > 1 else 0.0

    @property
    def dof(self) -> int:
        return max(0, self.n - 1)


class Knowledge:
    """Measured latencies between crawlers and addresses, and estimates for any address."""

    def __init__(self, hierarchy: Hierarchy, clock: Callable[[], float] | None = None,
                 drift_per_day: float = DRIFT_PER_DAY, prior_var: float = PRIOR_VAR) -> None:
        self.hierarchy = hierarchy
        self.clock = clock or time.time
        self.drift = drift_per_day / 86400.0
        self.prior_var = prior_var
        self.checks = 0
        self.surprises = 0
        self._pairs: dict[tuple[str, IPAddress], Measurement] = {}
        self._stats: dict[tuple[tuple, str], _Stat] = {}  # (group, crawler) -> over the group's units
        self._units: dict[tuple[tuple, str, object], tuple[float, float]] = {}  # (group, crawler, unit) -> value
        # (insertion-ordered dicts as sets: the same measurements give the same sums, run after run)
        self._org_units: dict[str, dict[tuple[tuple, str], None]] = {}  # org -> (group beyond it, crawler) it is in
        self._in_org: dict[str, dict[tuple[str, IPAddress], None]] = {}
        self._misleading: dict[tuple, set[tuple]] = {}  # anchor -> groups that misplace it
        self._surprise_cost = _Stat()
        self._misplaced: dict[tuple, float] = {}  # anchor (organisation...) -> chance its groups misplace it
        self._calibration: dict[str, _Stat] = {}  # kind of estimate -> squared standardised errors
        self._pooled: dict[tuple, list[float]] = {}  # group -> [ss, dof] over crawlers
        self._kinds: dict[str, list[float]] = {}  # kind -> [ss, dof] over its groups
        self._kind_vars: dict[str, float] = {}  # _kind_var's answers, until a spread changes
        self._in_subnet: dict[Subnet, dict[tuple[str, IPAddress], None]] = {}
        self._groups: dict[Subnet, list[tuple]] = {}
        # caches of what the hierarchy and the crawlers' addresses say (estimates ask them for
        # every crawler of every address): an address's groups, a crawler's relation to a place
        self._ip_groups: dict[IPAddress, list[tuple]] = {}
        self._relation: dict[tuple[str, tuple], str | None] = {}
        self._index = None
        self._ratio = _Stat()  # log(fetch ms / probe ms)
        self._homes: dict[str, IPAddress] = {}
        self._home_groups: dict[str, set[tuple]] = {}
        # how a crawler's address relates to a target's -> log ms, over every crawler and per crawler
        self._relations: dict[str, _Stat] = {}
        self._crawler_relations: dict[tuple[str, str], _Stat] = {}
        # address -> crawlers that measured it; how two crawlers' places relate -> the
        # differences of their log-latencies to the addresses both measured (both ways)
        self._at: dict[IPAddress, dict[str, None]] = {}
        self._peers: dict[str, _Stat] = {}
        self._placed: dict[tuple[str, str], str | None] = {}
        self._placed_far: dict[tuple[str, str, tuple], str | None] = {}  # _placed_for's, by the address's place
        # anchor -> crawler -> [sum, count] of its log-latencies to the anchor's measured addresses;
        # (crawler p, crawler c) -> anchor -> (p's mean, c's mean) where both measured it; sorted arrays
        self._anchor_y: dict[tuple, dict[str, list[float]]] = {}
        self._anchor_order: dict[tuple, list[tuple[float, str]]] = {}  # its crawlers by their mean, kept
        self._pairs_at: dict[tuple[str, str], dict[tuple, tuple[float, float]]] = {}
        self._pairs_sorted: dict[tuple[str, str], tuple[list[float], list[float], list[tuple]]] = {}

    def add_crawler(self, crawler_id: str, ip: IPAddress) -> None:
        """Where a crawler is: its estimates start from how near crawlers so placed were."""
        self._homes[crawler_id] = ip
        self._home_groups.pop(crawler_id, None)
        self._relation, self._placed, self._placed_far = {}, {}, {}

    # -- measuring ------------------------------------------------------------------------

    def observe(self, crawler_id: str, ip: IPAddress, ms: float, origin: str = "probe", var: float | None = None,
                replace: bool = False) -> Measurement:
        """Keep a measurement (``inf``: unreachable). A second one of the same pair is averaged
        with the first, the older weighing less the older it is; ``replace`` forgets the old."""
        now = self.clock()
        y = math.log(max(ms, MIN_MS)) if math.isfinite(ms) else math.inf
        var = JITTER_VAR if var is None else var
        key = (crawler_id, ip)
        old = self._pairs.get(key)
        count = 1
        if old is not None and not replace and math.isfinite(old.y) and math.isfinite(y):
            w_old, w_new = 1 / (old.var + self.drift * (now - old.at)), 1 / var
            y, var, count = (w_old * old.y + w_new * y) / (w_old + w_new), 1 / (w_old + w_new), old.count + 1
            origin = old.origin if old.origin == "probe" else origin
        org = self._org(ip)
        if (RELATION, self.relation(crawler_id, ip)) not in self._misleading.get(self.anchor(ip), ()):
            if old is not None:
                self._relate(crawler_id, ip, old.y, old.at, -1)
            self._relate(crawler_id, ip, y, now, +1)
        measurement = Measurement(y, var, now, count, origin)
        self._peer(crawler_id, ip, old.y if old is not None else None, y)
        self._pairs[key] = measurement
        self._update(crawler_id, ip, (y, now) if math.isfinite(y) else None)
        self._vicinity_update(crawler_id, ip, old.y if old is not None else None, y)
        subnet = self.hierarchy.smallest(ip)
        if subnet is not None:
            self._in_subnet.setdefault(subnet, {})[key] = None
        if org is not None:
            self._in_org.setdefault(org, {})[key] = None
        return measurement

    def _peer(self, crawler_id: str, ip: IPAddress, before: float | None, after: float) -> None:
        """The crawler's log-latency to ``ip`` went from ``before`` to ``after``: its differences
        with every other crawler that measured ``ip``, by how their places relate."""
        seen = self._at.setdefault(ip, {})
        for other in seen:
            theirs = self._pairs[other, ip].y
            placed = self._placed_for(crawler_id, other, ip)
            if other == crawler_id or placed is None or not math.isfinite(theirs):
                continue
            stat = self._peers.setdefault(placed, _Stat())
            for value, sign in ((before, -1), (after, +1)):
                if value is not None and math.isfinite(value):
                    stat.add(value - theirs, 0.0, sign)
                    stat.add(theirs - value, 0.0, sign)
        seen[crawler_id] = None

    def _vicinity_update(self, crawler_id: str, ip: IPAddress, before: float | None, after: float) -> None:
        """The crawler's mean log-latency to the address's anchor (organisation), and the pairs
        of means it shares with every other crawler that measured that anchor."""
        anchor = self.anchor(ip)
        values = self._anchor_y.setdefault(anchor, {})
        self._anchor_order.pop(anchor, None)
        total = values.setdefault(crawler_id, [0.0, 0])
        for value, sign in ((before, -1), (after, +1)):
            if value is not None and math.isfinite(value):
                total[0] += sign * value
                total[1] += sign
        if total[1] <= 0:
            values.pop(crawler_id, None)
            mine = None
        else:
            mine = total[0] / total[1]
        for other, theirs in values.items():
            if other == crawler_id:
                continue
            their_mean = theirs[0] / theirs[1]
            for key, point in (((other, crawler_id), (their_mean, mine)), ((crawler_id, other), (mine, their_mean))):
                points = self._pairs_at.setdefault(key, {})
                if mine is None:
                    points.pop(anchor, None)
                else:
                    points[anchor] = point
                self._pairs_sorted.pop(key, None)

    def _from_vicinity(self, crawler_id: str, ip: IPAddress, now: float) -> list[Estimate]:
        """Triangulation: the crawler ``p`` that measured the address's organisation nearest
        places it about that far from ``p``; the organisations ``p`` measured about as near,
        and this crawler measured too, say how far this crawler is from there (the mean of
        its latencies to the VICINITY_K of them nearest in ``p``'s latency; their spread, and
        how far they were from ``p``'s latency to this one, its variance)."""
        anchor = self.anchor(ip)
        values = self._anchor_y.get(anchor)
        if not values:
            return []
        order = self._anchor_order.get(anchor)
        if order is None:  # asked for every crawler, again after every probe: sorted once
            order = self._anchor_order[anchor] = sorted((total[0] / total[1], other) for other, total in values.items()
                                                        if total[1] > 0)
        known = [(x, other) for x, other in order[:VICINITY_FROM + 1] if other != crawler_id][:VICINITY_FROM]
        best, cc_var = None, None
        for x, other in known:
            pair = self._pairs.get((other, ip))
            if pair is not None and math.isfinite(pair.y):
                x = pair.y
            if not math.isfinite(x):
                continue
            found = self._pairs_sorted.get((other, crawler_id))
            if found is None:
                points = self._pairs_at.get((other, crawler_id), {})
                order = sorted(points.items(), key=lambda item: item[1][0])
                found = self._pairs_sorted[other, crawler_id] = (
                    [p[0] for _, p in order], [p[1] for _, p in order], [a for a, _ in order])
            xs, ys, anchors = found
            if len(xs) < VICINITY_MIN:
                continue
            at = bisect.bisect_left(xs, x)
            lo, hi = max(0, at - VICINITY_K - 1), min(len(xs), at + VICINITY_K + 1)
            window = sorted((abs(xs[i] - x), i) for i in range(lo, hi) if anchors[i] != anchor)[:VICINITY_K]
            n = len(window)
            if n < VICINITY_MIN:
                continue
            mean = sum(ys[i] for _, i in window) / n
            spread = sum((ys[i] - mean) ** 2 for _, i in window)
            if not math.isfinite(spread):
                continue
            if cc_var is None:
                cc_var = self._kind_var(CC)
            # the triangle inequality: the organisation and its neighbours, both about e^x from p,
            # may be up to twice that apart, so from p far away (x over the mean) nothing is told
            bound = math.log1p(2 * math.exp(min(700.0, x - mean)))
            var = ((spread + SHRINK * cc_var) / (n - 1 + SHRINK) * (1 + 1 / n)
                   + sum(dx * dx for dx, _ in window) / n + VICINITY_GEOMETRY * bound * bound)
            if best is None or var < best.var:
                best = Estimate(mean, var, (VICINITY, other), n)
        return [self._calibrated(best)] if best is not None else []

    def _placed_for(self, crawler_id: str, other: str, ip: IPAddress) -> str | None:
        """How two crawlers' places relate, and whether ``ip`` shares no group with either (a
        host far from both: two crawlers of one region differ less there than next door). It
        depends on the address only by its place (its narrowest group), and is kept by it."""
        key = (crawler_id, other, self.groups(ip)[0])  # groups first: it renews the caches if the hierarchy changed
        if key in self._placed_far:
            return self._placed_far[key]
        placed = self.placed(crawler_id, other)
        if placed is not None and other != crawler_id:
            far = all(str(self.relation(c, ip)).startswith("none") for c in (crawler_id, other))
            placed = f"{placed}>far" if far else placed
        if len(self._placed_far) >= CACHE_LIMIT:
            self._placed_far = {}
        self._placed_far[key] = placed
        return placed

    def placed(self, crawler_id: str, other: str) -> str | None:
        """The kind of the narrowest group holding both crawlers' addresses (``"none"``: only
        everything; ``None``: one of them is not known)."""
        key = (crawler_id, other) if crawler_id < other else (other, crawler_id)
        homes = [self._homes.get(c) for c in key]
        if None in homes:
            return None
        groups = self.groups(homes[0])  # first: it renews the caches if the hierarchy changed
        if key not in self._placed:
            shared = set(self.groups(homes[1])) - {(ALL,)}
            self._placed[key] = next((_kind(g) for g in groups if g in shared), "none")
        return self._placed[key]

    def fetched(self, crawler_id: str, ip: IPAddress, ms: float) -> None:
        """A fetch (GET or HEAD) time of a page on ``ip``: it teaches how fetch times relate to
        probes where the pair was probed, and stands for a probe where it was not."""
        if not math.isfinite(ms) or ms <= 0:
            return
        pair = self._pairs.get((crawler_id, ip))
        if pair is not None and pair.origin == "probe":
            if math.isfinite(pair.y):
                self._ratio.add(math.log(ms) - pair.y, 0.0, +1)
            return
        if self._ratio.n == 0:
            return
        mean, var = self._ratio.s1 / self._ratio.n, self._ratio_var()
        self.observe(crawler_id, ip, ms / math.exp(mean), origin="fetch", var=var + JITTER_VAR)

    def rerouted(self, crawler_id: str, ip: IPAddress, ms: float, previous_ms: float | None) -> Measurement:
        """Slow fetches proved the route from the crawler to ``ip`` changed: what was measured
        before is replaced, scaled by the slowdown (``previous_ms``: the earlier fetch time)."""
        pair = self._pairs.get((crawler_id, ip))
        if pair is not None and math.isfinite(pair.y) and previous_ms:
            latency = math.exp(pair.y) * ms / previous_ms
        else:
            latency = ms / math.exp(self._ratio.s1 / self._ratio.n if self._ratio.n else 0.0)
        return self.observe(crawler_id, ip, latency, origin="fetch", replace=True)

    def check(self, estimate: Estimate, ms: float, ip: IPAddress, count: bool = True,
              calibrate: bool = True) -> bool:
        """A probe of ``ip`` (``ms``) against what was estimated. Every probe calibrates its
        kind of estimate: the mean squared standardised error of the estimates a kind gave
        multiplies the variance of the next ones (selective probing and a world unlike the
        model make spreads look smaller than they are). A probe against an estimate from
        beyond the address's subnet and organisation also updates the chance that those groups
        misplace the address (:meth:`misplaced`); over a half, it was a surprise, and the group
        that gave the estimate is no longer used for the organisation (:meth:`mislead`).
        ``count``: it was the probe of the crawler about to be chosen, which is what
        :attr:`surprise_rate` is the rate of. ``calibrate=False``: a probe chosen where the
        estimate looked likely wrong in one direction, whose error would bias the
        calibration. Returns whether it was a surprise."""
        if not estimate.known:
            return False
        y = math.log(max(ms, MIN_MS)) if math.isfinite(ms) else math.inf
        error = y - estimate.mu
        if calibrate and math.isfinite(error) and estimate.var > 0:
            z2 = error * error * estimate.scale / estimate.var
            self._calibration.setdefault(_calibration_key(estimate), _Stat()).add(min(z2, MAX_Z2), 0.0, +1)
        if estimate.near:
            return False
        posterior = self._misplacement(self.misplaced(ip), estimate, error)
        self._misplaced[self.anchor(ip)] = posterior
        if count:
            self.checks += 1
            self.surprises += posterior
        if posterior > 0.5:
            self.mislead(ip, estimate.source)
        return posterior > 0.5

    def _misplacement(self, prior: float, estimate: Estimate, error: float) -> float:
        """Bayes between two accounts of a probe ``error`` (log ms) off its estimate: the
        estimate holds, or the address is anywhere (a spread as wide as everything's). Only
        slowness counts: nearer than estimated is no sign of a crawler nearer still."""
        slower = max(error, 0.0)
        if not math.isfinite(slower) or estimate.var <= 0:
            return 1.0
        wide = estimate.var + self._kind_var(ALL)
        told = (1 - prior) * math.exp(-slower * slower / (2 * estimate.var)) / math.sqrt(estimate.var)
        anywhere = prior * math.exp(-slower * slower / (2 * wide)) / math.sqrt(wide)
        return anywhere / (anywhere + told) if anywhere + told > 0 else 1.0

    def misplaced(self, ip: IPAddress) -> float:
        """The chance that the groups beyond the address's organisation misplace it: what its
        probes so far said, else the rate of surprises."""
        return self._misplaced.get(self.anchor(ip), self.surprise_rate)

    def mislead(self, ip: IPAddress, group: tuple) -> None:
        """``group`` (or the relation of a crawler's place to the address's) misplaces the
        address's organisation (an LIR block of another country, a registry's block hosted on
        another continent): it is no longer used for the organisation's addresses, and their
        measurements leave it, where they would mislead estimates of its other members."""
        anchor = self.anchor(ip)
        misleading = self._misleading.setdefault(anchor, set())
        if group in misleading or group[0] in NEAR or group[0] == ALL:
            return
        misleading.add(group)
        if anchor[0] != ORG:
            return
        for known, crawler_id in list(self._org_units.get(anchor[1], ())):
            if known == group:
                self._set_unit(group, crawler_id, anchor, None)
                self._org_units[anchor[1]].pop((known, crawler_id), None)
        if group[0] == RELATION:
            for crawler_id, member in self._in_org.get(anchor[1], ()):
                pair = self._pairs[crawler_id, member]
                if self.relation(crawler_id, member) == group[1]:
                    self._relate(crawler_id, member, pair.y, pair.at, -1)

    def surprise_cost(self, regret: float) -> None:
        """What trusting a surprised estimate would have cost: the share of its cost saved."""
        self._surprise_cost.add(max(0.0, regret), 0.0, +1)

    @property
    def surprise_regret(self) -> float:
        """The mean of :meth:`surprise_cost` (a half, worth two surprises, to start)."""
        return (self._surprise_cost.s1 + 2 * 0.5) / (self._surprise_cost.n + 2)

    @property
    def surprise_rate(self) -> float:
        """How often the estimate of the crawler about to be chosen, when nothing near backed
        it, misplaced the address (the mean chance; one in ten to start)."""
        return (self.surprises + 1) / (self.checks + 10)

    # -- estimating -----------------------------------------------------------------------

    def estimate(self, crawler_id: str, ip: IPAddress) -> Estimate:
        """What is known of the crawler's latency to ``ip``: the pair itself if measured; else
        the narrowest of the address's subnet, blocks and organisation in which the crawler
        measured something; else, of the groups beyond and where the crawler is, the one with
        the smallest variance; groups that misplaced the address's organisation left out
        (:meth:`mislead`). Variances are calibrated (:meth:`check`). A crawler that never
        measured anything in the address's broadest group (its registry) is unknown there:
        neither its registry nor other crawlers' say where a crawler really is."""
        now = self.clock()
        pair = self._pairs.get((crawler_id, ip))
        if pair is not None:
            return self._calibrated(Estimate(pair.y, pair.var + self.drift * (now - pair.at), (IP, ip), pair.count))
        options = []
        groups = self.groups(ip)
        broadest = self._stats.get((groups[-2], crawler_id)) if len(groups) > 1 else None
        if len(groups) > 1 and (broadest is None or not broadest.n):
            return UNKNOWN  # never measured in the address's registry (its broadest group): anything goes
        misleading = self._misleading.get(self.anchor(ip), ())
        peers = self._from_peers(crawler_id, ip, now) + self._from_vicinity(crawler_id, ip, now)
        for group in groups:
            stat = self._stats.get((group, crawler_id))
            if stat is None or not stat.n or group in misleading:
                continue
            var = self._within(group, crawler_id, stat) * (1 + 1 / stat.n) + self.drift * (now - stat.st / stat.n)
            found = self._calibrated(Estimate(stat.s1 / stat.n, var, group, stat.n))
            if found.near:
                return min([found] + peers, key=lambda e: e.var)
            options.append(found)
        options += peers
        relation = self.relation(crawler_id, ip)
        if relation in self._relations and self._relations[relation].n and (RELATION, relation) not in misleading:
            options.append(self._calibrated(self._by_relation(relation, crawler_id)))
        return min(options, key=lambda e: e.var, default=UNKNOWN)

    def _from_peers(self, crawler_id: str, ip: IPAddress, now: float) -> list[Estimate]:
        """The closest prediction from the crawlers that measured ``ip`` itself: a crawler
        next door to one that measured it is likely as near or as far, one across the world
        anything; the spread of the differences between crawlers so placed says how much."""
        best = None
        for other in self._at.get(ip, ()):
            pair = self._pairs[other, ip]
            placed = self._placed_for(crawler_id, other, ip)
            stat = self._peers.get(placed) if placed is not None else None
            if other == crawler_id or stat is None or not math.isfinite(pair.y):
                continue
            var = ((stat.ss + SHRINK * self._kind_var(ALL)) / (stat.dof + SHRINK) + pair.var
                   + self.drift * (now - pair.at))
            if best is None or var < best.var:
                best = Estimate(pair.y, var, (PEER, placed, other), 1)
        return [self._calibrated(best)] if best is not None else []

    def _calibrated(self, estimate: Estimate) -> Estimate:
        stat = self._calibration.get(_calibration_key(estimate))
        scale = (stat.s1 + CALIBRATION_PRIOR) / (stat.n + CALIBRATION_PRIOR) if stat else 1.0
        return Estimate(estimate.mu, estimate.var * scale, estimate.source, estimate.n, scale)

    def _by_relation(self, relation: str, crawler_id: str) -> Estimate:
        """What crawlers placed alike measured, shrunk towards everything's spread (a crawler in
        the same registry may be next door or across a continent); and this crawler's own
        measurements so related, which count more the more of them there are (a crawler may
        not be where its registry says either)."""
        pooled = self._relations[relation]
        mean, spread = pooled.s1 / pooled.n, (pooled.ss + SHRINK * self._kind_var(ALL)) / (pooled.dof + SHRINK)
        own = self._crawler_relations.get((relation, crawler_id))
        n = own.n if own is not None else 0
        if n:
            mean = (own.s1 + SHRINK * mean) / (n + SHRINK)
            spread = (own.ss + SHRINK * spread) / (own.dof + SHRINK)
        return Estimate(mean, spread * (1 + 1 / (n + SHRINK)), (RELATION, relation), n)

    def measured(self, subnet: Subnet) -> dict[str, float]:
        """Crawler -> ms measured to addresses of ``subnet`` (their geometric mean)."""
        logs: dict[str, list[float]] = {}
        for crawler_id, ip in self._in_subnet.get(subnet, ()):
            logs.setdefault(crawler_id, []).append(self._pairs[crawler_id, ip].y)
        return {c: math.exp(sum(ys) / len(ys)) if all(map(math.isfinite, ys)) else math.inf for c, ys in logs.items()}

    def groups(self, ip: IPAddress) -> list[tuple]:
        """The groups ``ip`` belongs to, the narrowest first."""
        if self._index is not self.hierarchy.index:
            self._index, self._groups, self._home_groups, self._placed = self.hierarchy.index, {}, {}, {}
            self._placed_far = {}
            self._ip_groups, self._relation = {}, {}
        found = self._ip_groups.get(ip)
        if found is not None:
            return found
        if len(self._ip_groups) >= CACHE_LIMIT:  # a long-lived worker meets ever more addresses
            self._ip_groups = {}
        subnet = self.hierarchy.smallest(ip)
        if subnet is None:  # outside the hierarchy: kept by address only (bounded above)
            found = _prefix_groups(ip)
        else:
            found = self._groups.get(subnet)
            if found is None:
                found = self._groups[subnet] = self._subnet_groups(subnet)
        self._ip_groups[ip] = found
        return found

    def relation(self, crawler_id: str, ip: IPAddress) -> str | None:
        """The kind of the narrowest group holding both ``ip`` and the crawler's address
        (``"none>A>B"``: only everything, the crawler in registry A, the address in B;
        ``"none"``: only everything, a registry not known; ``None``: the crawler's address is
        not known)."""
        groups = self.groups(ip)
        key = (crawler_id, groups[0])  # the address's narrowest group: its place
        if key in self._relation:
            return self._relation[key]
        if len(self._relation) >= CACHE_LIMIT:
            self._relation = {}
        found = self._relation[key] = self._relate_places(crawler_id, groups)
        return found

    def _relate_places(self, crawler_id: str, groups: list[tuple]) -> str | None:
        home = self._homes.get(crawler_id)
        if home is None:
            return None
        shared = self._home_groups.get(crawler_id)
        if shared is None:
            shared = self._home_groups[crawler_id] = set(self.groups(home)) - {(ALL,)}
        found = next((_kind(g) for g in groups if g in shared), None)
        if found is not None:
            return found
        # no group in common: by the crawler's registry and the address's (crawlers of one region
        # are about as far from another region's hosts: they teach each other where it is)
        theirs = next((g[1] for g in groups if g[0] == REGISTRY), "")
        mine = next((g[1] for g in shared if g[0] == REGISTRY), "")
        return f"none>{mine}>{theirs}" if mine and theirs else "none"

    def _subnet_groups(self, subnet: Subnet) -> list[tuple]:
        """Narrowest first: the subnet, its subtree if it has subnets inside, its ancestors
        inside its organisation's blocks, the organisation, the ancestors beyond it, the
        country, the registry, everything."""
        hierarchy = self.hierarchy
        org = hierarchy.organisation(subnet)
        inside: list[tuple] = [(SUBNET, subnet)]
        beyond: list[tuple] = []
        cc = registry = ""
        # a subnet with subnets inside: their addresses tell of its own (its subtree is a block)
        node = subnet if hierarchy.children(subnet) else hierarchy.parent(subnet)
        while node is not None:
            if org is not None and not beyond and hierarchy.organisation(node) == org:
                inside.append((BLOCK, node))
            else:
                beyond.append((NODE, node))
            node = hierarchy.parent(node)
        for node in [subnet] + [g[1] for g in inside[1:] + beyond]:
            cc = cc or (node.cc if node.cc not in ("", "ZZ") else "")
            registry = registry or node.registry
        groups = inside + ([(ORG, org)] if org is not None else []) + beyond
        groups += [(CC, cc)] if cc else []
        groups += [(REGISTRY, registry)] if registry else []
        return groups + [(ALL,)]

    # -- learning the spreads -------------------------------------------------------------

    def _update(self, crawler_id: str, ip: IPAddress, value: tuple[float, float] | None) -> None:
        """The crawler's value (log ms, time) at ``ip`` changed. Each group holds one value
        per unit, valued at the unit's own mean: a subnet's units are addresses, a block's the
        subnets or blocks inside it, the organisation's its blocks, and every group beyond the
        organisation counts organisations; so a country's spread is between its organisations,
        whichever has many addresses measured. An organisation stays out of the groups that
        misplaced it."""
        groups = self.groups(ip)
        org = next((g for g in groups if g[0] == ORG), None)
        anchor = org or groups[0]
        misleading = self._misleading.get(anchor, ())
        unit: object = ip
        beyond = False
        for group in groups:
            if group in misleading:
                continue
            stat = self._set_unit(group, crawler_id, unit, value)
            if beyond and org is not None:
                self._org_units.setdefault(org[1], {})[group, crawler_id] = None
            if not beyond:
                unit, value = group, (stat.s1 / stat.n, stat.st / stat.n) if stat.n else None
                beyond = group == anchor

    def _set_unit(self, group: tuple, crawler_id: str, unit: object, value: tuple[float, float] | None) -> _Stat:
        stat = self._stats.setdefault((group, crawler_id), _Stat())
        ss, dof = stat.ss, stat.dof
        before = self._units.pop((group, crawler_id, unit), None)
        if before is not None:
            stat.add(*before, -1)
        if value is not None:
            stat.add(*value, +1)
            self._units[group, crawler_id, unit] = value
        for total in (self._pooled.setdefault(group, [0.0, 0.0]), self._kinds.setdefault(_kind(group), [0.0, 0.0])):
            total[0] += stat.ss - ss
            total[1] += stat.dof - dof
        self._kind_vars.clear()
        return stat

    def _relate(self, crawler_id: str, ip: IPAddress, y: float, at: float, sign: int) -> None:
        relation = self.relation(crawler_id, ip)
        if relation is not None and math.isfinite(y):
            self._relations.setdefault(relation, _Stat()).add(y, at, sign)
            self._crawler_relations.setdefault((relation, crawler_id), _Stat()).add(y, at, sign)

    def _org(self, ip: IPAddress) -> str | None:
        return next((g[1] for g in self.groups(ip) if g[0] == ORG), None)

    def anchor(self, ip: IPAddress) -> tuple:
        """The group a decision for ``ip`` teaches about: its organisation (else its subnet,
        else its /24 or /48)."""
        groups = self.groups(ip)
        return next((g for g in groups if g[0] == ORG), groups[0])

    def _within(self, group: tuple, crawler_id: str, stat: _Stat) -> float:
        """How much the crawler's log-latency varies between addresses of ``group``."""
        ss, dof = self._pooled.get(group, (0.0, 0.0))
        pooled = (ss + SHRINK * self._kind_var(_kind(group))) / (dof + SHRINK)
        return (stat.ss + SHRINK * pooled) / (stat.dof + SHRINK)

    def _kind_var(self, kind: str) -> float:
        """Pooled over every group of the kind, shrunk towards the broader kind's in log space
        (spreads of different kinds differ by orders of magnitude: a building against a continent)."""
        found = self._kind_vars.get(kind)
        if found is None:
            found = self._kind_vars[kind] = self._kind_var_now(kind)
        return found

    def _kind_var_now(self, kind: str) -> float:
        ss, dof = self._kinds.get(kind, (0.0, 0.0))
        broader = BROADER.get(kind.split("/")[0])
        prior = self._kind_var(broader) if broader else self.prior_var
        if dof <= 0:
            return prior
        return math.exp((dof * math.log(max(ss / dof, MIN_VAR)) + SHRINK * math.log(prior)) / (dof + SHRINK))

    def _ratio_var(self) -> float:
        return (self._ratio.ss + SHRINK * 0.1) / (self._ratio.dof + SHRINK)


def _kind(group: tuple) -> str:
    """Groups pool their spreads by kind; ancestors by address family and size (a /8 is a
    continent where a /20 is a building)."""
    if group[0] in (NODE, BLOCK):
        network = group[1].network
        return f"{group[0]}/{network.version}/{network.prefixlen // (4 if network.version == 4 else 8)}"
    return group[0]


def _calibration_key(estimate: Estimate) -> str:
    if estimate.kind in (RELATION, PEER):
        return f"{estimate.kind}/{str(estimate.source[1]).split('>')[0]}"
    if estimate.kind == VICINITY:
        return VICINITY
    return _kind(estimate.source) if estimate.kind in (NODE, BLOCK) else estimate.kind


def _prefix_groups(ip: IPAddress) -> list[tuple]:
    lengths = (24, 16) if ip.version == 4 else (48, 32)
    return [(PREFIX, ipaddress.ip_network(f"{ip}/{n}", strict=False)) for n in lengths] + [(ALL,)]
