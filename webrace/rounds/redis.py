"""Rounds shared by every worker through Redis (distributed mode).

``scrapy urd schedule`` opens and closes rounds (:meth:`RedisRounds.open_due`,
:meth:`RedisRounds.close_finished`); a worker meets a round when it leases one of its pages
and reads the round's URDs from Redis then, so workers need no URD-DB of their own. A page
offered for the first time is queued in Redis in the same step that records it (the
:class:`~webrace.distributed.frontier.RedisFrontier`), so a :class:`Step` of a shared round
never names pages to fetch: workers lease them.

Due sentinels join the rounds `scrapy urd schedule` opens, as in the embedded mode: their
pages are offered like a URD's start page (depth 0), and the sentinels are recorded with the
round, so whichever worker fetches a page evaluates the sentinels on it. They are marked
checked when the round opens (the embedded mode marks them when its round closes: here a
round a worker never finishes must not keep them due for another round meanwhile); the
worker moves each baseline by compare-and-set (``SentinelStore.advance``), so a page
fetched twice (a lease that expired) gives one notification.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from webrace.distributed.registry import RoundRegistry
from webrace.rounds.engine import Limits, Round, RoundEngine, Stats, asked_now
from webrace.rounds.local import DueSentinels
from webrace.traps import QueryVariants
from webrace.urd import now_millis

if TYPE_CHECKING:
    from webrace.backends.base import UrdStore

logger = logging.getLogger(__name__)


class RedisRounds(RoundEngine):
    shared = True

    def __init__(self, registry: RoundRegistry, urd_store: Callable[[], UrdStore] | None = None,
                 limits: Limits | None = None, stats: Stats | None = None,
                 sentinels: DueSentinels | None = None) -> None:
        super().__init__(limits, stats)
        self.registry = registry
        self.urd_store = urd_store  # where `scrapy urd schedule` runs; workers have none
        self.sentinels = sentinels  # the due sentinels joining the rounds `scrapy urd schedule` opens
        self._loaded: dict[str, Round] = {}  # rounds read ahead (:meth:`load`), not registered yet

    def round(self, round_id: str) -> Round | None:
        rnd = self.rounds.get(round_id)
        if rnd is None:
            rnd = self._loaded.pop(round_id, None) or self._read(round_id)
            if rnd is not None:
                self._register(rnd)
        return rnd

    def load(self, round_id: str) -> None:
        """Read a round this process has not met yet from Redis, for :meth:`round` to
        register without a round trip (a worker's Redis thread does this as it leases the
        round's first page: registering tells the crawl, on the reactor thread)."""
        if round_id not in self.rounds and round_id not in self._loaded:
            rnd = self._read(round_id)
            if rnd is not None:
                self._loaded[round_id] = rnd

    def _read(self, round_id: str) -> Round | None:
        urds = self.registry.urds(round_id)
        if not urds:
            return None
        return Round(round_id, urds, self.registry.frontier(round_id),
                     self.registry.opened_at(round_id) or now_millis(), shared=True,
                     sentinels=self.registry.sentinels(round_id), queries=QueryVariants(self.limits.max_queries))

    def open_due(self, now_ms: int, only_ids: list[str] | None = None) -> Round | None:
        """A round for the due URDs (or ``only_ids``) and, without ``only_ids``, the due
        sentinels, that no open round is crawling."""
        self.watch_clock(now_ms)
        busy = {urd_id for round_id in self.registry.open_rounds() for urd_id in self.registry.urd_ids(round_id)}
        with self._store() as store:
            if only_ids:
                urds = [asked_now(u, now_ms) for u in (store.get(i) for i in only_ids) if u is not None]
            else:
                urds = store.due(now_ms)
            # every URD, for workers judging a page for the URDs that wanted it (not only the round's)
            self.registry.sync_urds(store.all, force=any(u.id not in self.registry.synced for u in urds))
        urds = [u for u in urds if u.id not in busy]
        extra, watched = self._due_sentinels(now_ms, busy) if not only_ids else ([], {})
        round_id = self.registry.open(urds + extra, now_ms, watched)
        if round_id is None:
            return None
        if watched:  # claimed by this round (see the module's docstring)
            self.sentinels.checked([s.id for group in watched.values() for s, _ in group], now_ms)
            self.stats.inc_value("sentinels/due", sum(len(g) for g in watched.values()))
        rnd = self.round(round_id)
        self._offer_starts(rnd)  # queued in Redis for the workers (coalesced by URL)
        return rnd

    def _due_sentinels(self, now_ms: int, busy: set[str]) -> tuple[list, dict[str, list]]:
        """The pseudo-URDs of the sentinels due now that no open round fetches, and those
        sentinels by URL."""
        if self.sentinels is None:
            return [], {}
        extra, watched = self.sentinels.due(now_ms)
        extra = [u for u in extra if u.id not in busy]
        kept = {(u.owner, u.url) for u in extra}
        watched = {url: mine for url, group in watched.items()
                   if (mine := [(s, seen) for s, seen in group if (s.owner, url) in kept])}
        return extra, watched

    def lost_rounds(self) -> list[str] | None:
        """None, or (Redis came back empty) the rounds this process knew: forgotten here, with
        their held items (their URDs were not checked, so a new round takes them)."""
        if not self.registry.lost():
            return None
        lost = sorted(self.rounds)
        for round_id in lost:
            self.rounds.pop(round_id)
        self._loaded.clear()
        return lost

    def forget_closed(self, open_ids: Iterable[str], busy: AbstractSet[str] = frozenset()) -> list[str]:
        """(A worker) Forget the rounds met here that are no longer open (`scrapy urd schedule`
        closed them: nothing of them is queued or leased) and hold nothing here: no item held,
        not in ``busy`` (rounds this worker still leases pages of). A worker runs for months
        and meets a new round every few seconds; each one kept (its URDs, groups, frontier
        handle, and what the collector froze with it) was memory for good (issue 44). Returns
        the ids forgotten."""
        still = set(open_ids)
        gone = [round_id for round_id, rnd in list(self.rounds.items())
                if round_id not in still and round_id not in busy and not rnd.held]
        self._closed(*(self.rounds[round_id] for round_id in gone))
        for round_id in [r for r in self._loaded if r not in still]:
            self._loaded.pop(round_id, None)
        self.registry.forget(still | set(self.rounds) | busy)
        return gone

    def close_finished(self) -> list[Round]:
        """Close the open rounds nothing is queued or leased of: their URDs get their last
        check (the time the round opened)."""
        closed = []
        for round_id in self.registry.open_rounds():
            if not self.registry.finished(round_id):
                continue
            rnd = self.round(round_id)
            if rnd is not None:
                with self._store() as store:
                    store.mark_checked(rnd.real_urds, rnd.started_ms)
                self._checked_before_step(rnd)
                closed.append(rnd)
                self._closed(rnd)
            self.registry.close(round_id)
        return closed


__all__ = ["RedisRounds"]
