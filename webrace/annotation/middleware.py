"""Annotation in the crawl: a spider middleware between the ``urd`` spider and the engine.

Every :class:`~webrace.items.Page` the spider emits with a *new* version (a 304 or an
unchanged body makes none) is judged by the filtering processor for the owners on the item
(the spider emits it only once its owners are final) and for the URDs outside the round that
reached the page in earlier rounds (:mod:`webrace.annotation.wanted`): a version is judged once,
when it is fetched, for everyone who wants it, whichever round fetched it. The body is read back from the object
store and matched in a worker thread, so the reactor keeps downloading while a large page is
judged, for every owner at once (the judgement is arrays, see
:class:`~webrace.annotation.filtering.RoundIndex`). In the same thread:

- the page's ACIs (a :class:`~webrace.records.aci.PageAcis`) go to the writer thread
  (:class:`AciWriter`), which keeps each page's in the ACI store all or none, the pages queued
  together in one transaction, while the judging thread goes on to the next page;
- a page relevant to no owner has its body dropped from the object store when
  ``WEBRACE_DROP_IRRELEVANT`` is on (the meta-info stays, so the next re-crawl is still a
  conditional GET).

Then, on the reactor thread, the page item gets ``relevant_to`` (owners who got an ACI) and
``kept`` (its body is stored), and the ACIs leave as one item after their page (an
:class:`~webrace.items.AciBatch`); feed exports write each ACI as its own line or row
(``FEEDS`` ``item_classes`` can split pages from ACIs). No store is touched on the reactor
thread.

Stats: ``webrace/acis``, ``webrace/annotated``, ``webrace/judged_wanted`` (URDs outside
the round judged for a page), ``webrace/irrelevant``,
``webrace/bodies_dropped``, ``webrace/annotate_failed``, ``webrace/acis_unstored`` (ACIs
of pages the ACI store refused).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from scrapy.crawler import Crawler
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from webrace.annotation.filtering import FilteringProcessor, Judgement, Version
from webrace.annotation.wanted import WantedUrds
from webrace.backends import open_aci_store, open_urd_view
from webrace.items import AciBatch, Page
from webrace.middlewares.recrawl import object_cache
from webrace.middlewares.threaded import ThreadedItemMiddleware
from webrace.records.aci import PageAcis
from webrace.rounds.groups import urd_reach_key
from webrace.signals import RoundBook
from webrace.store.objects import ObjectCorrupt, ObjectMissing

logger = logging.getLogger(__name__)


class AnnotationMiddleware(ThreadedItemMiddleware):
    THREADS_SETTING = "WEBRACE_ANNOTATE_THREADS"

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.stats = crawler.stats
        self.drop_irrelevant = crawler.settings.getbool("WEBRACE_DROP_IRRELEVANT")
        self.processor = FilteringProcessor()
        self._store: Any = None
        self._store_lock = threading.Lock()
        self._writer: AciWriter | None = None
        self.rounds = RoundBook(crawler)  # the URDs of each round, from the round_opened signal
        self.wanted = WantedUrds(lambda: open_urd_view(crawler.settings))  # URDs outside the round wanting a page

    def job(self, obj: Any) -> tuple | None:
        return self._job(obj)

    def work(self, job: tuple) -> Outcome:
        return self._work(*job)

    def finish(self, job: tuple, result: Outcome) -> Iterator[Any]:
        return self._finish(job[0], result)

    # -- the work ------------------------------------------------------------------------

    def _job(self, obj: Any) -> tuple[Page, dict, Sequence[str], Any] | None:
        """What judging ``obj`` needs, read on the reactor thread (no I/O); None: not to be judged."""
        if not isinstance(obj, Page) or not obj.get("digest"):
            return None
        newcomers = getattr(obj, "_webrace_newcomers", None) if not obj.get("new_version") else None
        if not obj.get("new_version") and not newcomers:
            return None
        if not _textual(obj.get("content_type") or ""):
            return None  # no text to match (an image, a PDF...): kept as it is, no ACI
        round_urds = self.rounds.urds(obj.get("round"))
        if round_urds is None:
            return None
        if newcomers:  # the version it holds, judged for the URDs it was never judged for
            urd_ids = [i for i in obj.get("urd_ids") or () if i in round_urds
                       and urd_reach_key(round_urds[i]) in newcomers]
            return (obj, round_urds, urd_ids, object_cache(self.crawler), True) if urd_ids else None
        # (no URD of the round reached it, only sentinels: the URDs that wanted it earlier may)
        return obj, round_urds, obj.get("urd_ids") or (), object_cache(self.crawler)  # a shared list: not copied

    def _work(self, page: Page, round_urds: dict, urd_ids: Sequence[str], cache: Any,
              newcomers: bool = False) -> Outcome:
        """In a worker thread: read the version back, judge it for every owner at once, keep
        its ACIs (or drop an irrelevant body). ``newcomers``: a version judged before, now for
        URDs it never was (``urd_ids``) alone; its body stays whatever they make of it."""
        meta = cache.lookup(page["url"], recent=True)
        if meta is None or meta.digest != page["digest"] or meta.version != page.get("version"):
            return Outcome(None, stale=True)  # a newer fetch replaced it already: that one is judged instead
        try:
            body = cache.objects.get(meta.digest)
        except (ObjectMissing, ObjectCorrupt, OSError) as exc:
            logger.warning("Cannot annotate %s: stored body unreadable: %s", page["url"], exc)
            return Outcome(None)
        version = Version(page["url"], body, meta.header_value("Content-Type") or "", page.get("content_type") or "",
                          meta.digest, meta.version, meta.fetched, meta.size)
        try:
            # the URDs that reached the page in earlier rounds and are not in this one: judged too
            absent = self.wanted.absent(meta.wanted, page.get("round"), round_urds) \
                if meta.wanted and not newcomers else []
            if not urd_ids and not absent:
                return Outcome(None, stale=True)  # fetched for sentinels only, wanted by no URD: kept
            if absent:
                index = self.processor.index((page.get("round"), "wanted", self.wanted.generation),
                                             {**self.wanted.urds, **round_urds}.values())
                reach = index.reach([*urd_ids, *(u.id for u in absent)])
            else:
                index = self.processor.index(page.get("round"), round_urds.values())
                reach = index.reach(urd_ids)
            judgement = self.processor.judge_reached(version, reach, index)
        except Exception:  # a bug must not cost the page its item: logged, counted, page emitted
            logger.exception("Annotating %s failed", page["url"])
            return Outcome(None)
        outcome = Outcome(judgement, absent=len(absent), newcomers=len(urd_ids) if newcomers else 0)
        if judgement.acis:
            outcome.pending = judgement.acis  # kept by the writer thread (settle)
        elif judgement.irrelevant and self.drop_irrelevant and not newcomers:
            outcome.dropped = bool(cache.drop(meta))
        return outcome

    async def settle(self, job: tuple, outcome: Outcome) -> Outcome:
        """Wait for the writer thread to keep the page's ACIs (the judging thread went on)."""
        if outcome.pending is not None:
            if self._writer is None:
                self._writer = AciWriter(lambda: self.store)
            self._kept(job[0], outcome, await maybe_deferred_to_future(self._writer.submit(outcome.pending)))
        return outcome

    def settle_inline(self, job: tuple, outcome: Outcome) -> Outcome:
        if outcome.pending is not None:
            self._kept(job[0], outcome, self.store.add_pages([outcome.pending])[0])
        return outcome

    def _kept(self, page: Page, outcome: Outcome, result: int | Exception) -> None:
        outcome.pending = None
        if isinstance(result, Exception):  # e.g. a full disk: the page goes on, its ACIs are not kept (all or none)
            logger.error("Keeping the ACIs of %s failed: %s", page["url"], result)
            outcome.store_failed = True
        else:
            outcome.added = result

    def _finish(self, page: Page, outcome: Outcome) -> Iterator[Any]:
        """On the reactor thread: count, mark the page, emit it and its ACIs."""
        judgement = outcome.judgement
        if judgement is None:
            if not outcome.stale:
                self.stats.inc_value("webrace/annotate_failed")
            yield page
            return
        if judgement.filtered:
            self.stats.inc_value("webrace/annotated")
        if outcome.absent:  # judged for URDs that wanted the page, outside this round
            self.stats.inc_value("webrace/judged_wanted", outcome.absent)
        if outcome.newcomers:  # a version held before, judged for URDs of this round it never was
            self.stats.inc_value("webrace/judged_newcomers", outcome.newcomers)
        acis = judgement.acis
        if outcome.store_failed:  # the version stays unannounced: its next fetch judges it again
            self.stats.inc_value("webrace/acis_unstored", len(acis))
            page._webrace_not_announced = True
            acis = []
        page["relevant_to"] = list(acis.owners) if isinstance(acis, PageAcis) else sorted(a.owner for a in acis)
        if acis:
            self.stats.inc_value("webrace/acis", outcome.added)
        elif judgement.irrelevant:
            self.stats.inc_value("webrace/irrelevant")
            if outcome.dropped:
                self.stats.inc_value("webrace/bodies_dropped")
                page["kept"] = False
        yield page
        if acis:
            yield AciBatch(page["url"], acis)  # one item for the page, however many owners

    @property
    def store(self) -> Any:
        with self._store_lock:  # opened by the first worker thread that needs it
            if self._store is None:
                self._store = open_aci_store(self.crawler.settings)
            return self._store

    def closed(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None


@dataclass
class Outcome:
    """What the worker thread made of a page."""

    judgement: Judgement | None  # None: not judged (see ``stale``), or judging failed
    pending: Any = None  # ACIs handed to the writer thread, not kept yet
    stale: bool = False  # a newer version of the page replaced this one before it was judged
    added: int = 0  # ACIs new to the store
    store_failed: bool = False  # the ACI store refused the page's ACIs (none kept)
    dropped: bool = False  # irrelevant: its body was dropped from the object store
    absent: int = 0  # URDs outside the round judged for it (they wanted the page: MetaInfo.wanted)
    newcomers: int = 0  # URDs of the round a version held before was judged for (never judged for them)


class AciWriter:
    """One thread keeping pages' ACIs, so judging threads go on to the next page instead of
    waiting for the store: whatever is queued when the thread is free is kept in one call
    (``add_pages``: one transaction in the embedded store), at most ``BATCH`` pages. Each
    page's answer (its new ACIs, or the error that refused it) fires its Deferred on the
    reactor thread."""

    BATCH = 64

    def __init__(self, store: Callable[[], Any]) -> None:
        self.store = store
        self.queue: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="webrace-aci-writer", daemon=True)
        self.thread.start()

    def submit(self, acis: Any) -> Deferred:
        done: Deferred = Deferred()
        self.queue.put((acis, done))
        return done

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()

    def _run(self) -> None:
        from twisted.internet import reactor

        while True:
            first = self.queue.get()
            if first is None:
                return
            batch, last = [first], False
            while len(batch) < self.BATCH and not self.queue.empty():
                more = self.queue.get()
                if more is None:
                    last = True
                    break
                batch.append(more)
            try:
                results = self.store().add_pages([acis for acis, _ in batch])
            except Exception as exc:  # the store could not even be opened: every page is told
                results = [exc] * len(batch)
            for (_, done), result in zip(batch, results, strict=True):
                reactor.callFromThread(done.callback, result)
            if last:
                return


def _textual(media_type: str) -> bool:
    """Media types whose body is text the filtering processor can read."""
    return (media_type.startswith("text/") or media_type in ("", "application/xhtml+xml", "application/xml")
            or media_type.endswith("+xml"))
