"""``scrapy crawl``, with one check first: in distributed mode, a Redis that cannot be
reached is one clear error naming the URL (Scrapy would print a traceback per component)."""

from __future__ import annotations

import argparse
import sys

from scrapy.commands.crawl import Command as ScrapyCrawl


class Command(ScrapyCrawl):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if self.settings.get("REDIS_URL"):
            from webrace.backends.redis import RedisUnavailable, connect

            try:
                connect(self.settings).close()
            except RedisUnavailable as exc:
                print(f"error: {exc}", file=sys.stderr)
                self.exitcode = 1
                return
        super().run(args, opts)
