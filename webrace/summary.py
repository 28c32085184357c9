"""The crawl summary, in the vocabulary of Scout's session log.

At the end of every crawl (its last lines, once the engine has stopped) one line like Scout's
``URL Stats: discovered = 3 followed = 2 ignored = 1 (scope 1) error = 0 failed = 0; requested
= 2 expanded = 2`` is logged, with the breakdown by reason, and the same figures are left in
Scrapy's stats (``webrace/summary/*``) and in ``WEBRACE_DATA_DIR/last-crawl.json`` for scripts.

Distinct URLs, each counted once per crawl in one class (:mod:`webrace.rounds.tally`), so
``discovered = followed + ignored + error``:

- discovered: distinct URLs the crawl came to know (start URLs, every link found, a
  redirect's target that was refused or failed)
- followed: those the crawl requested (or had queued when it stopped); ``failed`` of them got
  no usable page (HTTP error status, DNS, refused, timeout, too large, redirect loop...), by
  reason
- ignored: those not followed, or refused before their page was had, by reason (robots,
  robots_unreachable, crawl_delay, blocklist, type, mime, scope, depth, limit, trap, budget,
  redirect_scope)
- error: URLs that could not be crawled at all (unsupported scheme, malformed, too long)
  and pages that could not be parsed

And two counts of work, not of URLs: requested (requests that reached the downloader, robots.txt
fetches not included: redirects, retries and each round's re-crawl count) and expanded
(pages whose links were extracted).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler

from webrace.backends import data_dir

logger = logging.getLogger(__name__)

CATEGORIES = ("ignored", "failed", "error")


def summarize(stats: dict[str, Any]) -> dict[str, Any]:
    """Scout-style totals and breakdowns from a Scrapy stats dict."""
    out: dict[str, Any] = {
        name: stats.get(f"webrace/{name}", 0)
        for name in ("discovered", "followed", "requested", "expanded", "pages")
    }
    for category in CATEGORIES:
        prefix = f"webrace/{category}/"
        reasons = {k[len(prefix):]: v for k, v in stats.items() if k.startswith(prefix) and v}
        out[category] = sum(reasons.values())
        out[f"{category}_by_reason"] = dict(sorted(reasons.items()))
    return out


def format_summary(summary: dict[str, Any]) -> str:
    def breakdown(category: str) -> str:
        reasons = summary[f"{category}_by_reason"]
        return f" ({', '.join(f'{k} {v}' for k, v in reasons.items())})" if reasons else ""

    return (
        f"URL Stats: discovered = {summary['discovered']} followed = {summary['followed']} "
        f"ignored = {summary['ignored']}{breakdown('ignored')} error = {summary['error']}{breakdown('error')} "
        f"failed = {summary['failed']}{breakdown('failed')}; "
        f"requested = {summary['requested']} expanded = {summary['expanded']}"
    )


def unbalanced(summary: dict[str, Any]) -> list[str]:
    """How a summary's arithmetic fails to add up (none: it adds up): each URL in one class,
    ``discovered = followed + ignored + error``, ``failed`` among the followed, every
    breakdown summing to its total, no count below zero."""
    problems = []
    counts = {name: summary.get(name, 0) for name in ("discovered", "followed", *CATEGORIES)}
    classes = counts["followed"] + counts["ignored"] + counts["error"]
    if classes != counts["discovered"]:
        problems.append(f"discovered = {counts['discovered']} but followed {counts['followed']} + ignored "
                        f"{counts['ignored']} + error {counts['error']} = {classes}")
    if counts["failed"] > counts["followed"]:
        problems.append(f"failed = {counts['failed']} exceeds followed = {counts['followed']}")
    for category in CATEGORIES:
        reasons = summary.get(f"{category}_by_reason", {})
        if sum(reasons.values()) != counts[category]:
            problems.append(f"{category} = {counts[category]} but its reasons {reasons} sum to "
                            f"{sum(reasons.values())}")
    negative = {k: v for k, v in counts.items() if v < 0}
    negative.update({f"{c}/{r}": v for c in CATEGORIES for r, v in summary.get(f"{c}_by_reason", {}).items()
                     if v < 0})
    if negative:
        problems.append(f"counts below zero: {negative}")
    return problems


RECRAWL = ("first_fetch", "not_modified", "fresh", "modified", "unchanged_body", "no_validators", "unconditional")


def format_recrawl(stats: dict[str, Any]) -> str:
    """``Re-crawl: first_fetch = 3 not_modified = 120 fresh = 40 ... bytes received = 1.2 MB saved = 8.4 MB``."""
    if not any(k.startswith("recrawl/") for k in stats):
        return ""
    counts = " ".join(f"{name} = {stats.get(f'recrawl/{name}', 0)}" for name in RECRAWL)
    received = stats.get("recrawl/bytes_received", 0) / 1e6
    saved = stats.get("recrawl/bytes_saved", 0) / 1e6
    return f"Re-crawl: {counts}; bytes received = {received:.1f} MB, saved = {saved:.1f} MB"


def format_manners(stats: dict[str, Any], most: int = 5) -> list[str]:
    """Lines on robots.txt that stopped hosts, URDs that hit their page budget, and the
    pacing each host got (its rest after each answer: mean and max, the busiest first)."""
    def keyed(prefix: str) -> dict[str, Any]:
        return {k[len(prefix):]: v for k, v in stats.items() if k.startswith(prefix)}

    lines = []
    unreachable = keyed("robots/unreachable_origin/")
    if unreachable:
        lines.append("robots.txt unreachable, nothing fetched from these hosts this round (asked again next "
                     "round): " + ", ".join(f"{o} ({why})" for o, why in sorted(unreachable.items())))
    too_long = keyed("robots/crawl_delay_too_long/")
    if too_long:
        lines.append("Hosts skipped, robots.txt Crawl-delay over WEBRACE_MAX_CRAWL_DELAY: "
                     + ", ".join(f"{h} ({d:g}s)" for h, d in sorted(too_long.items())))
    budget = keyed("webrace/budget_reached/")
    if budget:
        lines.append("Page budget reached (WEBRACE_MAX_PAGES_PER_URD), links past it not followed, for URDs: "
                     + ", ".join(f"{u} ({n} pages)" for u, n in sorted(budget.items())))
    counts = {k[: -len("/requests")]: v for k, v in keyed("pacing/").items() if k.endswith("/requests")}
    if counts:
        busiest = sorted(counts, key=lambda h: (-counts[h], h))
        shown = [f"{h} mean {stats.get(f'pacing/{h}/delay_mean', 0):.3g}s max "
                 f"{stats.get(f'pacing/{h}/delay_max', 0):.3g}s ({counts[h]} answers)" for h in busiest[:most]]
        more = f"; and {len(busiest) - most} more hosts" if len(busiest) > most else ""
        lines.append("Pacing, rest after each answer: " + "; ".join(shown) + more)
    return lines


class CrawlSummary:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.said: list[tuple[int, str]] = []  # what engine_stopped logs: (level, line)
        crawler.signals.connect(self.request_reached_downloader, signal=signals.request_reached_downloader)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self.engine_stopped, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlSummary:
        return cls(crawler)

    def request_reached_downloader(self, request: Request) -> None:
        if "webrace" in request.meta:
            self.stats.inc_value("webrace/requested")

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if spider.name != "urd":  # DynaBot reports its own tables (last-dynabot.json)
            return
        summary = summarize(self.stats.get_stats())
        for key in ("discovered", "followed", "requested", "expanded", "pages", *CATEGORIES):
            self.stats.set_value(f"webrace/summary/{key}", summary[key])
        said = [(logging.INFO, f"WebRACE crawl summary ({reason}): {format_summary(summary)}")]
        # a counting bug of ours, said rather than hidden
        said += [(logging.WARNING, f"The crawl summary does not add up: {problem}") for problem in unbalanced(summary)]
        recrawl = format_recrawl(self.stats.get_stats())
        said += [(logging.INFO, recrawl)] if recrawl else []
        said += [(logging.INFO, line) for line in format_manners(self.stats.get_stats())]
        owners = self.stats.get_value("webrace/owners")
        if owners:
            said.append((logging.INFO, f"Pages: {summary['pages']}, for owners: {owners}"))
        self.said = said
        counters = {
            k: v.isoformat() if isinstance(v, datetime) else v
            for k, v in self.stats.get_stats().items()
            if isinstance(v, (int, float, str, datetime))
        }
        record = {"spider": spider.name, "reason": reason, **summary, "stats": counters}
        path = data_dir(self.crawler.settings) / "last-crawl.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)

    def engine_stopped(self) -> None:
        """The summary's lines, last: after Scrapy's closing lines (the feeds stored, "Spider
        closed"), where a person reading the end of the output finds them."""
        for level, line in self.said:
            logger.log(level, "%s", line)
