"""Delegation from what is known (issue 20; the default, ``Delegator(strategy="knowledge")``).

Every probe is kept (:mod:`webrace.delegation.knowledge`), so every crawler has, for any
address, an estimate of its latency with an uncertainty: exact where it probed that address,
tight where it probed the same subnet or organisation, wider where only siblings, ancestors,
the country or the registry were probed. For a URL:

1. its subnet is delegated and the crawler has room: that crawler, no probe;
2. else every crawler's total cost is its estimated latency plus what it costs to make room
   on it: 0 with room; else moving pages along a chain of full crawlers to one with room,
   the shortest by Bellman-Ford, as the successive-shortest-path algorithm for the min-cost
   assignment does. A page moves by a cautious estimate of where it goes (one deviation up:
   little known, little trusted), and the estimates of the pages that may move are renewed
   as knowledge grows; cycles of moves that save latency are made on the way;
3. the cheapest (``best``) is chosen unless a probe is worth more than it costs: the
   expected regret of choosing it is the share of its cost the cheapest rival would save,
   E[(1 - cheapest/best)+] over the log-normal estimates, and each rival's part of it is what
   it saves where it is the cheapest of them (rivals compete for the same regret: counted
   rival by rival, E[(1 - rival/best)+] each, ten near-tied rivals would count it about ten
   times, and a region with many crawlers would be probed crawler after crawler); a probe of
   the rival takes its part of that regret, a probe of ``best`` the rest (shared by their
   variances); and for a crawler
   estimated from beyond the URL's subnet and organisation, the chance that those groups
   misplace it (registries place hosts wrongly now and then) times what that costs, all of it
   for ``best``, a share for each rival (the nearest could then be anybody). What a probe
   teaches of an organisation serves the pages that will follow in it, so for an estimate
   from beyond the organisation its worth is multiplied by the pages the organisation has had
   (the best guess of those to come). The most worthy probe is sent while it is worth more than
   ``regret`` (the delegator's: 0.003 of a page's latency; three times that while some
   crawler is full, see ``CROWDED``), and the choice made again, every crawler not probed
   yet estimated again from what the probe taught: of the crawlers placed alike to the one
   probed (:meth:`Knowledge.estimate`, from peers), and, where it surprised its estimate
   (:meth:`Knowledge.check`), without the group that gave it, which leaves the organisation's
   estimates;
4. the subnet is delegated to the nearest crawler; the page goes to the chosen one, and the
   pages on the chain move;
5. in a batch of known size (``horizon``), its last tenth starts by probing where the
   assignment of the pages placed so far is least sure (:meth:`KnowledgePolicy.inquire`), and
   after its last URL every page is assigned again, as a whole (:meth:`KnowledgePolicy.settle`):
   each page was placed by what was known when it came, and the run has learnt since.

So a probe is sent only where the kept knowledge cannot decide, and as knowledge grows the
cost per URL falls. Calibration re-decides a subnet whose crawler's fetches got slow from the
same knowledge, the crawler's latency there replaced by what the fetches show.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from webrace.delegation.decisions import (
    BALANCED,
    DELEGATED,
    KNOWN,
    PROBED,
    RECALIBRATED,
    CapacityError,
    Decision,
    Move,
    Session,
)
from webrace.delegation.hierarchy import IPAddress, Subnet
from webrace.delegation.knowledge import EXACT, IP, MIN_MS, Estimate

if TYPE_CHECKING:
    from webrace.delegation.ledger import Ledger

Room = dict[str, float]  # crawler -> ms it costs to make room for one more page on it
MAX_CANCELS = 100  # cycles cancelled while looking for room, at most
CAUTION = 0.5  # a page is moved by the latency it would have half a deviation above its estimate
# While some crawler is full, a probe is sent only when worth CROWDED times ``regret``: the
# cost of making room is an estimate of other pages' latencies that no probe of this URL
# settles, so a probe resolves less of the choice than its expected regret says. Chosen on
# the bench's range worlds (tight capacity: 1.39 -> 0.80 probes per URL in the last 10%, the
# latency unchanged), checked on held-out draws it was not chosen on.
CROWDED = 3.0
# The price of a probe: ``regret`` while the run has spent no more than its budget (the
# delegator's ``probe_budget`` probes a URL, and ``probe_credit`` probes a crawler for
# learning where the crawlers are: probes early are an investment, a run that saves them
# then pays for it later, with more probes and more latency); every PRICE_SCALE probes over
# it multiply the price by e, up to MAX_PRICE times ``regret`` (over that, the latency lost
# costs more than the probes saved: at 50, a world lost a fifth of its latency). A budget,
# not a threshold, is what a run can promise: where every URL is in a new organisation and
# many crawlers are near-tied, the regret of a choice stays over any fixed threshold, and so
# would the probes.
PRICE_SCALE = 50.0
MAX_PRICE = 10.0
MAX_VERIFY = 3  # rounds of probing the pages a way to make room would move, at most
MAX_EXPLORE = 4  # probes of pages full crawlers hold, for one URL, at most (:meth:`KnowledgePolicy._explore`)
EXPLORE_WINDOW = 100  # URLs over which such probes are at most the delegator's ``explore`` a URL
# and over which all probes, the URL's own and the rest, stay under this a URL for exploring to go
# on: exploring spends what the choices leave, and most where crawlers fill up, the run's last URLs.
# On 52 capacity-bound worlds drawn over the bench's hard ranges: 0.8 and 0.9 gave the same misses
# of the last 10% goal (12 against 11 without exploring), 0.9 the lower latency.
EXPLORE_CEILING = 0.9
# In a batch (known ``horizon``), before its last tenth, what a probe teaches serves more of the
# URLs to come and the batch's settling at its end (:meth:`KnowledgePolicy.settle`): exploring
# may go on while the window's probes stay under EXPLORE_CEILING_EARLY a URL; and in a batch only
# while the run's stay under EXPLORE_TOTAL a URL (a margin under the 2 the bench asks). On the 52
# capacity-bound hard draws: goals missed 30 -> 27 (the last 10%: 6 -> 2), latency 1.0410x ->
# 1.0381x (geometric mean), probes 1.33 -> 1.40 a URL; without the run's bound 25 and 1.0358x,
# but up to 1.98 probes a URL where the bound keeps 1.80; an early ceiling of 1.2 gained less
# (29, 1.0383x).
EXPLORE_CEILING_EARLY = 1.5
EXPLORE_TOTAL = 1.8
# A probe of a page at a crawler teaches the route of every page of its organisation there: a
# pair's saving counts this share of each other page of the organisation that full crawlers hold
# (those a cheap route found would let go for the URLs to come). 0.5 and 1 gave the same.
EXPLORE_SHARE = 0.5
# pages a batch may have for its last URL to settle them (:meth:`KnowledgePolicy.settle`): 4,000
# pages at 1.1x capacity are a matrix of 4,000 x 4,400 (140 MB) and about a second
SETTLE_MAX_PAGES = 4000
# :meth:`KnowledgePolicy.inquire`, at the start of a batch's last tenth: pages (a share of those
# placed) whose pairs a round probes, and rounds, at most; and the batch's probes: what the run
# has spent and the round's stay under INQUIRE_TOTAL a URL of the whole batch less INQUIRE_RESERVE
# a URL it has left (its tail, which the round makes cheaper: 0.1 to 0.7 a URL on the bench's
# capacity-bound worlds; so the batch stays under the 2 the bench asks unless its tail spends over
# 1.1 a URL, when the tail's own goal is missed first). On the bench's two worlds that missed a goal
# (capacity 1.1x with half of the crawlers in one region; 32 crawlers at 2x): latency 1.047x ->
# 1.02x and 1.061x -> 1.02x. Batches of fewer than INQUIRE_MIN URLs have too few pages placed for
# a round to find a pattern in.
INQUIRE_BATCH = 0.1
INQUIRE_ROUNDS = 60
INQUIRE_TOTAL = 1.97
INQUIRE_RESERVE = 0.8
INQUIRE_MIN = 100
UNREACHABLE = 1e9  # ms: a cost the min-cost assignment never picks while anything else fits
REFRESH = 100  # pages placed (at least, and a tenth of all) between two estimations of the rows that may move
# Issue 48: a batch's work a URL independent of its size. Up to UNBOUNDED_PAGES pages placed (the
# bench's batches of 1,000 URLs, on which every rule was decided), what a probe teaches an
# organisation is applied to every page of it full crawlers hold, every crawler's estimate, and
# exploring weighs every page they hold; beyond, the probed crawler's estimates of ORG_ROWS of them
# at most (those on the probed page's crawler first; the rows' rolling estimation, ROLLING, brings
# the rest and the other crawlers'), and exploring weighs, of each full crawler, the EXPLORE_PAGES
# pages farthest from it (a move saves most where a page is far). With 100 crawlers and the largest
# organisation a seventh of the batch, re-estimating all of its pages' rows for every crawler after
# each exploring probe took 74% of a batch of 2,000 URLs and grew with the square of the batch.
UNBOUNDED_PAGES = 1000
ORG_ROWS = 256
EXPLORE_PAGES = 256
# beyond UNBOUNDED_PAGES, the rows estimated again are, every REFRESH pages placed, the ROLLING
# times that many estimated longest ago (a row every ROLLING-th of the pages placed), not every row
# every tenth of the pages placed: 10 rows a page, 1,000 estimates with 100 crawlers, half a batch's time
ROLLING = 3
EVENTS_MAX = 10_000  # pages' comings and goings kept for the stacks (:class:`_Stack`) before they are read


class _Stack:
    """One crawler's pages' rows stacked, a slot a page (slots of pages that left are reused):
    what :meth:`KnowledgePolicy._edges` and :meth:`KnowledgePolicy._explore` read, kept as pages
    come and go and rows are estimated again, instead of stacked anew from every page for every
    URL. ``edges``: :meth:`KnowledgePolicy._edges`' answer, until the stack changes."""

    __slots__ = ("arrays", "edges", "free", "keys", "slot", "width")

    def __init__(self, width: int) -> None:
        self.width = width
        self.slot: dict[str, int] = {}
        self.keys: list[str | None] = []
        self.free: list[int] = []
        self.arrays = [np.full((8, width), np.inf) for _ in range(4)]  # rows, cautious, mus, vars
        self.edges: dict[str, tuple[float, str]] | None = None

    def put(self, key: str, rows: list[np.ndarray]) -> None:
        i = self.slot.get(key)
        if i is None:
            if self.free:
                i = self.free.pop()
            else:
                i = len(self.keys)
                self.keys.append(None)
                if i >= len(self.arrays[0]):
                    self.arrays = [np.vstack([a, np.full(a.shape, np.inf)]) for a in self.arrays]
            self.slot[key] = i
            self.keys[i] = key
        for array, row in zip(self.arrays, rows, strict=True):
            array[i] = row
        self.edges = None

    def drop(self, key: str) -> None:
        i = self.slot.pop(key, None)
        if i is None:
            return
        self.keys[i] = None
        self.free.append(i)
        for array in self.arrays:
            array[i] = np.inf
        self.edges = None

    def live(self) -> np.ndarray:
        """The slots of the pages, in the order of their keys."""
        return np.array([i for _, i in sorted(self.slot.items())], dtype=int)


