"""A spider middleware that does heavy work on some items in a worker thread.

Subclasses say, for each output of the spider, what work it needs (:meth:`job`, on the
reactor thread; None lets it through untouched), do that work (:meth:`work`, in a worker
thread: nothing there may touch Scrapy or a store opened on the reactor thread), wait for
what the work handed on (:meth:`settle`, e.g. a writer thread's answer), and turn the result
into outputs (:meth:`finish`, on the reactor thread again, yielding the item and
anything new). Universal: the async path uses a thread; the sync path, used only when a
sync-only middleware forces it, does the work inline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread


class ThreadedItemMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ThreadedItemMiddleware:
        return cls(crawler)

    def job(self, obj: Any) -> Any:
        """What ``obj`` needs done (reactor thread); None: nothing."""
        return None

    def work(self, job: Any) -> Any:
        """The heavy part (worker thread)."""
        raise NotImplementedError

    def finish(self, job: Any, result: Any) -> Iterator[Any]:
        """Outputs for the job, the original item included (reactor thread)."""
        raise NotImplementedError

    async def settle(self, job: Any, result: Any) -> Any:
        """After the work, before :meth:`finish` (async path): wait for what the work handed
        on (another thread's part, say). Default: nothing to wait for."""
        return result

    def settle_inline(self, job: Any, result: Any) -> Any:
        """:meth:`settle` on the sync path, done inline."""
        return result

    def closed(self) -> None:
        """The spider closed: release what was opened."""

    def process_spider_output(self, response: Any, result: Iterable[Any]) -> Iterator[Any]:
        for obj in result:
            job = self.job(obj)
            if job is None:
                yield obj
            else:
                yield from self.finish(job, self.settle_inline(job, self.work(job)))

    async def process_spider_output_async(self, response: Any, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for obj in result:
            job = self.job(obj)
            if job is None:
                yield obj
                continue
            outcome = await maybe_deferred_to_future(deferToThread(self.work, job))
            outcome = await self.settle(job, outcome)
            for out in self.finish(job, outcome):
                yield out
