"""``scrapy crawl``, with checks first, each one clear error instead of Scrapy's tracebacks:
in distributed mode, a Redis that cannot be reached (named without its password); for
``urd``, an unknown ``-a urd=ID`` (in distributed mode, any: workers would ignore it) and a
rules template that cannot be used (every problem
with file and line), before any request; for ``dynabot``, a service class description or
seed list that cannot be used. ``-o/-O FILE.csv`` gets one CSV per item type
(``webrace/exporters.py``). Scrapy's dumps of settings and stats are DEBUG lines unless
``WEBRACE_SCRAPY_DUMPS`` (``webrace/crawllog.py``). The exit status says what happened: 1 when a check refused the
crawl, 1 when the crawl set out to fetch pages and not one fetch succeeded, and 1 when a
fetched page's processing failed and its item was never emitted; why goes to
stderr and, with ``LOG_FILE`` (a scrapyd job's log), to the log too."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from scrapy.commands.crawl import Command as ScrapyCrawl
from scrapy.crawler import Crawler
from scrapy.utils.log import configure_logging

from webrace.backends import (
    data_dir,
    distributed,
    open_aci_store,
    open_delivery_store,
    open_metainfo_store,
    open_results_store,
    open_sentinel_store,
    open_urd_store,
)
from webrace.commands import ends_quietly_on_closed_pipe, setting_problems
from webrace.crawllog import quiet_scrapy_dumps
from webrace.datadir import DataDirUnusable

logger = logging.getLogger(__name__)


@ends_quietly_on_closed_pipe
class Command(ScrapyCrawl):
    exit_statuses: ClassVar[str] = (
        "0: the crawl ran (nothing due included); 1: a check refused it before any request (an unknown "
        "URD id, a template or service class that cannot be used, a body store other than the other "
        "workers'), not one fetch succeeded, a fetched page's item was never emitted (its processing "
        "failed), or the body store could not be written"
    )
    run_crawler: Crawler | None = None

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        """The checks run here, before Scrapy starts logging, so that a refusal is only its
        error lines."""
        from webrace.exporters import split_csv_feeds

        super().process_options(args, opts)
        if not self.settings.getbool("WEBRACE_SCRAPY_DUMPS"):
            quiet_scrapy_dumps()  # before Scrapy logs its start: the summary is what a person reads
        spider, spargs = (args[0] if args else ""), (opts.spargs or {})
        problems = (setting_problems(self.settings) or self._redis_problems(spider)
                    or self._data_dir_problems(spider) or self._store_problems(spider)
                    or self._argument_problems(spider, spargs))
        if problems:
            configure_logging(self.settings)  # Scrapy's own starts with the crawl, and there will be none
            self._error([f"error: {problem}" for problem in problems] + ["Nothing was crawled."])
            raise SystemExit(1)
        if opts.output or opts.overwrite_output:
            self.settings.set("FEEDS", split_csv_feeds(self.settings.getdict("FEEDS"), spider), priority="cmdline")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        spider = args[0] if args else ""
        super().run(args, opts)
        try:
            stats = self.run_crawler.stats.get_stats() if self.run_crawler is not None else {}
        except RuntimeError:  # the crawler failed before its crawl started (Scrapy logged why)
            stats = {}
            self.exitcode = self.exitcode or 1
        failure = (nothing_fetched(stats) or not_emitted(stats)) if spider == "urd" else None
        if stats.get("finish_reason") == "store_unwritable":
            failure = stats.get("webrace/store_unwritable") or "the object store could not be written"
        if failure and not self.exitcode:
            self._error([f"error: {failure}"])
            self.exitcode = 1

    def _error(self, lines: list[str]) -> None:
        """Say why the exit status is 1 on stderr and, with ``LOG_FILE`` set, in the log
        too: scrapyd sets it to the job's log, which is where its users look (scrapyd keeps
        stderr in its own log, beside "Process died: exitstatus=1")."""
        for line in lines:
            print(line, file=sys.stderr)
        if self.settings.get("LOG_FILE"):
            for line in lines:
                logger.error(line.removeprefix("error: "))

    def _create_crawler(self, spidercls: Any) -> Crawler:
        self.run_crawler = super()._create_crawler(spidercls)  # its stats decide the exit status
        return self.run_crawler

    def _data_dir_problems(self, spider: str) -> list[str]:
        """Every crawl writes its summary into the data directory; an embedded ``urd`` crawl
        keeps its stores there: it can be made, and each store in it opened, before any request."""
        openers = (open_urd_store, open_metainfo_store, open_aci_store, open_results_store, open_sentinel_store,
                   open_delivery_store)
        try:
            data_dir(self.settings)
            if spider == "urd" and not distributed(self.settings):
                for opener in openers:
                    opener(self.settings).close()
        except DataDirUnusable as exc:
            return [str(exc)]
        return []

    def _store_problems(self, spider: str) -> list[str]:
        """The body store opens (a directory it can create; distributed, the one the other
        workers share), before any request."""
        if spider != "urd":
            return []
        from webrace.backends import SharedStoreMismatch, open_object_store
        from webrace.store.objects import ObjectStoreUnwritable

        try:
            open_object_store(self.settings)
        except (SharedStoreMismatch, ObjectStoreUnwritable, DataDirUnusable) as exc:
            return [str(exc)]
        return []

    def _wait_for_redis(self) -> None:
        """Redis does not answer (a URL that is no Redis URL, or a wrong password, is refused
        at once): the outage's line, its backoff, and one line when it answers; after
        ``WEBRACE_REDIS_START_WAIT`` seconds, or SIGTERM or Ctrl-C meanwhile, the last
        failure is the command's error (exit 1)."""
        from webrace.backends import RedisUnreachable, connect
        from webrace.outage import Outage, until_reachable

        limit = self.settings.get("WEBRACE_REDIS_START_WAIT")
        deadline = None if limit is None else time.monotonic() + float(limit)
        outage = Outage(lambda line: print(f"{line} (before the crawl starts)", file=sys.stderr, flush=True))
        stop = threading.Event()

        def wait(seconds: float) -> bool:  # True: stop waiting
            if deadline is not None and time.monotonic() + seconds > deadline:
                return True
            return stop.wait(seconds)

        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            if deadline is not None and deadline <= time.monotonic():  # no wait: the first failure is the error
                client = connect(self.settings)
            else:
                client = until_reachable(lambda: connect(self.settings), outage, wait, (RedisUnreachable,))
        except KeyboardInterrupt:
            client = None
        finally:
            signal.signal(signal.SIGTERM, previous)
        if client is None:  # stopped, or waited WEBRACE_REDIS_START_WAIT: the error is the last failure's
            client = connect(self.settings)
        client.close()

    def _redis_problems(self, spider: str) -> list[str]:
        if not distributed(self.settings):
            return []
        from webrace.backends import RedisUnavailable, connect

        try:
            if spider == "urd":  # a worker is long-running: started while Redis is away, it waits for it
                self._wait_for_redis()
            connect(self.settings).close()
        except RedisUnavailable as exc:
            return [str(exc)]
        if self.settings.getbool("WEBRACE_DELEGATION") and spider == "urd":
            from webrace.backends.redis import prefix
            from webrace.delegation import DelegationError
            from webrace.distributed.delegation import RedisDelegation

            try:  # the hierarchy, latency table and this worker's address, before any request
                RedisDelegation(connect(self.settings), prefix(self.settings), self.settings)
            except DelegationError as exc:
                return [str(exc)]
        return []

    def _argument_problems(self, spider: str, spargs: dict[str, str]) -> list[str]:
        if spider == "dynabot":
            from webrace.spiders.dynabot import check_arguments

            try:
                check_arguments(spargs.get("scd"), spargs.get("seeds"), spargs.get("frontier", "trace"),
                                spargs.get("max_pages"))
            except ValueError as exc:
                return str(exc).splitlines()
        if spider == "urd":
            return self._unknown_urds(spargs.get("urd")) or self._template_problems(spargs.get("template"))
        return []

    def _unknown_urds(self, ids: str | None) -> list[str]:
        """``-a urd=ID,...`` naming a URD the URD-DB does not have; in the distributed mode,
        any (workers take the rounds `scrapy urd schedule` opens: it would be ignored)."""
        wanted = [i.strip() for i in (ids or "").split(",") if i.strip()]
        if not wanted:
            return []
        if distributed(self.settings):
            return ["-a urd=ID is for embedded crawls: distributed workers crawl the rounds `scrapy urd schedule` "
                    "opens (make a URD due for the next one with `scrapy urd due ID`)"]
        with open_urd_store(self.settings) as store:
            missing = [i for i in wanted if store.get(i) is None]
        return [f"no URD with id {', '.join(missing)} (see `scrapy urd list`)"] if missing else []

    def _template_problems(self, template: str | None) -> list[str]:
        from webrace.scout.crawl import read_template, template_path
        from webrace.scout.template import TemplateError

        path = template_path(self.settings, template)
        if path:
            try:
                read_template(self.settings, path)
            except TemplateError as exc:
                return list(exc.problems)
        return []


