"""``scrapy rules run --template FILE [--urd ID]``: run rules over what is already stored,
without the network (Scout's second JavaDoc phase, over the object cache)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.backends import open_object_cache, open_results_store, open_urd_store
from webrace.commands import ends_quietly_on_closed_pipe

if TYPE_CHECKING:
    from webrace.store.cache import ObjectCache


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: every stored document went through the rules; 1: a template that cannot be used, an unknown "
        "--urd, a rule that raised on a document (named in the log)"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "run --template FILE [--urd ID]"

    def short_desc(self) -> str:
        return "Run a template's rules over the stored versions, with no network access"

    def long_desc(self) -> str:
        return (
            "run: every stored URL (with --urd ID: those in that URD's scope), in the order they were "
            "first fetched, goes through the template's rules, newest stored version; results go to the "
            "results table as in a crawl. URLs a rule enqueues are processed too if they are stored "
            "(nothing is fetched). Then every rule's close() runs."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--template", metavar="FILE", help="the rules template (required)")
        parser.add_argument("--urd", metavar="ID", help="only URLs in this URD's scope")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from webrace.scout.crawl import read_template
        from webrace.scout.engine import RuleEngine
        from webrace.scout.template import TemplateError
        from webrace.store.objects import ObjectCorrupt, ObjectMissing
        from webrace.urls import BadURL, in_scope, normalize

        if args != ["run"]:
            raise UsageError("expected `run`")
        if not opts.template:
            raise UsageError("`run` needs --template FILE")
        try:
            template = read_template(self.settings, opts.template)
        except TemplateError as exc:
            for problem in exc.problems:
                print(f"error: {problem}", file=sys.stderr)
            self.exitcode = 1
            return
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
        urd = None
        if opts.urd:
            with open_urd_store(self.settings) as urds:
                urd = urds.get(opts.urd)
            if urd is None:
                print(f"error: no URD with id {opts.urd} (see `scrapy urd list`)", file=sys.stderr)
                self.exitcode = 1
                return
        engine = RuleEngine(template, lambda: open_results_store(self.settings))
        started = time.perf_counter()
        with open_object_cache(self.settings) as cache:
            stored = set(cache.index.urls())
            chosen = [u for u in stored if urd is None or in_scope(u, urd.url, urd.scope)]
            queue = deque(sorted(chosen, key=lambda u: _first_fetch(cache, u)))
            done, skipped, offline = set(), 0, 0
            while queue:
                url = queue.popleft()
                if url in done:
                    continue
                done.add(url)
                meta = cache.lookup(url)
                try:
                    version, body = cache.get(url)
                except (LookupError, ObjectMissing, ObjectCorrupt):
                    skipped += 1  # no body kept (dropped as irrelevant, error status, damaged)
                    continue
                headers = meta.headers() if meta is not None and meta.digest == version.digest else {}
                outcome = engine.process(url, body, headers, version.status, version.number)
                for raw in outcome.enqueued:
                    try:
                        target = normalize(str(raw), url)
                    except BadURL:
                        continue
                    if target in stored and target not in done:
                        queue.append(target)
                    elif target not in stored:
                        offline += 1
                if len(done) % 500 == 0:
                    print(f"... {len(done)} documents", file=sys.stderr, flush=True)
        closed = engine.close()
        seconds = time.perf_counter() - started
        stats = engine.stats
        print(f"Ran {len(engine.rules)} rule(s) over {stats['rules/documents']} stored document(s) in {seconds:.2f} s: "
              f"{stats['rules/results']} result(s), {stats['rules/errors']} rule error(s); "
              f"{skipped} URL(s) without a stored body skipped; {offline} enqueued URL(s) not stored "
              f"(not fetched: offline){'; closed: ' + ', '.join(r.rule for r in closed) if closed else ''}")
        if stats["rules/errors"]:
            self.exitcode = 1


def _first_fetch(cache: ObjectCache, url: str) -> tuple[int, str]:
    versions = cache.versions(url)
    meta = cache.lookup(url)
    return (versions[0].fetched if versions else (meta.fetched if meta else 0)), url
