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
from twisted.internet.threads import deferToThread, deferToThreadPool
from twisted.python.threadpool import ThreadPool


class ThreadedItemMiddleware:
    # the setting naming how many threads do the work (a pool of the middleware's own); None:
    # the reactor's shared pool. Work that holds the interpreter lock gains nothing from more
    # threads than it waits on I/O, and each one more takes turns from the reactor thread.
    THREADS_SETTING: str | None = None

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._pool: ThreadPool | None = None
        crawler.signals.connect(self.closed, signal=signals.spider_closed)
        crawler.signals.connect(self._stop_pool, signal=signals.spider_closed)

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

    def _in_thread(self, job: Any) -> Any:
        if self.THREADS_SETTING is None:
            return deferToThread(self.work, job)
        from twisted.internet import reactor  # the one Scrapy installed (never at import time)

        if self._pool is None:
            size = max(1, self.crawler.settings.getint(self.THREADS_SETTING))
            self._pool = ThreadPool(1, size, name=type(self).__name__)
            self._pool.start()
        return deferToThreadPool(reactor, self._pool, self.work, job)

    def _stop_pool(self) -> None:
        if self._pool is not None:  # after the work it was given (stop() waits for it)
            self._pool.stop()
            self._pool = None

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
            outcome = await maybe_deferred_to_future(self._in_thread(job))
            outcome = await self.settle(job, outcome)
            for out in self.finish(job, outcome):
                yield out