def not_emitted(stats: Mapping[str, Any]) -> str | None:
    """Why a crawl should exit 1 though pages came back: some fetched pages never became
    items, their processing having failed (the log has each one's error). In the
    distributed mode their leases expire and another worker fetches them again."""
    unemitted = stats.get("webrace/unemitted", 0)
    if not unemitted:
        return None
    return (f"{unemitted} fetched page(s) were not emitted: their processing failed (see the log); "
            "a distributed worker's leases of them expire and another worker fetches them again")


def nothing_fetched(stats: Mapping[str, Any]) -> str | None:
    """Why a crawl that ran should still exit 1: it set out to fetch pages and got not one
    (no page item), every fetch having failed (DNS, refused, timeout, too large, robots.txt
    unreachable...). None when any page came back, a 404 included (an answer is not a
    failure), and when nothing was due or every link was excluded (nothing was tried)."""
    if stats.get("webrace/pages", 0):
        return None
    failed = {key.removeprefix("webrace/failed/"): n for key, n in stats.items()
              if key.startswith("webrace/failed/") and n}
    if stats.get("webrace/ignored/robots_unreachable"):
        failed["robots_unreachable"] = stats["webrace/ignored/robots_unreachable"]
    if not failed:
        return None
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(failed.items()))
    return f"nothing could be fetched: every fetch failed ({reasons}); see the crawl summary above"
