"""The URL extractor pipe (WebRACE section 4.2, Figure 4) made of today's parts.

1. find candidate links with lxml (through parsel): ``a``/``area`` hrefs, frame sources;
   in-page anchors (``#...``) are dropped;
2. Proactive Link Filtering: extensions in ``ignore.types`` are dropped before any work;
3. normalise with w3lib (:func:`webrace.urls.normalize`), refusing bad schemes, malformed
   and overlong URLs;
4. drop blocked domains, hosts and URL prefixes;
5. log what failed normalisation (debug level, counted);
6. deduplicate, keeping document order.

Scope and depth depend on the URDs a page was fetched for and are judged by the spider;
robots.txt is judged at download time by the exclusion middleware.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from parsel import Selector

from webrace.urls import BadURL, Blocklist, IgnoreTypes, normalize

logger = logging.getLogger(__name__)

LINK_XPATH = "//a/@href | //area/@href | //frame/@src | //iframe/@src"


@dataclass
class Extraction:
    links: list[str] = field(default_factory=list)  # kept, canonical, in document order
    found: int = 0  # distinct candidate links on the page
    ignored: Counter = field(default_factory=Counter)  # type, blocklist, limit
    errors: Counter = field(default_factory=Counter)  # scheme, malformed, too_long


class UrlExtractor:
    def __init__(
        self,
        ignore_types: IgnoreTypes,
        blocklist: Blocklist,
        max_url_length: int = 2048,
        max_links: int = 5000,
    ) -> None:
        self.ignore_types = ignore_types
        self.blocklist = blocklist
        self.max_url_length = max_url_length
        self.max_links = max_links

    def extract(self, selector: Selector, base_url: str) -> Extraction:
        result = Extraction()
        seen_raw: set[str] = set()
        kept: set[str] = set()
        for raw in selector.xpath(LINK_XPATH).getall():
            raw = raw.strip()
            if not raw or raw.startswith("#") or raw in seen_raw:
                continue
            seen_raw.add(raw)
            result.found += 1
            if len(kept) >= self.max_links:
                result.ignored["limit"] += 1
                continue
            if self.ignore_types.ignored(raw):
                result.ignored["type"] += 1
                continue
            try:
                url = normalize(raw, base_url, self.max_url_length)
            except BadURL as exc:
                result.errors[exc.reason] += 1
                logger.debug("Link skipped on %s: %s", base_url, exc)
                continue
            if self.ignore_types.ignored(url):  # e.g. a redirector path resolved to .pdf
                result.ignored["type"] += 1
                continue
            if self.blocklist and self.blocklist.blocks(url):
                result.ignored["blocklist"] += 1
                continue
            if url not in kept:
                kept.add(url)
                result.links.append(url)
        return result
