"""What became of each URL a crawl came to know, counted once per URL (pure).

Every URL the crawl discovers is in exactly one class at any moment, so the summary adds up::

    discovered = followed + ignored + error

- **followed**: the crawl requested it (or queued it, when the crawl stopped first); of
  these, **failed** (a sub-count) got no usable page;
- **ignored** (by reason): not followed (a link out of scope or depth, past a cap, a trap,
  a type not kept...), or refused before its page was had (robots.txt, a media type);
- **error** (by reason): a URL that cannot be crawled (bad scheme, malformed, too long), or
  a page that could not be parsed.

A URL moves between classes as the crawl learns more, and the counters move with it: a link
not followed keeps the first reason it got, until some path follows it (from another page, or
in a later round): then it is followed. What a request for it came to is its latest fate: a
refusal (robots.txt, a media type), a failure, a parse error, or a page had (followed again,
not failed); following it again does not undo a refusal or a failure, its outcome does. The
counters are ``webrace/discovered``, ``webrace/followed``,
``webrace/ignored/<reason>``, ``webrace/failed/<reason>`` and ``webrace/error/<reason>``.

The engine's calls run in the Redis thread in distributed mode while the page recorder's
run on the reactor: one lock makes each move whole.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

FOLLOWED = "followed"
# Fates: "" (discovered, no class yet), "link ignored/<r>" or "link error/<r>" (a link not
# followed), "followed", "followed failed/<r>", "refused ignored/<r>", "refused error/parse".
_KINDS = ("link", "refused")


class UrlTally:
    def __init__(self, stats: Any) -> None:
        self.stats = stats  # inc_value(key, count)
        self.fates: dict[str, str] = {}
        self._lock = threading.Lock()

    def __contains__(self, url: str) -> bool:
        return url in self.fates

    def discover(self, url: str) -> bool:
        """Count ``url`` as discovered the first time; True then. It has no class yet, so
        the caller must give it one (the other methods discover and classify at once)."""
        with self._lock:
            return self._discover(url)

    def follow(self, url: str) -> None:
        """The crawl requests ``url`` (or has it in a round's frontier)."""
        with self._lock:
            self._discover(url)
            if self.fates[url].split(" ", 1)[0] in ("", "link"):
                self._move(url, FOLLOWED)

    def not_followed(self, url: str, counter: str) -> bool:
        """A link no URD follows (``counter``: "ignored/<reason>" or "error/<reason>"):
        counted unless the URL has a class already. True if counted."""
        with self._lock:
            self._discover(url)
            if self.fates[url]:
                return False
            self._move(url, f"link {counter}")
            return True

    def refused(self, url: str, counter: str) -> None:
        """A URL followed but refused before its page was had ("ignored/robots",
        "ignored/mime"...), or whose page could not be parsed ("error/parse")."""
        with self._lock:
            self._discover(url)
            self._move(url, f"refused {counter}")

    def fetched(self, url: str) -> None:
        """A usable page was had from ``url`` (its body, or a 304 on its stored version)."""
        with self._lock:
            self._discover(url)
            self._move(url, FOLLOWED)

    def failed(self, url: str, reason: str) -> None:
        """A request for ``url`` got no usable page: it stays followed, counted failed once
        (by its latest reason)."""
        with self._lock:
            self._discover(url)
            self._move(url, f"{FOLLOWED} failed/{reason}")

    def _discover(self, url: str) -> bool:
        if url in self.fates:
            return False
        self.fates[url] = ""
        self._inc("discovered")
        return True

    def _move(self, url: str, fate: str) -> None:
        old = self.fates[url]
        if old == fate:
            return
        for key in _counters(old):
            self._inc(key, -1)
        for key in _counters(fate):
            self._inc(key)
        self.fates[url] = sys.intern(fate)  # a few distinct fates shared by every URL

    def _inc(self, key: str, n: int = 1) -> None:
        self.stats.inc_value(f"webrace/{key}", n)


def _counters(fate: str) -> list[str]:
    """The counters a fate adds to: "followed failed/dns" is followed and failed/dns."""
    return [word for word in fate.split() if word not in _KINDS]


__all__ = ["UrlTally"]
