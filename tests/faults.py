"""Faults injected into real crawls, for the tests of what a crawl does when its own code
fails (the crashes of issue 44 were bugs; once fixed, nothing else raises on demand)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit


class RaiseOnPages:
    """A spider middleware: the callback output of the pages whose paths ``TEST_RAISE_PATHS``
    lists raises, as a bug in the spider's callback would."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = set(paths)

    @classmethod
    def from_crawler(cls, crawler: Any) -> RaiseOnPages:
        return cls(crawler.settings.getlist("TEST_RAISE_PATHS"))

    async def process_spider_output_async(self, response: Any, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        if urlsplit(response.url).path in self.paths:
            raise RuntimeError(f"injected failure on {response.url}")
        async for out in result:
            yield out

    def process_spider_output(self, response: Any, result: Any) -> Any:
        if urlsplit(response.url).path in self.paths:
            raise RuntimeError(f"injected failure on {response.url}")
        yield from result