class KnowledgePolicy:
    """Decisions from the kept knowledge of one :class:`~webrace.delegation.delegator.Delegator`."""

    def __init__(self, delegator: Ledger) -> None:
        self.d = delegator
        self.knowledge = delegator.knowledge
        # page -> estimated ms from each crawler when it was placed: the median, and a cautious
        # one (a move to a crawler little is known of may cost more than it seems)
        self.rows: dict[str, np.ndarray] = {}
        self.cautious: dict[str, np.ndarray] = {}
        self.near: dict[str, np.ndarray] = {}  # 1 where the page's address, subnet or organisation backs the estimate
        # and the log-normal estimates themselves (variance 0 where the pair was measured: a
        # second probe of it would teach nothing a move needs)
        self.mus: dict[str, np.ndarray] = {}
        self.vars: dict[str, np.ndarray] = {}
        self.ips: dict[str, IPAddress] = {}
        self.stale = 0  # pages placed since the rows were last estimated again
        self.pages: dict[tuple, int] = {}  # organisation (or subnet) -> pages delegated in it
        self.urls = 0  # URLs decided
        self.spent = 0  # probes sent for them
        self.verified = 0  # probes of pages that may move, for the URL being decided
        # the URLs (by number) that probed a page a full crawler holds, one entry a probe (:meth:`_explore`)
        self.exploring: deque[int] = deque()
        self.recent: deque[tuple[int, int]] = deque()  # (URL number, its probes) over the last EXPLORE_WINDOW URLs
        self.recent_probes = 0  # their sum
        # issue 48: the full crawlers' pages' rows stacked, kept as pages move (the ledger's events)
        # and rows are estimated again (``_restated``); every page's organisation, the pages of
        # each, and how many of them each crawler holds
        self._stacks: dict[str, _Stack] = {}
        self._restated: set[str] = set()
        self._age: dict[str, None] = {}  # pages, their rows estimated longest ago first
        self.anchors: dict[str, tuple] = {}
        self.org_pages: dict[tuple, set[str]] = {}
        self.org_on: dict[tuple, dict[str, int]] = {}
        delegator._events = []

    def delegate(self, key: str, ip: IPAddress, subnet: Subnet | None) -> Decision:
        d = self.d
        owner = d.owner(subnet) if subnet is not None else None
        session = Session(d.prober, ip, self.knowledge)
        anchor = self.knowledge.anchor(ip)
        self.pages[anchor] = self.pages.get(anchor, 0) + 1
        self.urls += 1
        if owner is not None and d._room(owner, 1):
            return self._place(key, ip, subnet, owner, session, DELEGATED)
        cancelled: tuple[Move, ...] = ()
        self.verified = 0
        verified = 0
        explored = rounds = 0
        while True:  # each round probes pairs not probed before, MAX_VERIFY and MAX_EXPLORE at most: it ends
            room, via, cycle = self.room()
            cancelled += cycle
            chosen, estimates = self.choose(ip, session, room)
            if (explored < MAX_EXPLORE and self._may_explore(len(session.results) + self.verified + verified)
                    and self._explore(chosen, estimates, room)):
                explored += 1
                self.exploring.append(self.urls)
                continue
            if d._room(chosen, 1):
                break
            probed, surprised = self._verify(chosen, via)
            verified += probed
            rounds += 1
            if not surprised or rounds >= MAX_VERIFY:
                break
        verified += self.verified
        self.spent += len(session.results) + verified
        self.recent.append((self.urls, len(session.results) + verified))
        self.recent_probes += len(session.results) + verified
        nearest = owner or min(((e.ms, n, c) for n, (c, e) in enumerate(estimates.items()) if e.known),
                               default=(0, 0, chosen))[2]
        if subnet is not None and owner is None:
            d._delegate(subnet, nearest)
        moves = cancelled + (self._make_room(chosen, via) if not d._room(chosen, 1) else ())
        reason = (BALANCED if moves or chosen != nearest else DELEGATED if owner
                  else PROBED if session.results else KNOWN)
        return self._place(key, ip, subnet, chosen, session, reason, moves, estimates, verified)

    def _may_explore(self, now: int) -> bool:
        """Whether the window has room for one more exploring probe: at most the delegator's
        ``explore`` of them a URL, and all probes (``now`` of them for this URL so far) under
        EXPLORE_CEILING a URL; in a batch, EXPLORE_CEILING_EARLY before its last tenth, and the
        run's probes under EXPLORE_TOTAL a URL. Never where pages cannot move (exploring looks for one to move)."""
        if not self.d.movable:
            return False
        while self.exploring and self.exploring[0] <= self.urls - EXPLORE_WINDOW:
            self.exploring.popleft()
        while self.recent and self.recent[0][0] <= self.urls - EXPLORE_WINDOW:
            self.recent_probes -= self.recent.popleft()[1]
        horizon = self.d.horizon
        if horizon is None:  # a stream: no end, no last tenth, no run's mean to keep
            ceiling, total = EXPLORE_CEILING, math.inf
        else:
            ceiling = EXPLORE_CEILING_EARLY if self.urls <= horizon - horizon // 10 else EXPLORE_CEILING
            total = EXPLORE_TOTAL * self.urls
        return (len(self.exploring) < self.d.explore * EXPLORE_WINDOW
                and self.recent_probes + now < ceiling * EXPLORE_WINDOW and self.spent + now < total)

    def _explore(self, chosen: str, estimates: dict[str, Estimate], room: Room) -> bool:
        """Where the URL's near crawlers are full, what it costs to make room on them rests
        on the other crawlers' latencies to the pages they hold, mostly estimates from beyond
        those pages' organisations: a page whose route to some far crawler is much shorter
        than its estimate says is the one to send away, and only a probe finds it. For every
        full crawler that would beat the choice were room cheaper on it, and every page on it
        and crawler it could move to, the expected saving of a probe of that pair is
        E[(t - X)+] over its log-normal estimate X, ``t`` the latency at which the move would
        make room cheaper than the choice costs now, counting EXPLORE_SHARE of it for each other
        page of the same organisation full crawlers hold (the probe teaches their route too);
        the pair most worth it is probed while it is worth more than a probe of the URL's own
        crawlers must be. Returns whether one was probed (the rows of its organisation's pages
        on full crawlers estimated again)."""
        from scipy.special import ndtr  # scipy takes a while to import: only where it is needed

        d = self.d
        ids = list(d.crawlers)
        total = estimates[chosen].ms + room[chosen]
        if not math.isfinite(total) or total <= 0:
            return False
        self._sync(ids)
        best_gain, best_pair = 0.0, None
        free = np.array([room[c] for c in ids])
        full = {c for c in ids if room[c] > 0}
        alike = self._alike_count(full)
        bounded = len(self.ips) > UNBOUNDED_PAGES
        for c in ids:
            if room[c] <= 0 or not estimates[c].known or estimates[c].ms >= total:
                continue
            stack = self._stack(c, ids)
            live = np.fromiter(stack.slot.values(), dtype=int, count=len(stack.slot))
            if not len(live):
                continue
            column = ids.index(c)
            rows, _, mus, variances = stack.arrays
            if bounded and len(live) > EXPLORE_PAGES:  # the pages farthest from c: a move saves most there
                live = live[np.argpartition(-rows[live, column], EXPLORE_PAGES)[:EXPLORE_PAGES]]
            self.d.stats["delegation/rows_weighed"] += len(live)
            mu = mus[live]
            sd = np.sqrt(variances[live])
            here = rows[live, column]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf - inf, log 0: no gain, below
                # the far latency below which moving the page makes room cheaper than the choice is
                t = (total - estimates[c].ms) + here[:, None] - free[None, :]
                d_ = (np.log(np.maximum(t, MIN_MS)) - mu) / sd
                gain = t * ndtr(d_) - np.exp(mu + sd * sd / 2) * ndtr(d_ - sd)
            gain[~np.isfinite(gain) | (t <= 0) | ~(sd > 0)] = 0.0
            gain[:, column] = 0.0
            keys = [stack.keys[i] for i in live]
            gain *= np.array([1.0 + EXPLORE_SHARE * (alike(self._anchor_of(key)) - 1) for key in keys])[:, None]
            most = float(gain.max())
            if most > best_gain:  # of pairs worth alike, the first page in key order, then crawler
                i, j = min((keys[i], j) for i, j in np.argwhere(gain == most))
                best_gain, best_pair = most, (i, ids[j])
        threshold = self.d.regret * max(self.price(), CROWDED)
        if best_pair is None or best_gain / total <= threshold:
            return False
        key, target = best_pair
        page_ip = self.ips[key]
        estimate = self.knowledge.estimate(target, page_ip)
        ms = Session(d.prober, page_ip, self.knowledge).probe(target)
        self.knowledge.check(estimate, ms, page_ip, count=False, calibrate=False)
        self.verified += 1
        self._teach(key, target, full)
        return True

    def _teach(self, key: str, target: str, full: set[str]) -> None:
        """A probe of page ``key`` by ``target`` taught its organisation: the rows of its pages
        the ``full`` crawlers hold estimated again; beyond UNBOUNDED_PAGES pages placed, ORG_ROWS
        of them at most, and only ``target``'s estimates (what the probe changes most; the other
        crawlers' are left to the rows' rolling estimation)."""
        ids = list(self.d.crawlers)
        pages = self._alike(self._anchor_of(key), full, self.d._page_crawler[key])
        if len(self.ips) <= UNBOUNDED_PAGES:
            for other in pages:
                other_ip = self.ips[other]
                self._set_row(other, {c: self.knowledge.estimate(c, other_ip) for c in ids})
            return
        column = ids.index(target)
        for other in pages:
            self._set_cell(other, column, self.knowledge.estimate(target, self.ips[other]))

    def _alike(self, anchor: tuple, full: set[str], first: str) -> list[str]:
        """The pages of the organisation ``anchor`` that the ``full`` crawlers hold, in key
        order; beyond UNBOUNDED_PAGES pages placed, ORG_ROWS of them at most, those on ``first``
        first."""
        crawler_of = self.d._page_crawler
        pages = sorted(key for key in self.org_pages.get(anchor, ()) if crawler_of.get(key) in full)
        if len(self.ips) > UNBOUNDED_PAGES and len(pages) > ORG_ROWS:
            pages = sorted(pages, key=lambda key: crawler_of[key] != first)[:ORG_ROWS]
        return pages

    def _alike_count(self, full: set[str]) -> Callable[[tuple], int]:
        """Organisation -> how many of its pages the ``full`` crawlers hold (asked again, remembered)."""
        counts: dict[tuple, int] = {}

        def count(anchor: tuple) -> int:
            found = counts.get(anchor)
            if found is None:
                found = counts[anchor] = sum(n for c, n in self.org_on.get(anchor, {}).items() if c in full)
            return found

        return count

    def _verify(self, crawler_id: str, via: dict[str, tuple[str, str]]) -> tuple[int, bool]:
        """Before pages move along the way found to make room on ``crawler_id``, each page
        that would move to a crawler whose latency to it nothing near backs (not measured in
        its subnet or organisation: a country's or a registry's estimate, which an
        organisation hosted elsewhere, or one block of it, belies) is probed there: a move is
        a delegation too, and an unchecked one is never checked later. Returns the probes
        sent and whether one showed a move slower than the cautious estimate it was chosen
        by (then the way is looked for again, with the rows of the pages that may move
        estimated again)."""
        d, knowledge = self.d, self.knowledge
        ids = list(d.crawlers)
        probes, surprised, seen, at = 0, False, {crawler_id}, crawler_id
        probed: list[tuple[str, str]] = []
        while not d._room(at, 1) and at in via and via[at][0] not in seen:
            target, key = via[at]
            seen.add(target)
            page_ip = self.ips[key]
            estimate = knowledge.estimate(target, page_ip)
            if not estimate.near:
                probed.append((key, target))
                used = self._row(self.cautious, key, len(ids))[ids.index(target)]
                ms = Session(d.prober, page_ip, knowledge).probe(target)
                knowledge.check(estimate, ms, page_ip, count=False)
                probes += 1
                surprised = surprised or not ms <= used
            at = target
        if surprised:
            full = [c for c in ids if not d._room(c, 1)]
            if len(self.ips) <= UNBOUNDED_PAGES:
                self._refresh(full)
            else:  # what the probes taught, of their organisations' pages
                for key, target in probed:
                    self._teach(key, target, set(full))
        return probes, surprised

    def worth(self, pages: int) -> float:
        """How many pages what a probe teaches of an organisation that has had ``pages``
        (this one among them) serves: this one and as many again to come, by the best guess;
        but no more than its share of what the run has left, where that is known: the places
        the crawlers have left, where capacities are limited (pages cannot come beyond them),
        and the URLs left of the delegator's ``horizon`` (a batch: an organisation that had 12
        of the first 900 URLs of 1,000 may have one or two of the last 100, not 12)."""
        d = self.d
        lefts = [max(0, d.horizon - self.urls)] if d.horizon is not None else []
        capacities = [c.capacity for c in d.crawlers.values()]
        if None not in capacities:
            lefts.append(max(0, sum(capacities) - sum(d._load.values()) - 1))
        if not lefts or not self.urls:
            return float(pages)
        return 1.0 + min(pages - 1.0, pages * min(lefts) / self.urls)

    def probe_results(self, subnet: Subnet) -> dict[str, float]:
        return self.knowledge.measured(subnet)

    def price(self) -> float:
        """What a probe must be worth, as a multiple of the delegator's ``regret``: 1 while the
        run has spent within its budget, e to the power of every PRICE_SCALE probes over it."""
        return min(MAX_PRICE, math.exp(min(50.0, max(0.0, self.overspent) / PRICE_SCALE)))

    @property
    def overspent(self) -> float:
        """Probes spent over the budget (negative: under it)."""
        d = self.d
        if d.probe_budget is None:
            return -math.inf
        return self.spent - d.probe_budget * self.urls - d.probe_credit * len(d.crawlers)

    # -- choosing -------------------------------------------------------------------------

    def choose(self, ip: IPAddress, session: Session, room: Room) -> tuple[str, dict[str, Estimate]]:
        """The cheapest crawler (latency + ``room``), probing while the expected regret of
        choosing now is over the delegator's ``regret``; and every crawler's estimate."""
        knowledge = self.knowledge
        # what a probe teaches of the organisation serves the pages that will follow in it (as
        # many as came before, by the best guess), where what it teaches of one host does not
        pages = self.worth(self.pages.get(knowledge.anchor(ip), 1))
        estimates = {c: knowledge.estimate(c, ip) for c in self.d.crawlers}
        candidates = {c: e for c, e in estimates.items() if math.isfinite(room[c])}
        if not candidates:
            raise CapacityError(self.d._full_message())
        trusted = None  # the first choice, when its probe was a surprise
        # a full crawler and an overspent budget are two reasons for a higher bar, not one on the other
        threshold = self.d.regret * max(self.price(), CROWDED if any(room[c] > 0 for c in candidates) else 1.0)
        while True:
            best = self._cheapest(candidates, room)
            regrets = {c: regret * (1 if candidates[c].near else pages)
                       for c, regret in _regrets(best, candidates, room).items()}
            gains = self._gains(best, candidates, regrets, session)
            # if the groups misplace the address, the nearest may be anybody estimated from them
            misplaced = knowledge.misplaced(ip) * knowledge.surprise_regret * pages
            for c in gains:
                if not candidates[c].near and len(candidates) > 1:
                    gains[c] += misplaced if c == best else misplaced / len(candidates)
            probed = max(gains, key=gains.__getitem__, default=None)
            if probed is None or gains[probed] <= threshold:
                break
            before = candidates[probed]
            candidates[probed] = estimates[probed] = Estimate.exact(session.probe(probed))
            surprised = knowledge.check(before, session.results[probed], ip, count=probed == best)
            if surprised:
                trusted = trusted or (probed, session.results[probed] + room[probed])
            # what the probe taught of the others: of those placed alike (its peers), and, were it
            # a surprise, without the group that misled
            for c in candidates:
                if c not in session.results:
                    candidates[c] = estimates[c] = knowledge.estimate(c, ip)
        if trusted is not None and trusted[0] != best and math.isfinite(trusted[1]):
            knowledge.surprise_cost(1 - (candidates[best].ms + room[best]) / trusted[1])
        return best, estimates

    @staticmethod
    def _gains(best: str, candidates: dict[str, Estimate], regrets: dict[str, float],
               session: Session) -> dict[str, float]:
        """What probing each crawler not probed yet would take off the expected regret: each
        rival's regret is shared between it and ``best`` in proportion to their variances."""
        gains = {c: 0.0 for c in candidates if c not in session.results}
        own = 0.0 if best in session.results else candidates[best].var
        for c, regret in regrets.items():
            theirs = 0.0 if c in session.results else candidates[c].var
            if own + theirs > 0:
                share = 1.0 if math.isinf(theirs) else 0.0 if math.isinf(own) else theirs / (own + theirs)
                if c in gains:
                    gains[c] += regret * share
                if best in gains:
                    gains[best] += regret * (1 - share)
        return gains

    @staticmethod
    def _cheapest(candidates: dict[str, Estimate], room: Room) -> str:
        known = [(e.ms + room[c], n, c) for n, (c, e) in enumerate(candidates.items()) if e.known]
        if not known:  # nothing known of anybody: the first is as good a start as any
            return next(iter(candidates))
        return min(known)[2]

    # -- making room ----------------------------------------------------------------------

    def room(self) -> tuple[Room, dict[str, tuple[str, str]], tuple[Move, ...]]:
        """For every crawler, the cheapest way to free a place for one more page: 0 with
        room; else (Bellman-Ford over the full crawlers) the extra latency of moving one page
        to another crawler, and so on until one has room (``inf``: no way); the first step of
        each way, crawler -> (next crawler, page); and the moves made on the way: pages whose
        estimates came to disagree with where they are can form a cycle of moves that saves
        latency, which is made (cycle cancelling, as min-cost flow does)."""
        full = [c for c in self.d.crawlers if not self.d._room(c, 1)]
        if not self.d.movable:  # no page moves: a full crawler has no room at any price
            return {c: math.inf if c in full else 0.0 for c in self.d.crawlers}, {}, ()
        moves: list[Move] = []
        bounded = len(self.ips) > UNBOUNDED_PAGES
        if full and self.stale >= max(REFRESH, 0 if bounded else len(self.ips) // 10):
            if bounded:
                keys = self._oldest(ROLLING * self.stale)
                self._restate_rows(keys)
                self.stale = 0
                moves += self._improve(set(keys))
            else:
                self._refresh(list(self.d.crawlers))
                moves += self._improve()
        for _ in range(MAX_CANCELS):  # each cancelled cycle lowers the estimated total: it ends
            cost, via, cycle = self._ways()
            if not cycle:
                break
            for key, target in cycle:
                source = self.d._page_crawler[key]
                moves.append(Move(self.d._move_page(key, target), source, target))
        for a in cost:  # a way that still loops is no way
            seen, at = {a}, a
            while at in via and not self.d._room(at, 1):
                at = via[at][0]
                if at in seen:
                    break
                seen.add(at)
            if not self.d._room(at, 1):
                cost[a] = math.inf
        return cost, via, tuple(moves)

    def _improve(self, keys: set[str] | None = None) -> list[Move]:
        """Pages on crawlers that are not full, which what is known now says a crawler with
        room serves faster (a page moved there by an estimate that proved wrong, an
        organisation learnt since), move there: each is probed there first where nothing
        near backs the estimate, and moves only if the probe confirms it. Full crawlers'
        pages are the ways' business (:meth:`_ways`). The probes are counted in
        ``self.verified``. ``keys``: those pages only (else every page)."""
        d, knowledge = self.d, self.knowledge
        ids = list(d.crawlers)
        moves: list[Move] = []
        for source in ids:
            if not d._room(source, 1):
                continue
            held = d._held.get(source, ())
            for key in sorted(held if keys is None else (key for key in keys if key in held)):
                rows, cautious = self._row(self.rows, key, len(ids)), self._row(self.cautious, key, len(ids))
                now = rows[ids.index(source)]
                if not math.isfinite(now):  # nothing known of where it is: nothing to save (and no inf - inf)
                    continue
                saving = np.where([d._room(c, 1) and c != source for c in ids], now - cautious, -np.inf)
                best = int(np.argmax(saving))
                if not saving[best] > 0:
                    continue
                target, page_ip = ids[best], self.ips[key]
                estimate = knowledge.estimate(target, page_ip)
                ms = estimate.ms
                if not estimate.near:
                    ms = Session(d.prober, page_ip, knowledge).probe(target)
                    knowledge.check(estimate, ms, page_ip, count=False)
                    self.verified += 1
                    found = {c: knowledge.estimate(c, page_ip) for c in ids}
                    self._set_row(key, found)
                if ms < now:
                    moves.append(Move(d._move_page(key, target), source, target))
        return moves

    def settle(self) -> tuple[Move, ...]:
        """After the batch's last URL (the delegator's ``horizon``), where some crawler is full:
        the pages placed so far are assigned again as a whole, the min-cost assignment within
        the capacities (:func:`~webrace.delegation.optimum.best_assignment`, the bench's
        reference) over what is known now, more than when most of them were placed: each
        page's expected latency (the log-normal mean) at the crawler it is on and at every
        crawler its own address, subnet or organisation was measured from. A country's or a
        registry's estimate moves no page: the cheapest of many such estimates is mostly one
        that came out too low (on 52 capacity-bound worlds, moves by them made 3 worlds
        0.01-0.015x worse). No probe. A batch of more than SETTLE_MAX_PAGES pages is not
        settled (the assignment's matrix grows with the square of the pages)."""
        found = self._assignment()
        return found[0] if found else ()

    def _assignment(self) -> tuple[tuple[Move, ...], list[str], dict[str, np.ndarray]] | None:
        """:meth:`settle`'s assignment, made; the moves, the pages in the order of the rows, and
        the matrices it was made from (``mu``, ``var``: the log-normal estimates, ``cost``: what
        the assignment minimised, ``chosen``: every page's crawler, by column). None where no
        crawler is full or the pages are too many."""
        from webrace.delegation.optimum import best_assignment

        d = self.d
        ids = list(d.crawlers)
        keys = sorted(d._page_crawler)  # in a fixed order: ties go the same way every run
        if not keys or len(keys) > SETTLE_MAX_PAGES or all(d._room(c, 1) for c in ids):  # none full: _improve's
            return None
        self._refresh(ids)
        width = len(ids)
        mu = np.vstack([self._row(self.mus, key, width) for key in keys])
        var = np.vstack([self._row(self.vars, key, width) for key in keys])
        backed = np.vstack([self._row(self.near, key, width) for key in keys]) > 0
        here = np.array([ids.index(d._page_crawler[key]) for key in keys])
        at = np.arange(len(keys))
        with np.errstate(invalid="ignore", over="ignore"):  # inf + inf: nothing known, made unreachable below
            cost = np.exp(np.minimum(700.0, mu + var / 2))
        now = cost[at, here]
        cost[~backed | ~np.isfinite(cost)] = UNREACHABLE
        # a page stays where it is unless a move saves something (ties do not churn), and
        # where nothing is known of where it is, it stays
        cost[at, here] = np.where(np.isfinite(now), now * (1 - 1e-9), 0.0)
        chosen = best_assignment(cost, [d.crawlers[c].capacity for c in ids])
        moves = tuple(Move(d._move_page(keys[i], ids[chosen[i]]), ids[here[i]], ids[chosen[i]])
                      for i in np.flatnonzero(chosen != here))
        return moves, keys, {"mu": mu, "var": var, "cost": cost, "chosen": chosen, "backed": backed}

    def inquire(self) -> tuple[tuple[Move, ...], int]:
        """At the start of a batch's last tenth (the delegator calls it before its URL
        ``horizon - horizon // 10``; batches under INQUIRE_MIN URLs do not inquire), where some
        crawler is full: probes where the assignment of the pages placed so far is least sure,
        and the pages assigned again (:meth:`settle`'s assignment), in rounds. The pages were
        placed one by one, each by what was known when it came, most by estimates from their
        organisation or block; which of them a full crawler should let go, and where to, rests
        on differences between such estimates that no single URL's choice had reason to probe.

        Each round: the assignment over what is known; each crawler's price, what freeing one
        place on it costs (the least extra latency of moving pages along a chain of crawlers to
        one with room, by Bellman-Ford over the assignment, as the duals of the min-cost
        assignment); and for every page and crawler whose latency is estimated, not measured,
        the expected saving of a probe of the pair, E[(t - X)+] over its log-normal estimate X,
        ``t`` the cost at which moving the page there would beat where it is (its cost there plus
        that crawler's price, less this crawler's price), or, for the crawler it is on,
        E[(X - s)+], ``s`` the cost of its next best place; as a share of the page's latency.
        Where the estimate comes from beyond the page's organisation, what a probe teaches
        serves all the organisation's pages: the pair (organisation, crawler) is worth the
        savings of all of them, and is probed at the page with the most to save; where it comes
        from the organisation, a block or the subnet, what is left to learn is the address's own,
        and the pair is worth its page's saving (worth all the organisation's, the bench's
        "capacity 1.1x" world came to 62.7% to a nearest crawler, under the goal, in one of two
        runs). The INQUIRE_BATCH most worthy pairs worth more than ``regret`` are
        probed, and the round starts again; until none is, INQUIRE_ROUNDS rounds, or the run's
        probes reach INQUIRE_TOTAL a URL of the batch less INQUIRE_RESERVE a URL it has left.
        Returns the moves and the probes sent.

        Probes so spent are not lost to the batch's tail: its last URLs find their
        organisations known (on the bench's capacity-bound worlds, the last tenth's probes fell
        from 0.9 to 0.4 a URL), and its last URL's :meth:`settle` starts from estimates
        measured."""
        from scipy.special import ndtr  # scipy takes a while to import: only where it is needed

        d = self.d
        ids = list(d.crawlers)
        capacities = [d.crawlers[c].capacity for c in ids]
        if None in capacities or (d.horizon or 0) < INQUIRE_MIN:  # unlimited: no page need leave its nearest
            return (), 0
        limits = np.array(capacities)
        width = len(ids)
        moves: tuple[Move, ...] = ()
        sent = 0
        calls = d._delegated_urls  # the URL it comes before included, a URL seen again too
        for _ in range(INQUIRE_ROUNDS):
            found = self._assignment()
            if found is None:
                break
            made, keys, m = found
            moves += made
            horizon = max(d.horizon or 0, calls)
            spare = int(INQUIRE_TOTAL * horizon - INQUIRE_RESERVE * (horizon - calls)) - self.spent - sent
            if spare <= 0:
                break
            cost, chosen, mu, var = m["cost"], m["chosen"], m["mu"], m["var"]
            at = np.arange(len(keys))
            price = self._prices(cost, chosen, limits)
            if not np.all(np.isfinite(price)):
                break
            sd = np.sqrt(np.maximum(var, 0.0))
            with np.errstate(invalid="ignore", over="ignore"):
                mean = np.exp(np.minimum(700.0, mu + var / 2))
            value = cost[at, chosen] + price[chosen]  # what the page's place costs, its crawler's price included
            t = value[:, None] - price[None, :]
            other = cost + price[None, :]
            other[at, chosen] = np.inf
            s = other.min(axis=1) - price[chosen]
            mine = (at, chosen)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                z = (np.log(np.maximum(t, 1e-300)) - mu) / sd
                gain = t * ndtr(z) - mean * ndtr(z - sd)  # E[(t - X)+]
                z_own = (np.log(np.maximum(s, 1e-300)) - mu[mine]) / sd[mine]
                own = mean[mine] * ndtr(sd[mine] - z_own) - s * ndtr(-z_own)  # E[(X - s)+]
            gain[t <= 0] = 0.0
            gain[mine] = own
            gain[~np.isfinite(mu) | ~(sd > 0) | ~np.isfinite(gain)] = 0.0
            gain /= np.maximum(cost[mine], MIN_MS)[:, None]
            anchor = self.knowledge.anchor
            groups = [anchor(self.ips[key]) for key in keys]
            names = {g: n for n, g in enumerate(dict.fromkeys(groups))}
            member = np.array([names[g] for g in groups])
            # a pair estimated from beyond the page's organisation: a probe teaches all its pages
            far = np.where(m["backed"], 0.0, gain)
            worth = np.zeros((len(names), width))
            np.add.at(worth, member, far)
            page = np.full((len(names), width), -1)  # the page of each pair with the most to save
            most = np.zeros((len(names), width))
            for i in range(len(keys)):
                better = far[i] > most[member[i]]
                most[member[i], better] = far[i, better]
                page[member[i], better] = i
            candidates = [(float(worth[n, j]), int(page[n, j]), int(j)) for n, j in np.argwhere(page >= 0)]
            # one from its organisation, block or subnet: what is left to learn is the address's own
            near = np.where(m["backed"], gain, 0.0)
            candidates += [(float(near[i, j]), int(i), int(j)) for i, j in np.argwhere(near > d.regret)]
            candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
            taken = min(spare, max(1, int(INQUIRE_BATCH * len(keys))))
            pairs = [(keys[i], ids[j]) for w, i, j in candidates[:taken] if w > d.regret]
            if not pairs:
                break
            for key, target in pairs:
                page_ip = self.ips[key]
                estimate = self.knowledge.estimate(target, page_ip)
                ms = Session(d.prober, page_ip, self.knowledge).probe(target)
                self.knowledge.check(estimate, ms, page_ip, count=False, calibrate=False)
                sent += 1
        self.spent += sent
        return moves, sent

    @staticmethod
    def _prices(cost: np.ndarray, chosen: np.ndarray, limits: np.ndarray) -> np.ndarray:
        """What freeing one place on each crawler costs under the assignment ``chosen`` (a
        column a row) of the ``cost`` matrix: 0 with room, else the cheapest chain of moves
        to a crawler with room, each step the least extra cost of moving one page of the
        crawler to the next (Bellman-Ford; ``inf``: no chain)."""
        width = cost.shape[1]
        price = np.where(np.bincount(chosen, minlength=width) < limits, 0.0, np.inf)
        step = np.full((width, width), np.inf)  # crawler -> crawler: moving one of its pages there
        for j in range(width):
            rows = np.flatnonzero(chosen == j)
            if len(rows):
                step[j] = (cost[rows] - cost[rows, j][:, None]).min(axis=0)
        for _ in range(width):
            with np.errstate(invalid="ignore"):
                lower = np.minimum(price, np.nanmin(step + price[None, :], axis=1))
            if np.array_equal(lower, price):
                break
            price = lower
        return price

    def _ways(self) -> tuple[Room, dict[str, tuple[str, str]], list[tuple[str, str]]]:
        """Bellman-Ford towards the crawlers with room; and a cycle that saves latency, as
        (page, crawler to move it to) steps, if one was found."""
        d = self.d
        cost = {c: 0.0 if d._room(c, 1) else math.inf for c in d.crawlers}
        full = [c for c, v in cost.items() if v > 0]
        via: dict[str, tuple[str, str]] = {}
        if not full:
            return cost, via, []
        ids = list(d.crawlers)
        self._sync(ids)
        edges = {a: self._edges(a, ids) for a in full}
        changed = None
        for _ in range(len(ids)):
            changed = None
            for a in full:
                for b, (extra, key) in edges[a].items():
                    if cost[b] + extra < cost[a] - 1e-9:
                        cost[a], via[a], changed = cost[b] + extra, (b, key), a
            if changed is None:
                return cost, via, []
        at = changed
        for _ in range(len(ids)):  # into the cycle
            at = via[at][0]
        cycle, start = [], at
        while True:
            target, key = via[at]
            cycle.append((key, target))
            at = target
            if at == start:
                return cost, via, cycle

    def _edges(self, crawler_id: str, ids: list[str]) -> dict[str, tuple[float, str]]:
        """Crawler -> (the least extra latency of moving one of ``crawler_id``'s pages there, that
        page; of pages alike, the first in key order), from its stack, kept until it changes."""
        stack = self._stack(crawler_id, ids)
        if stack.edges is not None:
            return stack.edges
        rows, cautious = stack.arrays[0], stack.arrays[1]
        self.d.stats["delegation/rows_stacked"] += len(stack.slot)
        with np.errstate(invalid="ignore"):  # inf - inf (nothing known either way): made inf below
            extra = cautious - rows[:, ids.index(crawler_id)][:, None]
        extra[~np.isfinite(extra)] = np.inf
        least = extra.min(axis=0)
        cheapest = extra.argmin(axis=0)
        ties = (extra == least[None, :]).sum(axis=0)
        found = {}
        for j, b in enumerate(ids):
            if b == crawler_id or not math.isfinite(least[j]):
                continue
            key = stack.keys[cheapest[j]] if ties[j] == 1 else min(
                stack.keys[i] for i in np.flatnonzero(extra[:, j] == least[j]))
            found[b] = (float(least[j]), key)
        stack.edges = found
        return found

    def _stack(self, crawler_id: str, ids: list[str]) -> _Stack:
        """The crawler's pages' rows stacked (made the first time it is asked; :meth:`_sync`
        keeps it)."""
        stack = self._stacks.get(crawler_id)
        if stack is None:
            width = len(ids)
            stack = self._stacks[crawler_id] = _Stack(width)
            for key in sorted(self.d._held.get(crawler_id, ())):
                stack.put(key, self._rows_of(key, width))
        return stack

    def _anchor_of(self, key: str) -> tuple | None:
        """The page's organisation (its anchor), once its address is known."""
        anchor = self.anchors.get(key)
        if anchor is None and key in self.ips:
            anchor = self.anchors[key] = self.knowledge.anchor(self.ips[key])
            self.org_pages.setdefault(anchor, set()).add(key)
        return anchor

    def _rows_of(self, key: str, width: int) -> list[np.ndarray]:
        return [self._row(rows, key, width) for rows in (self.rows, self.cautious, self.mus, self.vars)]

    def _sync(self, ids: list[str]) -> None:
        """The stacks, and the pages each crawler holds of each organisation, brought up to date
        with the pages that came and left (the ledger's events) and the rows estimated again."""
        width = len(ids)
        if any(stack.width != width for stack in self._stacks.values()):  # a crawler joined: rows widen
            self._stacks = {}
        events = self.d._events
        for key, crawler_id, came in events:
            anchor = self._anchor_of(key)
            if anchor is not None:
                on = self.org_on.setdefault(anchor, {})
                on[crawler_id] = on.get(crawler_id, 0) + (1 if came else -1)
            stack = self._stacks.get(crawler_id)
            if stack is not None:
                if came:
                    stack.put(key, self._rows_of(key, width))
                else:
                    stack.drop(key)
        events.clear()
        crawler_of = self.d._page_crawler
        for key in self._restated:
            stack = self._stacks.get(crawler_of.get(key))
            if stack is not None and key in stack.slot:
                stack.put(key, self._rows_of(key, width))
        self._restated.clear()

    @staticmethod
    def _row(rows: dict[str, np.ndarray], key: str, width: int) -> np.ndarray:
        row = rows.get(key)
        if row is None:
            row = np.full(width, np.inf)
        return row if len(row) == width else np.concatenate([row, np.full(width - len(row), np.inf)])

    def _make_room(self, crawler_id: str, via: dict[str, tuple[str, str]]) -> tuple[Move, ...]:
        """Move the pages along the way found for ``crawler_id``, the last step first."""
        steps, seen, at = [], {crawler_id}, crawler_id
        while not self.d._room(at, 1):
            if at not in via or via[at][0] in seen:
                raise CapacityError(self.d._full_message())
            target, key = via[at]
            steps.append((key, at, target))
            seen.add(target)
            at = target
        moves = []
        for key, source, target in reversed(steps):
            subnet = self.d._move_page(key, target)
            moves.append(Move(subnet, source, target))
        return tuple(reversed(moves))

    def _place(self, key: str, ip: IPAddress, subnet: Subnet | None, crawler_id: str, session: Session, reason: str,
               moves: tuple[Move, ...] = (), estimates: dict[str, Estimate] | None = None,
               verified: int = 0) -> Decision:
        self.ips[key] = ip
        self._anchor_of(key)
        self._set_row(key, estimates or {c: self.knowledge.estimate(c, ip) for c in self.d.crawlers})
        self.stale += 1
        if len(self.d._events) > EVENTS_MAX:  # a stream whose capacities never bind reads none of them
            self._sync(list(self.d.crawlers))
        return self.d._assign(key, ip, subnet, crawler_id, session, reason, moves, verified)

    def _set_row(self, key: str, estimates: dict[str, Estimate]) -> None:
        found = [estimates[c] for c in self.d.crawlers]
        self._restated.add(key)
        self._age.pop(key, None)
        self._age[key] = None
        self.d.stats["delegation/rows_estimated"] += 1
        self.rows[key] = np.array([e.ms for e in found])
        if self.d.explore or self.d.horizon is not None:  # only exploring and settling read them
            self.mus[key] = np.array([e.mu if e.known else math.inf for e in found])
            self.vars[key] = np.array([e.var if e.kind not in (IP, EXACT) else 0.0 for e in found])  # 0: measured
            self.near[key] = np.array([1.0 if e.near else 0.0 for e in found])
        self.cautious[key] = np.array([math.exp(min(700.0, e.mu + CAUTION * math.sqrt(e.var))) if e.known else math.inf
                                       for e in found])

    def _refresh(self, full: list[str]) -> None:
        """The rows of the pages on full crawlers (those that may move) estimated again from
        what is known now, more than when they came."""
        self._restate_rows([key for c in full for key in self.d._held.get(c, ())])
        self.stale = 0

    def _set_cell(self, key: str, column: int, estimate: Estimate) -> None:
        """One crawler's estimate in a page's row (as :meth:`_set_row` sets them all)."""
        width = len(self.d.crawlers)
        e = estimate
        cells = [(self.rows, e.ms),
                 (self.cautious, math.exp(min(700.0, e.mu + CAUTION * math.sqrt(e.var))) if e.known else math.inf)]
        if self.d.explore or self.d.horizon is not None:
            cells += [(self.mus, e.mu if e.known else math.inf),
                      (self.vars, e.var if e.kind not in (IP, EXACT) else 0.0), (self.near, 1.0 if e.near else 0.0)]
        for rows, value in cells:
            row = self._row(rows, key, width).copy()
            row[column] = value
            rows[key] = row
        self._restated.add(key)
        self.d.stats["delegation/cells_estimated"] += 1

    def _restate_rows(self, keys: list[str]) -> None:
        by_ip: dict[IPAddress, dict[str, Estimate]] = {}
        for key in keys:
            ip = self.ips[key]
            if ip not in by_ip:
                by_ip[ip] = {c: self.knowledge.estimate(c, ip) for c in self.d.crawlers}
            self._set_row(key, by_ip[ip])

    def _oldest(self, count: int) -> list[str]:
        """The ``count`` pages placed whose rows were estimated longest ago."""
        crawler_of, found = self.d._page_crawler, []
        for key in self._age:
            if len(found) >= count:
                break
            if key in crawler_of:
                found.append(key)
        return found

    # -- dynamic calibration --------------------------------------------------------------

    def recalibrate(self, subnet: Subnet, current: str, ip: IPAddress) -> Decision:
        """Slow fetches changed what is known of ``current`` at ``ip``: the subnet is decided
        again from the knowledge, probing only where it cannot decide."""
        d = self.d
        pages = d._take_pages(subnet, current)
        d._undelegate(subnet)
        session = Session(d.prober, ip, self.knowledge)
        room = {c: 0.0 if d._room(c, len(pages)) else math.inf for c in d.crawlers}
        chosen, _ = self.choose(ip, session, room)
        d._delegate(subnet, chosen)
        d._give(pages, subnet, chosen)
        return d._decided(Decision(chosen, ip, subnet, len(session.results), RECALIBRATED, dict(session.results),
                                   (Move(subnet, current, chosen),)))


def _regrets(best: str, candidates: dict[str, Estimate], room: Room) -> dict[str, float]:
    """Each rival's part of the expected regret of choosing ``best``: the share of its cost
    that rival would save were it the cheapest of all, E[(1 - rival/best)+ ; rival cheapest].
    Rivals compete for the same regret (of several near-tied ones only the cheapest saves
    anything), so their parts add up to the regret of the choice, E[(1 - cheapest/best)+],
    where their pairwise regrets (:func:`_regret`) would count it once for each of them. The
    costs (latency + room) are log-normal, taken as independent; the integral over each
    rival's cost by Gauss-Hermite quadrature. A rival or ``best`` nothing is known of: a half,
    and no part in the others' competition."""
    from scipy.special import ndtr  # scipy takes a while to import: only where it is needed

    rivals = [c for c in candidates if c != best]
    found = {c: _regret(candidates[c], room[c], candidates[best], room[best]) for c in rivals}
    known = [c for c in rivals if candidates[c].known and candidates[best].known]
    if len(known) < 2:
        return found
    logs = np.array([_log_cost(candidates[c], room[c]) for c in known])
    mus, sds = logs[:, 0], np.sqrt(logs[:, 1])
    finite = np.isfinite(mus)
    m_best, v_best = _log_cost(candidates[best], room[best])
    with np.errstate(invalid="ignore"):
        nodes = mus[:, None] + sds[:, None] * _NODES[None, :]  # rival i's log cost at node k
    weights = np.where(sds[:, None] > 0, _WEIGHTS[None, :], _EXACT[None, :])
    x = nodes[:, :, None]  # (i, k, j): the chance that rival j costs more than rival i at node k
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sds[None, None, :] > 0, (mus[None, None, :] - x) / sds[None, None, :],
                     np.where(mus[None, None, :] > x, np.inf, -np.inf))
    z = np.where(finite[None, None, :], z, np.inf)  # an unreachable rival is never the cheaper
    above = ndtr(z)
    index = np.arange(len(known))
    above[index, :, index] = 1.0
    cheapest = above.prod(axis=2)  # rival i at node k is the cheapest rival
    if math.isinf(m_best):  # best unreachable: any reachable rival saves all of it
        saved = np.ones_like(nodes)
    elif v_best <= 0:
        saved = np.maximum(0.0, -np.expm1(nodes - m_best))
    else:  # E[(1 - exp(x - B))+] for B ~ N(m_best, v_best)
        sd = math.sqrt(v_best)
        mu = nodes - m_best
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            tail = ndtr(-mu / sd - sd)
            part = np.where(tail > 0, np.exp(np.minimum(700.0, mu + v_best / 2 + np.log(tail))), 0.0)
        saved = np.clip(ndtr(-mu / sd) - part, 0.0, 1.0)
    parts = np.nansum(np.where(weights > 0, weights * saved * cheapest, 0.0), axis=1)
    for i, c in enumerate(known):
        found[c] = float(parts[i]) if finite[i] else 0.0
    return found


