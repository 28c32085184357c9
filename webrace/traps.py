"""Crawler traps: URL shapes and URL families that never end (pure, no Scrapy).

A calendar that links "next month" forever, a path that grows by one repeated segment
(``/cal/x/x/x/...``), a listing that links ``?page=N+1`` forever: each page is new, so
neither the frontier nor the object cache stops them. Three rules, after Heritrix's
``PathologicalPathDecideRule`` and ``TooManyPathSegmentsDecideRule``, judge a URL by its
shape alone; a fourth, :class:`QueryVariants`, remembers per round how many distinct query
strings one path has shown. The per-URD page budget is the backstop for what no shape
rule catches (the spider keeps it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True)
class PathRules:
    max_segment_repeats: int = 3  # a segment may occur this many times in a path, no more
    max_segments: int = 20  # a path may have this many segments, no more

    def trap(self, url: str) -> str | None:
        """Why ``url``'s path looks like a trap, or None."""
        segments = [s for s in urlsplit(url).path.split("/") if s]
        if self.max_segments and len(segments) > self.max_segments:
            return f"{len(segments)} path segments (over {self.max_segments})"
        if self.max_segment_repeats and segments:
            segment, times = Counter(segments).most_common(1)[0]
            if times > self.max_segment_repeats:
                return f"segment {segment[:40]!r} repeated {times} times (over {self.max_segment_repeats})"
        return None


@dataclass
class QueryVariants:
    """Distinct query strings seen per path (scheme, host, port and path) in one round: a
    URL whose path already has ``limit`` others is a trap. Memory is bounded by ``limit``
    per path; ``limit`` 0 switches the rule off."""

    limit: int = 100
    seen: dict[str, set[str]] = field(default_factory=dict)

    def admit(self, url: str) -> bool:
        if not self.limit:
            return True
        parts = urlsplit(url)
        if not parts.query:
            return True
        key = f"{parts.scheme}://{parts.netloc}{parts.path}"
        queries = self.seen.setdefault(key, set())
        if parts.query in queries:
            return True
        if len(queries) >= self.limit:
            return False
        queries.add(parts.query)
        return True
