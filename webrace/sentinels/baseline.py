"""A sentinel's baseline: the Page Digest of the version the next one is compared against.

The crawl makes one of every new version of a watched page (:mod:`webrace.sentinels.crawl`);
`scrapy sentinel add` makes one of the newest stored version, so that a sentinel added on a
page already stored reports the first change (without it, the first new version would only
become the reference). Both go through :func:`of_version`, so an unchanged page gives the
same digest, byte for byte, whichever made it.

No Scrapy here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from webrace import digest as D


@dataclass(frozen=True)
class Baseline:
    sha: str  # SHA-256 of ``data``: its name in the sentinel store
    data: bytes  # the Page Digest's binary form (``digest.dumps``)
    digest: D.PageDigest


@dataclass(frozen=True)
class Stored:
    """What the object cache holds of a URL: its newest version's baseline, or why there is
    none (``problem``: ``not stored``, ``no body``, ``unreadable``)."""

    baseline: Baseline | None
    problem: str = ""


def is_xml(media_type: str) -> bool:
    return media_type in ("application/xml", "text/xml") or (media_type.endswith("+xml")
                                                             and media_type != "application/xhtml+xml")


def of_version(body: bytes, content_type: str | None) -> Baseline:
    """The baseline of a version with this body and Content-Type header."""
    kind = "xml" if is_xml((content_type or "").split(";")[0].strip().lower()) else "html"
    digest = D.encode(body, kind, content_type)
    data = D.dumps(digest)
    return Baseline(hashlib.sha256(data).hexdigest(), data, digest)


def newest_stored(cache: Any, url: str) -> Stored:
    """The baseline of the newest stored version of ``url`` in ``cache`` (an ObjectCache)."""
    meta = cache.lookup(url)
    if meta is None or meta.version is None or not meta.digest:
        return Stored(None, "not stored")
    if meta.dropped:
        return Stored(None, "no body")
    try:
        body = cache.objects.get(meta.digest)
        return Stored(of_version(body, meta.header_value("Content-Type")))
    except (LookupError, ValueError, OSError):  # missing, corrupt (ObjectCorrupt), or no document (DigestError)
        return Stored(None, "unreadable")
