"""The URL extractor pipe (WebRACE section 4.2, Figure 4) made of today's parts.

1. find candidate links with lxml (through parsel): ``a``/``area`` hrefs, frame sources;
   in-page anchors (``#...``) are dropped;
2. Proactive Link Filtering: extensions in ``ignore.types`` are dropped before any work;
3. normalise with w3lib (:func:`webrace.urls.normalize`), refusing bad schemes, malformed
   and overlong URLs;
4. drop blocked domains, hosts and URL prefixes, and paths shaped like traps
   (:class:`webrace.traps.PathRules`);
5. log what failed normalisation (debug level, counted);
6. deduplicate, keeping document order.

A page gives at most ``max_candidates`` link candidates (``WEBRACE_MAX_LINK_CANDIDATES``):
a safety bound on the work one page costs (a hostile page may hold millions of links); the
candidates past it are counted, never read. How many links of a page are *followed*
(``WEBRACE_MAX_LINKS_PER_PAGE``) is decided after scope and depth, by the round engine.

Scope and depth depend on the URDs a page was fetched for and are judged by the spider;
robots.txt is judged at download time by the exclusion middleware.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from parsel import Selector

from webrace.conf import conf_list
from webrace.traps import PathRules
from webrace.urls import BadURL, Blocklist, IgnoreTypes, normalize, read_list

logger = logging.getLogger(__name__)

LINK_XPATH = "//a/@href | //area/@href | //frame/@src | //iframe/@src"


@dataclass
class Extraction:
    links: list[str] = field(default_factory=list)  # kept, canonical, in document order
    # Links dropped by the pipe: (URL as resolved as far as possible, counter name such as
    # "ignored/type" or "error/scheme"). The spider counts each URL once per crawl.
    rejected: list[tuple[str, str]] = field(default_factory=list)
    unread: int = 0  # candidates past the safety bound (max_candidates), not read


class UrlExtractor:
    def __init__(
        self,
        ignore_types: IgnoreTypes,
        blocklist: Blocklist,
        max_url_length: int = 2048,
        max_candidates: int = 50000,
        path_rules: PathRules | None = None,
    ) -> None:
        self.ignore_types = ignore_types
        self.blocklist = blocklist
        self.max_url_length = max_url_length
        self.max_candidates = max_candidates
        self.path_rules = path_rules or PathRules(0, 0)

    @classmethod
    def from_settings(cls, settings: Any) -> UrlExtractor:
        return cls(
            IgnoreTypes(conf_list(settings, "WEBRACE_IGNORE_TYPES", "ignore.types")),
            Blocklist(read_list(settings.get("WEBRACE_BLOCKLIST"))),
            max_url_length=settings.getint("WEBRACE_MAX_URL_LENGTH"),
            max_candidates=settings.getint("WEBRACE_MAX_LINK_CANDIDATES"),
            path_rules=PathRules(settings.getint("WEBRACE_TRAP_MAX_SEGMENT_REPEATS"),
                                 settings.getint("WEBRACE_TRAP_MAX_SEGMENTS")),
        )

    def extract(self, selector: Selector, base_url: str) -> Extraction:
        result = Extraction()
        seen_raw: set[str] = set()
        kept: set[str] = set()
        for raw in selector.xpath(LINK_XPATH).getall():
            raw = raw.strip()
            if not raw or raw.startswith("#") or raw in seen_raw:
                continue
            if len(seen_raw) >= self.max_candidates:
                result.unread += 1
                continue
            seen_raw.add(raw)
            verdict, url = self.judge(raw, base_url)
            if verdict is None:
                if url not in kept:
                    kept.add(url)
                    result.links.append(url)
            else:
                result.rejected.append((url, verdict))
        return result

    def judge(self, raw: str, base_url: str) -> tuple[str | None, str]:
        """(None, canonical URL) for a link to keep, else (counter name, URL as far as
        it could be resolved)."""
        if self.ignore_types.ignored(raw):
            return "ignored/type", _resolved(raw, base_url)
        try:
            url = normalize(raw, base_url, self.max_url_length)
        except BadURL as exc:
            logger.debug("Link skipped on %s: %s", base_url, exc)
            return f"error/{exc.reason}", _resolved(raw, base_url)
        if self.ignore_types.ignored(url):  # e.g. a relative path resolved onto a .pdf
            return "ignored/type", url
        if self.blocklist and self.blocklist.blocks(url):
            return "ignored/blocklist", url
        trap = self.path_rules.trap(url)
        if trap:
            logger.debug("Link skipped on %s: a trap (%s): %s", base_url, trap, url)
            return "ignored/trap", url
        return None, url


def _resolved(raw: str, base_url: str) -> str:
    try:
        return urljoin(base_url, raw)[:4096]
    except ValueError:
        return raw[:4096]
