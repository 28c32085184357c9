"""``scrapy crawl``, with checks first, each one clear error instead of Scrapy's tracebacks:
in distributed mode, a Redis that cannot be reached (named without its password); a rules
template that cannot be used (every problem with file and line), before any request; for
``dynabot``, a service class description or seed list that cannot be used."""

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
            if self.settings.getbool("WEBRACE_DELEGATION") and args and args[0] == "urd":
                from webrace.backends.redis import prefix
                from webrace.backends.redisdelegation import RedisDelegation
                from webrace.delegation import DelegationError

                try:  # the hierarchy, latency table and this worker's address, before any request
                    RedisDelegation(connect(self.settings), prefix(self.settings), self.settings)
                except DelegationError as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    print("Nothing was crawled.", file=sys.stderr)
                    self.exitcode = 1
                    return
        if args and args[0] == "dynabot":
            from webrace.spiders.dynabot import check_arguments

            spargs = opts.spargs or {}
            try:
                check_arguments(spargs.get("scd"), spargs.get("seeds"), spargs.get("frontier", "trace"),
                                spargs.get("max_pages"))
            except ValueError as exc:
                for problem in str(exc).splitlines():
                    print(f"error: {problem}", file=sys.stderr)
                print("Nothing was crawled.", file=sys.stderr)
                self.exitcode = 1
                return
        if args and args[0] == "urd":
            from webrace.scout.crawl import template_path
            from webrace.scout.template import TemplateError, load_template

            path = template_path(self.settings, (opts.spargs or {}).get("template"))
            if path:
                try:
                    load_template(path)
                except TemplateError as exc:
                    for problem in exc.problems:
                        print(f"error: {problem}", file=sys.stderr)
                    print("Nothing was crawled.", file=sys.stderr)
                    self.exitcode = 1
                    return
        super().run(args, opts)
