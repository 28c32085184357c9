"""Rules in the crawl: the ``urd`` spider hands every document to :class:`CrawlRules`, which
runs the template's rules in one dedicated worker thread (rules never run on the reactor
thread, and one thread at a time keeps rule state and the results table simple). The
spider awaits the outcome before it follows the page's links, so URLs a rule enqueues are
followed like the page's own links (the URDs' scope and depth apply).

Stats: ``rules/documents``, ``rules/results``, ``rules/enqueued``, ``rules/errors``,
``rules/no_body`` (a 304 whose stored body was not kept), ``rules/seconds/<rule>``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads
from twisted.python.threadpool import ThreadPool

from webrace.backends import open_results_store
from webrace.scout.engine import Outcome, RuleEngine, RuleResult
from webrace.scout.template import Template, load_template

logger = logging.getLogger(__name__)


def template_path(settings: Any, argument: str | None) -> str | None:
    """``-a template=FILE`` wins over ``WEBRACE_RULES_TEMPLATE``."""
    return argument or settings.get("WEBRACE_RULES_TEMPLATE") or None


def read_template(settings: Any, path: str) -> Template:
    """The template in ``path``, within the settings' limits (WEBRACE_MAX_XML_BYTES,
    WEBRACE_TEMPLATE_MAX_EXPANSION); :class:`TemplateError` if it cannot be used."""
    return load_template(path, max_expansion=settings.getint("WEBRACE_TEMPLATE_MAX_EXPANSION"),
                         max_bytes=settings.getint("WEBRACE_MAX_XML_BYTES"))


class CrawlRules:
    def __init__(self, template: Template, crawler: Any) -> None:
        settings = crawler.settings
        self.engine = RuleEngine(template, lambda: open_results_store(settings))
        self.crawler = crawler
        self.pool = ThreadPool(minthreads=1, maxthreads=1, name="webrace-rules")
        self.pool.start()
        logger.info("Rules from %s: %s", template.source,
                    ", ".join(f"{r.name} ({type(r).__name__})" for r in self.engine.rules))

    @classmethod
    def load(cls, crawler: Any, argument: str | None) -> CrawlRules | None:
        path = template_path(crawler.settings, argument)
        return cls(read_template(crawler.settings, path), crawler) if path else None

    @property
    def stats(self) -> Any:
        return self.crawler.stats

    async def process(self, url: str, body: bytes | Callable[[], bytes | None], headers: Mapping[str, str],
                      status: int, version: int | None) -> Outcome | None:
        """Run the rules on one document in the rules thread. ``body`` may be a function
        that reads it (from the object store), called in that thread; None: no body."""
        def work() -> Outcome | None:
            data = body() if callable(body) else body
            if data is None:
                return None
            return self.engine.process(url, data, headers, status, version)

        from twisted.internet import reactor

        outcome = await maybe_deferred_to_future(threads.deferToThreadPool(reactor, self.pool, work))
        if outcome is None:
            self.stats.inc_value("rules/no_body")
        self._sync_stats()
        return outcome

    async def close(self) -> list[RuleResult]:
        """Every rule's ``close()``, in the rules thread; then the thread stops."""
        from twisted.internet import reactor

        try:
            done = await maybe_deferred_to_future(threads.deferToThreadPool(reactor, self.pool, self.engine.close))
        finally:
            self.pool.stop()
        self._sync_stats()
        return done

    def _sync_stats(self) -> None:
        for key, value in list(self.engine.stats.items()):
            self.stats.set_value(key, value)
        for name, seconds in list(self.engine.seconds.items()):
            self.stats.set_value(f"rules/seconds/{name}", round(seconds, 3))
