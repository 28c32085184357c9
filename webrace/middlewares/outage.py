"""A distributed worker's pages when Redis goes away under them (issue 44).

A page's callback, or a spider middleware after it (the annotation and sentinel middlewares
write to Redis too), that meets Redis away raises a connection error; Scrapy would log it
with a traceback, for every page in flight. This middleware, the outermost of the spider
middlewares, hands such an error to the spider instead (:meth:`UrdSpider.abandon
<webrace.spiders.urd.UrdSpider.abandon>`): the outage is said once, in one line, and the
page's lease is given up so that the page is fetched again once Redis is back. Any other
error goes on as before, and so does every error of a spider that is no distributed worker
(an embedded crawl has no Redis to lose).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webrace.outage import REDIS_DOWN


class RedisOutageMiddleware:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisOutageMiddleware:
        return cls(crawler)

    def process_spider_exception(self, response: Any, exception: Exception) -> Iterable[Any] | None:
        spider = self.crawler.spider
        if getattr(spider, "outage", None) is None or not isinstance(exception, REDIS_DOWN):
            return None
        spider.abandon(response.request, exception)
        return ()