_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(31)
_WEIGHTS = _WEIGHTS / math.sqrt(2 * math.pi)
_EXACT = (_NODES == 0).astype(float)  # a cost known exactly: all its weight on its median


def _regret(other: Estimate, other_room: float, best: Estimate, best_room: float) -> float:
    """The expected share of ``best``'s cost saved by ``other`` instead, E[(1 - other/best)+],
    the costs (latency + room) taken as log-normal: exactly when there is no room to make,
    to first order around the median otherwise. Nothing known of either: a half."""
    if not other.known or not best.known:
        return 0.5
    (m_other, v_other), (m_best, v_best) = _log_cost(other, other_room), _log_cost(best, best_room)
    if math.isinf(m_other) or math.isinf(m_best):
        return float(m_other < m_best)
    mu, var = m_other - m_best, v_other + v_best
    if var <= 0:
        return max(0.0, 1 - math.exp(mu))
    sd = math.sqrt(var)
    tail = _cdf(-mu / sd - sd)
    saved = math.exp(min(700.0, mu + var / 2 + math.log(tail))) if tail > 0 else 0.0
    return min(1.0, max(0.0, _cdf(-mu / sd) - saved))


def _cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def _log_cost(estimate: Estimate, room: float) -> tuple[float, float]:
    """Mean and variance of log(latency + room) for a log-normal latency, to first order."""
    if not math.isfinite(estimate.mu) or room == 0:
        return estimate.mu, estimate.var
    median = math.exp(estimate.mu)
    total = max(median + room, MIN_MS)  # a chain that saves more than it costs: as good as free
    share = min(1.0, median / total)
    return math.log(total), estimate.var * share * share
