"""Rounds in one process (embedded mode): the frontier in memory, one round at a time.

The adapter requests the pages each :class:`~webrace.rounds.engine.Step` names (Scrapy's
scheduler is the queue, so a JOBDIR can pause and resume it) and asks :meth:`close_finished`
when the crawl goes idle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from webrace.records.rounds import FAILED, PENDING, Node
from webrace.rounds.engine import Limits, Round, RoundEngine, Stats, asked_now
from webrace.rounds.frontier import Frontier
from webrace.rounds.memory import building
from webrace.traps import QueryVariants
from webrace.urd import Urd

if TYPE_CHECKING:
    from webrace.backends.base import UrdStore

logger = logging.getLogger(__name__)


class DueSentinels(Protocol):
    """Sentinels joining a round: pseudo-URDs fetching their pages, and their bookkeeping."""

    def due(self, now_ms: int) -> tuple[list[Urd], dict[str, list]]: ...

    def checked(self, ids: list[str], at_ms: int) -> None: ...

    def reclock(self, now_ms: int) -> int:
        """After a wall-clock step back: sentinels due beyond their interval made due now."""


class LocalRounds(RoundEngine):
    def __init__(self, urd_store: Callable[[], UrdStore], limits: Limits | None = None,
                 stats: Stats | None = None, sentinels: DueSentinels | None = None) -> None:
        super().__init__(limits, stats)
        self.urd_store = urd_store
        self.sentinels = sentinels
        self.current: Round | None = None
        self.opened = 0  # rounds opened by this process
        self.missing: list[str] = []  # ids asked for by ``only_ids`` that no URD has

    def round(self, round_id: str) -> Round | None:
        return self.rounds.get(round_id)

    def open_due(self, now_ms: int, only_ids: list[str] | None = None) -> Round | None:
        """A round for the URDs due now (or ``only_ids``) and the sentinels due now."""
        if self.current is not None:
            return None
        self.watch_clock(now_ms)
        with building():  # see webrace.rounds.memory
            return self._open_due(now_ms, only_ids)

    def _open_due(self, now_ms: int, only_ids: list[str] | None) -> Round | None:
        with self.urd_store() as store:
            if only_ids:
                found = [store.get(i) for i in only_ids]
                self.missing = [i for i, u in zip(only_ids, found, strict=True) if u is None]
                urds = [asked_now(u, now_ms) for u in found if u is not None]
            else:
                urds = store.due(now_ms)
        watched: dict[str, list] = {}
        if self.sentinels is not None and not only_ids:
            extra, watched = self.sentinels.due(now_ms)
            if extra:
                self.stats.inc_value("sentinels/due", sum(len(g) for g in watched.values()))
            urds += extra
        return self.open(urds, now_ms, watched) if urds else None

    def open(self, urds: list[Urd], now_ms: int, sentinels: dict[str, list] | None = None) -> Round:
        self.opened += 1
        rnd = Round(f"local-{self.opened}", {u.id: u for u in urds}, Frontier(), now_ms,
                    sentinels=sentinels or {}, queries=QueryVariants(self.limits.max_queries),
                    due_at={u.id: u.next_due for u in urds})
        self.current = self._register(rnd)
        rnd.start = self._offer_starts(rnd)
        return rnd

    def pending(self) -> list[Node]:
        """The current round's pages not fetched yet (at idle: requests that were lost)."""
        if self.current is None:
            return []
        return [n for n in {id(n): n for n in self.current.frontier.nodes.values()}.values()
                if n.state == PENDING]

    def close_finished(self) -> list[Round]:
        """Close the current round (asked at idle: nothing of it is in flight). Its URDs get
        their last check, the round's opening time; its sentinels not evaluated (a 304, the
        same body, a failure) are checked with nothing changed."""
        rnd = self.current
        if rnd is None:
            return []
        for node in self.pending():  # a request that ended without callback or errback
            logger.warning("Round %s: %s was never answered; counted as failed", rnd.id, node.url)
            rnd.frontier.finish(node, FAILED)
        self.current = None  # closed whatever happens below: a failure must not stop the next round
        self._closed(rnd)
        with self.urd_store() as store:
            store.mark_checked(rnd.real_urds, rnd.started_ms)
        self._checked_before_step(rnd)
        left = [s.id for group in rnd.sentinels.values() for s, _ in group]
        if left and self.sentinels is not None:
            self.sentinels.checked(left, rnd.started_ms)
        return [rnd]

    def next_due(self) -> int | None:
        """When the next URD falls due (None: no URD registered)."""
        with self.urd_store() as store:
            return store.next_due()


__all__ = ["DueSentinels", "LocalRounds"]
