"""The round engine: what a round decides, whoever fetches its pages (pure: no Scrapy, no
Twisted).

A *round* crawls a set of URDs once (seed 000 section 4): each page at most once however
many URDs reach it (the frontier coalesces them and merges their owners), each URD's links
followed within its scope and depth, and each page's item held until no URD still active in
the round could add an owner to it, then released with its final owners. When a round
closes its URDs get their last check (the due bookkeeping).

URDs that share a start page, scope and depth travel as one group
(:mod:`webrace.rounds.groups`): the frontier's nodes, their budgets, the active set and the
requests hold group ids, so a page costs the same however many URDs share its group; owners
are expanded from the groups only on the page's item.

:class:`RoundEngine` holds that logic once; :class:`~webrace.rounds.local.LocalRounds` (one
process, an in-memory frontier) and :class:`~webrace.rounds.redis.RedisRounds` (a frontier
shared by every worker through Redis) differ in where rounds come from and where pages
wait. The spider is an adapter: it turns the engine's :class:`Step` into requests and items.

Counters go to ``stats`` under ``webrace/`` (Scrapy's stats collector, or :class:`Counts`).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from webrace.clock import ClockWatch, step_line
from webrace.records.rounds import DONE, FAILED, Node, Offer
from webrace.rounds.frontier import Frontier
from webrace.rounds.groups import SENTINEL_PREFIX, Groups, LinkScope
from webrace.rounds.memory import keep_built, release_built
from webrace.rounds.tally import UrlTally
from webrace.traps import QueryVariants
from webrace.urd import Urd

logger = logging.getLogger(__name__)


class Stats(Protocol):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...
    def get_value(self, key: str, default: Any = None) -> Any: ...
    def set_value(self, key: str, value: Any) -> None: ...


class Counts(dict):
    """A stats collector for the engine outside a crawl (tests, commands)."""

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self[key] = self.get(key, start) + count

    def get_value(self, key: str, default: Any = None) -> Any:
        return self.get(key, default)

    def set_value(self, key: str, value: Any) -> None:
        self[key] = value


@dataclass(frozen=True)
class Limits:
    page_budget: int = 0  # pages one URD may request per round (0: no limit)
    max_queries: int = 100  # distinct query strings one path may show per round (traps)
    max_links: int = 5000  # links one page may offer to a round, in scope and depth (0: no limit)


@dataclass
class Round:
    """A set of URDs crawled once. ``frontier`` is a :class:`~webrace.rounds.frontier.Frontier`
    or, shared by every worker, a :class:`~webrace.distributed.frontier.RedisFrontier`; the
    held items and counts are this process's own."""

    id: str
    urds: dict[str, Urd]
    frontier: Any
    started_ms: int
    shared: bool = False
    held: dict[str, tuple[Node, MutableMapping]] = field(default_factory=dict)  # waiting for final owners
    owners_changed: bool = False
    sentinels: dict[str, list] = field(default_factory=dict)  # URL -> [(sentinel, digest it last saw)] due
    queries: QueryVariants = field(default_factory=QueryVariants)
    requested: Counter = field(default_factory=Counter)  # group id -> pages requested for it (each member's budget)
    due_at: dict[str, int] = field(default_factory=dict)  # URD id -> its next due when the round opened
    start: list[Node] = field(default_factory=list)  # a local round's start pages, until requested
    groups: Groups = field(init=False)  # the URDs grouped by start page, scope and depth

    def __post_init__(self) -> None:
        self.groups = Groups(self.urds)

    @property
    def real_urds(self) -> list[str]:
        """The round's URD ids without the sentinels' pseudo-URDs."""
        return [i for i in self.urds if not i.startswith(SENTINEL_PREFIX)]


@dataclass
class Step:
    """What the adapter does after an event: request ``fetch`` (a local round's new pages; a
    shared round queues them in Redis) and emit ``items`` (``(node, item)``, owners filled)."""

    fetch: list[Node] = field(default_factory=list)
    items: list[tuple[Node, MutableMapping]] = field(default_factory=list)

    def __iadd__(self, other: Step) -> Step:
        self.fetch += other.fetch
        self.items += other.items
        return self


def asked_now(urd: Urd, now_ms: int) -> Urd:
    """A URD a person asked to crawl now (``-a urd=``), due or not: as `scrapy urd due`
    marks it, so its pages are fetched, not served from what another round confirmed."""
    return urd if urd.due_at is not None else replace(urd, due_at=now_ms)


