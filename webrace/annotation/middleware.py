"""Annotation in the crawl: a spider middleware between the ``urd`` spider and the engine.

Every :class:`~webrace.items.Page` the spider emits with a *new* version (a 304 or an
unchanged body makes none) is judged by the filtering processor for the owners on the item
(the spider emits it only once its owners are final). The body is read back from the object
store and matched in a worker thread, so the reactor keeps downloading while a large page is
judged. Then, on the reactor thread:

- the page's ACIs are kept in the ACI store in one transaction and leave as one item after
  their page (an :class:`~webrace.items.AciBatch`); feed exports write each ACI as its own
  line or row (``FEEDS`` ``item_classes`` can split pages from ACIs);
- a page relevant to no owner has its body dropped from the object store when
  ``WEBRACE_DROP_IRRELEVANT`` is on (the meta-info stays, so the next re-crawl is still a
  conditional GET);
- the page item gets ``relevant_to`` (owners who got an ACI) and ``kept`` (its body is
  stored).

Stats: ``webrace/acis``, ``webrace/annotated``, ``webrace/irrelevant``,
``webrace/bodies_dropped``, ``webrace/annotate_failed``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from scrapy.crawler import Crawler

from webrace.annotation.filtering import FilteringProcessor, Judgement, Version
from webrace.backends import open_aci_store
from webrace.items import AciBatch, Page
from webrace.middlewares.recrawl import object_cache
from webrace.middlewares.threaded import ThreadedItemMiddleware
from webrace.signals import RoundBook
from webrace.store.objects import ObjectCorrupt, ObjectMissing

logger = logging.getLogger(__name__)


class AnnotationMiddleware(ThreadedItemMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.stats = crawler.stats
        self.drop_irrelevant = crawler.settings.getbool("WEBRACE_DROP_IRRELEVANT")
        self.processor = FilteringProcessor()
        self._store: Any = None
        self.rounds = RoundBook(crawler)  # the URDs of each round, from the round_opened signal

    def job(self, obj: Any) -> tuple | None:
        return self._job(obj)

    def work(self, job: tuple) -> Judgement | None:
        return self._judge(*job)

    def finish(self, job: tuple, result: Judgement | None) -> Iterator[Any]:
        return self._finish(*job, result)

    # -- the work ------------------------------------------------------------------------

    def _job(self, obj: Any) -> tuple[Page, Any, dict, list, Any] | None:
        """What judging ``obj`` needs, read on the reactor thread; None: not to be judged."""
        if not isinstance(obj, Page) or not obj.get("new_version") or not obj.get("digest"):
            return None
        if not _textual(obj.get("content_type") or ""):
            return None  # no text to match (an image, a PDF...): kept as it is, no ACI
        round_urds = self.rounds.urds(obj.get("round"))
        urds = [round_urds[i] for i in obj.get("urd_ids") or () if i in round_urds] if round_urds else []
        if not urds:
            return None
        cache = object_cache(self.crawler)
        meta = cache.lookup(obj["url"])
        if meta is None or meta.digest != obj["digest"] or meta.version != obj.get("version"):
            return None  # a newer fetch replaced it already: that one is judged instead
        return obj, meta, round_urds, urds, cache

    def _judge(self, page: Page, meta: Any, round_urds: dict, urds: list, cache: Any) -> Judgement | None:
        """In a worker thread: read the body back and judge it; None when it cannot be read."""
        try:
            body = cache.objects.get(meta.digest)
        except (ObjectMissing, ObjectCorrupt, OSError) as exc:
            logger.warning("Cannot annotate %s: stored body unreadable: %s", page["url"], exc)
            return None
        version = Version(page["url"], body, meta.header_value("Content-Type") or "", page.get("content_type") or "",
                          meta.digest, meta.version, meta.fetched, meta.size)
        try:
            index = self.processor.index(page.get("round"), round_urds.values())
            return self.processor.judge(version, urds, index)
        except Exception:  # a bug must not cost the page its item: logged, counted, page emitted
            logger.exception("Annotating %s failed", page["url"])
            return None

    def _finish(self, page: Page, meta: Any, round_urds: dict, urds: list, cache: Any,
                judgement: Judgement | None) -> Iterator[Any]:
        """On the reactor thread: keep the ACIs, drop an irrelevant body, emit."""
        if judgement is None:
            self.stats.inc_value("webrace/annotate_failed")
            yield page
            return
        if judgement.filtered:
            self.stats.inc_value("webrace/annotated")
        page["relevant_to"] = sorted(a.owner for a in judgement.acis)
        if judgement.acis:
            self.stats.inc_value("webrace/acis", self.store.add(judgement.acis))
        elif judgement.irrelevant:
            self.stats.inc_value("webrace/irrelevant")
            if self.drop_irrelevant and cache.drop(meta):
                self.stats.inc_value("webrace/bodies_dropped")
                page["kept"] = False
        yield page
        if judgement.acis:
            yield AciBatch(page["url"], judgement.acis)  # one item for the page, however many owners

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = open_aci_store(self.crawler.settings)
        return self._store

    def closed(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def _textual(media_type: str) -> bool:
    """Media types whose body is text the filtering processor can read."""
    return (media_type.startswith("text/") or media_type in ("", "application/xhtml+xml", "application/xml")
            or media_type.endswith("+xml"))
