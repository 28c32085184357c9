"""Conditional re-crawl (seed 003 section 5.1, the altered steps 2 and 3).

For a URL the object cache knows, the request carries ``If-None-Match`` (the stored ETag)
and ``If-Modified-Since`` (the stored Last-Modified, as the server sent it). A ``304`` goes
on to the spider, which answers it from the meta-info store: no body is downloaded or
parsed, and the stored links are followed.

This middleware owns the object cache, as Scrapy's ``HttpCacheMiddleware`` owns its storage:
built by ``WEBRACE_OBJECT_CACHE`` (loaded with ``load_object``; the mode's default is
:func:`webrace.backends.open_object_cache`) when first used, closed when the spider closes.
The spider (which records fetches, knowing their links) and the annotation and sentinel
middlewares reach it with ``crawler.get_downloader_middleware(RecrawlMiddleware).cache``
(see :func:`object_cache`). ``WEBRACE_RECRAWL = False`` only stops the conditional GETs.

The object cache's work is disk and network I/O (a body written and fsynced, a Redis round
trip, a file read on a shared mount): it never runs on the reactor thread. This middleware
keeps a thread pool for it (``WEBRACE_STORE_THREADS``); :meth:`RecrawlMiddleware.offload`
(and :func:`store_io` for the spider) runs a call there and awaits it.

A page is fetched at most once per the shortest timing among the URDs and sentinels that
want it: a request whose round opened less than that timing after the round that last
fetched or confirmed the stored body (``MetaInfo.checked``; the request's ``FRESH_SINCE``) is
not sent. It is
answered here with a ``304`` marked ``SERVED_FRESH``: the spider serves the round from the
stored record as for a 304 (links followed, owners merged), and the new version the other
round fetched was judged for every URD that wants the page when it was fetched.

When in doubt, fetch in full: no validators, an invalid date, a stored body that is missing
or damaged (counted, and its validators forgotten), a ``304`` to a request that asked
nothing (retried once unconditionally with ``Cache-Control: no-cache``).

Stats, like Scrapy's httpcache: ``recrawl/first_fetch`` (never fetched before),
``recrawl/unconditional`` (stored, but fetched in full on purpose: a sentinel without a
baseline takes it from this page), ``recrawl/conditional``,
``recrawl/not_modified``, ``recrawl/no_validators``, ``recrawl/object_missing``,
``recrawl/object_corrupt``, ``recrawl/unexpected_304``, ``recrawl/304_with_body``,
``recrawl/bytes_received`` (bodies), ``recrawl/bytes_saved`` (stored sizes of 304 pages) and
``recrawl/fresh`` (pages served without a request).
The spider adds ``recrawl/modified`` and ``recrawl/unchanged_body``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object
from twisted.internet import threads
from twisted.python.threadpool import ThreadPool

from webrace.store.cache import ObjectCache

logger = logging.getLogger(__name__)

CONDITIONAL = "webrace_conditional"  # meta: {"url": ..., "meta": the MetaInfo the validators came from}
UNCONDITIONAL = "webrace_unconditional"  # meta: never send validators for this request
RETRY = "retry"  # UNCONDITIONAL's value on the retry of an unexpected 304
LOOKED_UP = "webrace_metainfo"  # meta: {"url": ..., "meta": MetaInfo or None}, saves the store a lookup
# meta: {"url": ..., "meta": MetaInfo or None} read before the request was made (the lease scheduler
# reads the records of the pages it leases in one round trip): no lookup of its own in the store's thread
PRELOADED = "webrace_preloaded"
# meta: epoch ms; a page whose stored body was fetched or confirmed by a round that opened after
# it (MetaInfo.checked) serves the request without one (SERVED_FRESH): the request's round opening
# time less the shortest timing of the URDs and sentinels it serves
FRESH_SINCE = "webrace_fresh_since"
SERVED_FRESH = "webrace_served_fresh"  # meta: answered from the object cache, no request made
_VALIDATOR_HEADERS = (b"If-None-Match", b"If-Modified-Since")


class RecrawlMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.conditional = crawler.settings.getbool("WEBRACE_RECRAWL")
        self._factory = load_object(crawler.settings["WEBRACE_OBJECT_CACHE"])
        self._cache: ObjectCache | None = None
        self._threads = max(1, crawler.settings.getint("WEBRACE_STORE_THREADS", 4))
        self._pool: ThreadPool | None = None
        self._cache_lock = threading.Lock()
        self._closed = False
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    async def offload(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the store's thread pool, awaited (its exception raised here)."""
        from twisted.internet import reactor  # the one Scrapy installed (never at import time)

        if self._closed:  # a call after the crawl closed (a timer that fired late): here, no new pool
            return fn(*args, **kwargs)  # (one started now would never be stopped: the process could not exit)
        if self._pool is None:
            self._pool = ThreadPool(1, self._threads, name="webrace-store")
            self._pool.start()
        return await maybe_deferred_to_future(threads.deferToThreadPool(reactor, self._pool, fn, *args, **kwargs))

    @property
    def cache(self) -> ObjectCache:
        if self._cache is None:
            with self._cache_lock:  # made in whichever thread asks first (store or lease thread)
                if self._cache is None:
                    self._cache = self._factory(self.crawler.settings)
        return self._cache

    def preload(self, urls: list[str]) -> list[Any] | None:
        """(Any thread but the reactor's) the meta-info of ``urls``, read in one call, for
        requests about to be made (:data:`PRELOADED`); None when this crawl asks no validators."""
        if not self.conditional or not urls:
            return None
        return self.cache.index.get_many(urls)

    def spider_closed(self) -> None:
        self._closed = True
        if self._pool is not None:  # after the work it was given (stop() waits for it)
            self._pool.stop()
            self._pool = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> Response | None:
        if "webrace" not in request.meta:
            return None
        # A redirect copies the original request's headers: its validators are not ours.
        for name in _VALIDATOR_HEADERS:
            request.headers.pop(name, None)
        request.meta.pop(CONDITIONAL, None)
        request.meta.pop(LOOKED_UP, None)
        request.meta.pop(SERVED_FRESH, None)
        preloaded = request.meta.pop(PRELOADED, None)  # a redirect's target was not preloaded
        unconditional = request.meta.get(UNCONDITIONAL)
        if not self.conditional or unconditional == RETRY:  # (a retry was counted when first sent)
            return None
        known = preloaded["meta"] if preloaded is not None and preloaded["url"] == request.url else ...
        if known is not ...:
            self.stats.inc_value("recrawl/preloaded")
        if unconditional:  # fetched in full whatever is stored (a sentinel without a baseline)
            meta = known if known is not ... else await self.offload(lambda: self.cache.lookup(request.url))
            request.meta[LOOKED_UP] = {"url": request.url, "meta": meta}  # read once: the recorder takes it
            self.stats.inc_value("recrawl/first_fetch" if meta is None else "recrawl/unconditional")
            return None
        if known is None:
            meta, problem = None, None  # never fetched: nothing to check, no thread hop
        else:
            meta, problem = await self.offload(self._look_up, request.url, known)
        request.meta[LOOKED_UP] = {"url": request.url, "meta": meta}
        if meta is None:
            self.stats.inc_value("recrawl/first_fetch")
            return None
        if problem:
            self.stats.inc_value(f"recrawl/object_{problem}")
            logger.warning("Stored body of %s is %s: fetching it in full", request.url, problem)
            return None
        if self._fresh(request, meta):
            request.meta[CONDITIONAL] = {"url": request.url, "meta": meta}
            request.meta[SERVED_FRESH] = True
            self.stats.inc_value("recrawl/fresh")
            return Response(request.url, status=304, request=request, flags=["fresh"])
        if not (200 <= meta.status < 300 and (meta.digest or meta.not_kept) and meta.validators):
            self.stats.inc_value("recrawl/no_validators")
            return None
        if meta.etag:
            request.headers[b"If-None-Match"] = meta.etag
        if meta.ifmodifiedsince is not None:
            request.headers[b"If-Modified-Since"] = meta.lastmodified
        request.meta[CONDITIONAL] = {"url": request.url, "meta": meta}
        self.stats.inc_value("recrawl/conditional")
        return None

    @staticmethod
    def _fresh(request: Request, meta: Any) -> bool:
        """The stored body (a 2xx, kept or dropped: its links are in the record) was fetched
        or confirmed by a round that opened within the shortest timing of what the request
        serves before the request's own."""
        since = request.meta.get(FRESH_SINCE)
        return (since is not None and meta.checked is not None and meta.checked > since
                and 200 <= meta.status < 300 and bool(meta.digest))

    def _look_up(self, url: str, known: Any = ...) -> tuple[Any, str | None]:
        """The URL's meta-info (``known``: as read just before) and what is wrong with its
        stored body (store thread); a damaged or missing body's validators are forgotten, so
        the request is unconditional."""
        cache = self.cache
        meta = cache.lookup(url) if known is ... else known
        problem = cache.check(meta) if meta is not None else None
        if problem:
            cache.forget_validators(meta)
        return meta, problem

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if "webrace" not in request.meta:
            return response
        if request.meta.get(SERVED_FRESH) and "fresh" in response.flags:
            return response  # no request was made (counted as recrawl/fresh)
        if response.status != 304:
            self.stats.inc_value("recrawl/bytes_received", len(response.body))
            return response
        conditional = request.meta.get(CONDITIONAL)
        if conditional and conditional["url"] == request.url:
            self.stats.inc_value("recrawl/not_modified")
            self.stats.inc_value("recrawl/bytes_saved", conditional["meta"].size)
            if response.body:
                self.stats.inc_value("recrawl/304_with_body")
            return response
        # 304 to a request that asked nothing: the server is confused. Ask once more,
        # plainly; a second 304 reaches the spider, which counts it as failed.
        self.stats.inc_value("recrawl/unexpected_304")
        if request.meta.get(UNCONDITIONAL):
            return response
        logger.warning("Unexpected 304 for %s (no validators were sent): retrying without cache", request.url)
        retry = request.replace(dont_filter=True)
        retry.meta[UNCONDITIONAL] = RETRY
        retry.headers[b"Cache-Control"] = b"no-cache"
        retry.headers[b"Pragma"] = b"no-cache"
        return retry


def object_cache(crawler: Crawler) -> ObjectCache:
    """The crawl's object cache, from its owner (the crawl must have started)."""
    return crawler.get_downloader_middleware(RecrawlMiddleware).cache


def store_io(crawler: Crawler) -> Callable[..., Any]:
    """The crawl's way to run object-cache work off the reactor: ``await store_io(c)(fn, *args)``."""
    return crawler.get_downloader_middleware(RecrawlMiddleware).offload