class RoundEngine(ABC):
    shared = False
    delegation: Any = None  # IPMicra routing (a distributed worker's, set by the factory)
    urd_store: Callable[[], Any] | None = None  # opens the URD-DB (where rounds are opened)
    sentinels: Any = None  # the due sentinels joining the rounds (webrace.rounds.local.DueSentinels)

    def __init__(self, limits: Limits | None = None, stats: Stats | None = None) -> None:
        self.limits = limits or Limits()
        self.stats = stats if stats is not None else Counts()
        self.rounds: dict[str, Round] = {}  # the rounds this process has met, by id
        # The summary counts distinct URLs per crawl, however many rounds see them.
        self.tally = UrlTally(self.stats)
        self.on_open: Callable[[Round], None] | None = None  # told of each round this process meets
        self.clock = ClockWatch()  # the factory sets its threshold (WEBRACE_CLOCK_STEP_THRESHOLD)
        self.say: Callable[[str], None] = logger.warning  # where a clock step is said
        self._reclocked = False  # URDs and sentinels made due after a step back (see watch_clock)

    def _register(self, rnd: Round) -> Round:
        self.rounds[rnd.id] = rnd
        if self.on_open is not None:
            self.on_open(rnd)
        keep_built()  # the round's URDs, groups and what on_open built: see webrace.rounds.memory
        return rnd

    # -- rounds (each implementation) -----------------------------------------------------

    @abstractmethod
    def round(self, round_id: str) -> Round | None:
        """The round ``round_id``, if it is open (a shared one is read from Redis once)."""

    @abstractmethod
    def open_due(self, now_ms: int, only_ids: list[str] | None = None) -> Round | None:
        """Open a round for the URDs due at ``now_ms`` (or ``only_ids``, due or not) that no
        open round is crawling; None when there are none."""

    @abstractmethod
    def close_finished(self) -> list[Round]:
        """Close the rounds with no page left to fetch; their URDs get their last check."""

    # -- the wall clock (webrace.clock) -----------------------------------------------------

    def watch_clock(self, now_ms: int) -> None:
        """Before rounds open at ``now_ms``: a wall-clock step since the last look is said in
        one line (and counted); after a step back, and at the first look in this process (a
        step while it was not running), URDs and sentinels left due "in the future" are made
        due now (``reclock``: bounded, the others untouched)."""
        step = self.clock.step(now_ms)
        if step > 0:
            self._inc("clock/stepped_forward")
            self.say(step_line(step, "what fell due meanwhile is crawled now, in one round; due times are unchanged"))
        if step < 0:
            self._reclocked = False  # (Redis away meanwhile: done at the next opening all the same)
        if self._reclocked:
            return
        with self._store() as store:
            urds = store.reclock(now_ms)
        sentinels = self.sentinels.reclock(now_ms) if self.sentinels is not None else 0
        self._reclocked = True
        self._inc("clock/reclocked_urds", urds)
        self._inc("clock/reclocked_sentinels", sentinels)
        made = f'{urds} URD(s) checked "in the future" and {sentinels} sentinel(s) due beyond their interval'
        if step < 0:
            self._inc("clock/stepped_back")
            self.say(step_line(step, f"{made} made due now; the others keep their due times"))
        elif urds or sentinels:
            self.say(f"{made} made due now: the wall clock stepped back since they were checked")

    def _store(self) -> Any:
        if self.urd_store is None:
            raise RuntimeError("this worker has no URD-DB: rounds are opened by `scrapy urd schedule`")
        return self.urd_store()

    def _checked_before_step(self, rnd: Round) -> None:
        """A round closing whose URDs got their last check: if it opened after the wall
        clock's last look, the clock stepped back since, and that check is "in the future":
        the next :meth:`watch_clock` makes them due again."""
        if self.clock.last_wall_ms is not None and rnd.started_ms > self.clock.last_wall_ms:
            self._reclocked = False

    def start(self, rnd: Round) -> list[Node]:
        """The pages to request first, once (a shared round queued them when it opened)."""
        nodes, rnd.start = rnd.start, []
        return nodes

    # -- pages ----------------------------------------------------------------------------

    def node(self, round_id: str, context: dict) -> tuple[Round, Node]:
        """The round and node a request was made for (``context``: its ``webrace`` meta)."""
        rnd = self.round(round_id)
        if rnd is None:  # e.g. resumed from a JOBDIR after the round state was lost
            rnd = self._orphan(round_id)
        node = Node(context["link"], context["parent"], context["depth"], dict(context["budgets"]))
        if rnd.shared:  # the lease carried the node; merges since are caught by finish()
            return rnd, node
        return rnd, rnd.frontier.get(node.url) or rnd.frontier.adopt(node)

    def _orphan(self, round_id: str) -> Round:
        return self._register(Round(round_id, {}, Frontier(), 0))

    def claim_redirect(self, rnd: Round, node: Node, url: str) -> tuple[bool, dict[str, int], str]:
        """``node``'s request is about to follow a redirect (or was answered from ``url``
        unannounced): the target counts as seen before it is downloaded. See
        :meth:`Frontier.claim <webrace.rounds.frontier.Frontier.claim>`: True to follow it;
        False: the round has ``url`` already (``node``'s URDs were merged into it), end
        ``node`` with :meth:`redirect_seen`."""
        if url == node.url:
            return True, {}, node.state
        return rnd.frontier.claim(url, node)

    def redirect_seen(self, rnd: Round, node: Node, url: str, gained: dict[str, int], state: str) -> Step:
        """``node`` redirects to ``url``, which the round has already (pending or done): no
        download; ``node`` ends as a duplicate of it, and the URDs it brought to a page
        already done are carried on through that page's stored links."""
        self._inc("duplicate")
        step = Step()
        if gained:
            self._inc("coalesced")
            if state == DONE:
                rnd.owners_changed = True
                target = rnd.frontier.get(url)
                if target is not None and any(r > 0 for r in gained.values()):
                    step.fetch += self._follow(rnd, target, gained)
                    if rnd.shared:
                        rnd.frontier.expanded(target.url, gained)
        step += self.finish(rnd, node, DONE)
        return step

    def redirected(self, rnd: Round, node: Node, url: str) -> Step | None:
        """``node`` was answered from ``url`` (a redirect nobody claimed, see
        :meth:`claim_redirect`): None to go on, or the step that ends ``node`` as a
        duplicate of the page the round has at ``url``."""
        claimed, gained, state = self.claim_redirect(rnd, node, url)
        return None if claimed else self.redirect_seen(rnd, node, url, gained, state)

    def fetched(self, rnd: Round, node: Node, item: MutableMapping) -> Step:
        """A stored page (``node.links`` set): hold its item, follow its links for its URDs,
        then release what can be released."""
        self._inc("pages")
        rnd.held[node.url] = (node, item)
        step, expanded, budgets = Step(), {}, dict(node.budgets)
        while True:  # until no URD was merged into the page while its links were followed
            if node.links and not node.refresh and self._nothing_to_follow(rnd, budgets):
                # no link will be offered: which ones the frontier has (for the links not followed)
                # is read with the page's finish, in one round trip in a shared round
                expanded.update(budgets)
                known, (ended, missed) = rnd.frontier.known_then_finish(node.links, node, DONE, expanded,
                                                                        keep_lease=True)
                step.fetch += self._follow(rnd, node, budgets, known)
                budgets = missed
            else:
                step.fetch += self._follow(rnd, node, budgets)
                expanded.update(budgets)
                ended, budgets = rnd.frontier.finish(node, DONE, expanded, keep_lease=True)
            if not budgets:
                break
        step.items += self._release(rnd, ended, node)
        return step

    def finish(self, rnd: Round, node: Node, state: str = FAILED) -> Step:
        """A page that gives no item (failed, refused, a duplicate)."""
        ended, _ = rnd.frontier.finish(node, state)
        return Step(items=list(self._release(rnd, ended)))

    def written(self, round_id: str, urls: list[str]) -> None:
        """The items of these pages are written (to the feeds): in a shared round their
        leases end only now, so a worker dying before loses no page (see the lease scheduler)."""
        rnd = self.rounds.get(round_id)
        if rnd is not None and rnd.shared:
            rnd.frontier.ack(urls)

    def flush(self) -> Step:
        """Release every held item whose owners are final, in every round."""
        step = Step()
        for rnd in list(self.rounds.values()):
            step.items += self._release(rnd, {"*"})
        return step

    def wants_flush(self) -> bool:
        """Whether a flush could release something now (asked when the crawl goes idle)."""
        return any(rnd.held and (not rnd.shared or self._releasable(rnd)) for rnd in self.rounds.values())

    def held(self) -> int:
        return sum(len(rnd.held) for rnd in list(self.rounds.values()))

    def owners(self, rnd: Round, node: Node) -> dict[str, Any]:
        """``owners``, ``urd_ids`` (without sentinels' pseudo-URDs) and ``urgent`` of a page:
        the members of the groups that reached it."""
        return rnd.groups.owners(node.budgets)

    def take_sentinels(self, round_id: str | None, url: str) -> list | None:
        """The sentinels due in this round on ``url``, once (for the sentinel middleware)."""
        rnd = self.rounds.get(round_id or "")
        if rnd is None or url not in rnd.sentinels:
            return None
        return rnd.sentinels.pop(url)

    def round_urds(self, round_id: str | None) -> dict[str, Urd] | None:
        rnd = self.rounds.get(round_id or "")
        return rnd.urds if rnd is not None else None

    # -- following ------------------------------------------------------------------------

    def _offer_starts(self, rnd: Round) -> list[Node]:
        """Offer every group's start page; the new ones are to be requested (coalesced by URL:
        the members of a group after its first are coalesced already). One offer for all of
        them: in a shared round, workers lease as soon as the round is open, and a start page
        another's links reach could otherwise be finished before its own group's offer merged
        into it, its links never followed for that group."""
        groups = list(rnd.groups)
        for group in groups:
            self.tally.follow(group.url)
            rnd.requested[group.id] += 1
            self._inc("coalesced", len(group.members) - 1)
        offers = rnd.frontier.offer_many(None, 0, [(group.url, {group.id: group.depth}) for group in groups])
        fetch = []
        for group, (verdict, _, _) in zip(groups, offers, strict=True):
            if verdict is Offer.NEW:
                fetch.append(rnd.frontier.get(group.url))
            else:
                self._inc("coalesced")
        return fetch

    @staticmethod
    def _nothing_to_follow(rnd: Round, budgets: dict[str, int]) -> bool:
        """No group of ``budgets`` has depth left (so :meth:`_follow` offers no link)."""
        return all(remaining <= 0 or rnd.groups.get(group_id) is None for group_id, remaining in budgets.items())

    def _follow(self, rnd: Round, node: Node, budgets: dict[str, int],
                known_links: set[str] | None = None) -> list[Node]:
        """Offer ``node``'s links to the frontier for each group in ``budgets`` that still has
        depth left and whose scope holds the link (decided once per link and scope anchor),
        at most ``Limits.max_links`` of a page (counted after scope and depth); carry
        groups merged into pages already done through their stored links, without fetching
        them again. Returns the new pages a local round requests (a shared
        frontier has queued them)."""
        groups = rnd.groups
        fetch: list[Node] = []
        stack = [(node, budgets)]
        while stack:
            parent, parent_budgets = stack.pop()
            offers, not_followed = [], []
            if parent is node and known_links is not None:
                known = known_links  # read with the page's finish
            else:
                known = rnd.frontier.known(parent.links) if parent.links else set()
            offered = 0  # the page's links offered so far (Limits.max_links)
            for link in parent.links:
                child: dict[str, int] = {}
                reason = "depth"
                scope = LinkScope(link)
                # a refresh is followed like a redirect: with the page's own depth budget
                cost = 0 if parent is node and link == node.refresh else 1
                for group_id, remaining in parent_budgets.items():
                    group = groups.get(group_id)
                    if group is None or remaining < cost:
                        continue
                    if not scope.within(group.anchor):
                        reason = "scope"
                    else:
                        child[group_id] = remaining - cost
                # after scope: links not followed take no room (nor a refresh, followed like a redirect)
                if child and cost and self.limits.max_links and offered >= self.limits.max_links:
                    child, reason = {}, "limit"
                if child and link not in known:  # a page new to the round: trap rules, budgets
                    if not rnd.queries.admit(link):
                        child, reason = {}, "trap"
                    else:
                        child = {u: r for u, r in child.items() if self._within_budget(rnd, u)}
                        reason = "budget"
                if child:
                    offered += 1
                    offers.append((link, child))
                else:
                    not_followed.append((link, reason))
            self._not_followed(not_followed, known)
            results = rnd.frontier.offer_many(parent.page_url, parent.depth + 1, offers)
            if parent is not node and rnd.shared:  # URDs merged into a done page: its links now followed
                rnd.frontier.expanded(parent.url, parent_budgets)
            for (link, _), (verdict, gained, state) in zip(offers, results, strict=True):
                self.tally.follow(link)  # new, merged or a duplicate: in the round's frontier
                if verdict is Offer.NEW:
                    if not rnd.shared:
                        fetch.append(rnd.frontier.get(link))
                elif verdict is Offer.MERGED:
                    self._inc("coalesced")
                    if state == DONE:
                        rnd.owners_changed = True
                        if any(r > 0 for r in gained.values()):
                            stack.append((rnd.frontier.get(link), gained))
                else:
                    self._inc("duplicate")
        return fetch

    def _within_budget(self, rnd: Round, group_id: str) -> bool:
        """Whether the URDs of ``group_id`` may request one more page this round (and count
        it). Its members request the same pages, so the group's count is each one's."""
        budget = self.limits.page_budget
        if budget and rnd.requested[group_id] >= budget:
            group = rnd.groups.get(group_id)
            members = group.members if group is not None else (group_id,)
            if not self.stats.get_value(f"webrace/budget_reached/{members[0]}"):
                more = f" (and {len(members) - 1} more URDs with its start page)" if len(members) > 1 else ""
                logger.warning("URD %s%s reached its page budget (WEBRACE_MAX_PAGES_PER_URD=%d) this round",
                               members[0], more, budget)
                for urd_id in members:
                    self.stats.set_value(f"webrace/budget_reached/{urd_id}", budget)
            return False
        rnd.requested[group_id] += 1
        return True

    def _not_followed(self, links: list[tuple[str, str]], known: set[str]) -> None:
        """Count links no URD follows, once per crawl (:class:`UrlTally`: a link another
        path brings into a frontier, in this round or a later one, is followed after all).
        ``known``: the links the frontier had when the page's links were looked up (one
        round trip for both in a shared round): those the round follows anyway."""
        for link, reason in links:
            if link in known:
                self.tally.follow(link)
            else:
                self.tally.not_followed(link, f"ignored/{reason}")

    # -- holding items until their owners are final ---------------------------------------

    def _release(self, rnd: Round, ended: set[str], node: Node | None = None) -> list[tuple[Node, MutableMapping]]:
        """The held items whose owners can no longer grow: no URD still active that could
        reach the page (its scope holds it) is missing from the page's URDs. In a shared
        round other workers end URDs too, so every held item is looked at."""
        if ended or rnd.owners_changed or rnd.shared:
            candidates = list(rnd.held)
        else:
            candidates = [node.url] if node is not None and node.url in rnd.held else []
        rnd.owners_changed = False
        out: list[tuple[Node, MutableMapping]] = []
        if not candidates:
            return out
        # A page that every group of the round reached can gain no owner: no need to ask.
        for url in [url for url in candidates if len(rnd.held[url][0].budgets) >= len(rnd.groups)]:
            out.append(self._complete(rnd, *rnd.held.pop(url)))
        candidates = [url for url in candidates if url in rnd.held]
        if not candidates:
            return out
        # other workers may have merged URDs into a shared page: read it again with the actives
        active, nodes = rnd.frontier.snapshot(candidates if rnd.shared else [])
        for url in candidates:
            held_node, item = rnd.held[url]
            current = nodes.get(url) or held_node
            if not self._may_gain_owners(rnd, current, active):
                del rnd.held[url]
                out.append(self._complete(rnd, current, item))
        return out

    def _releasable(self, rnd: Round) -> bool:
        active = rnd.frontier.active_urds()
        return any(not self._may_gain_owners(rnd, rnd.frontier.get(url) or node, active)
                   for url, (node, _) in rnd.held.items())

    @staticmethod
    def _may_gain_owners(rnd: Round, node: Node, active: set[str]) -> bool:
        """Whether an active group missing from ``node`` could still reach it (its scope holds it)."""
        scope = LinkScope(node.url)
        for group_id in active:
            if group_id not in node.budgets:
                group = rnd.groups.get(group_id)
                if group is not None and scope.within(group.anchor):
                    return True
        return False

    def _complete(self, rnd: Round, node: Node, item: MutableMapping) -> tuple[Node, MutableMapping]:
        item.update(self.owners(rnd, node))
        item["round"] = rnd.id
        return node, item

    def _closed(self, *rounds: Round) -> None:
        """Forget closed rounds (their links ignored stay counted for the crawl)."""
        for rnd in rounds:
            self.rounds.pop(rnd.id, None)
        if rounds:
            release_built()

    def _inc(self, key: str, n: int = 1) -> None:
        if n:
            self.stats.inc_value(f"webrace/{key}", n)


__all__ = ["SENTINEL_PREFIX", "Counts", "asked_now", "Limits", "Round", "RoundEngine", "Stats", "Step"]
