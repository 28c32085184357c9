"""A spider middleware for tests: the crawl process dies (``os._exit``, as a ``kill -9`` would
end it) when the item of the page named by ``WEBRACE_TEST_DIE_ON`` (a URL path) comes out of
the spider: its new version is recorded, its item never reaches annotation, sentinels or a
feed. Enabled innermost (nearest the spider), only by the tests that list it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from webrace.items import Page


class DieBeforeAnnouncing:
    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def from_crawler(cls, crawler: Any) -> DieBeforeAnnouncing:
        return cls(crawler.settings.get("WEBRACE_TEST_DIE_ON") or "")

    async def process_spider_output_async(self, response: Any, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for out in result:
            if self.path and isinstance(out, Page) and urlsplit(out["url"]).path == self.path:
                os._exit(137)
            yield out

    def process_spider_output(self, response: Any, result: Any) -> Any:
        yield from result
