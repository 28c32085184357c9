"""What each owner is shown (the seed's Personal Information Roadmap): their ACIs, their
notifications with what changed, the stored versions the ACIs point to, read through the
one factory of ``webrace.backends`` (so the same code serves the embedded and the
distributed mode). Stores are opened per call: SQLite connections belong to one thread.

No Flask here: the pages and the JSON API both call these functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from typing import Any

from webrace.backends import open_aci_store, open_object_cache, open_sentinel_store, open_urd_store
from webrace.records.aci import Aci
from webrace.sentinels.diff import diff_html, notification_diff
from webrace.store.objects import ObjectCorrupt, ObjectMissing

MAX_NOTIFICATIONS = 200  # listed on an owner's page, newest first
MAX_PAGE = 1_000_000  # the highest page number asked for (?page=): a longer number is refused, not converted
_MEDIA = {"html": "text/html", "xhtml": "application/xhtml+xml", "xml": "application/xml", "text": "text/plain"}
_HEAD = re.compile(rb"<head(\s[^>]*)?>", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    """One page of a listing: ``items``, its number (from 1) and whether more follow."""

    items: list
    number: int
    more: bool


class StoredUnavailable(Exception):
    """The stored version cannot be shown: ``status`` (410 gone, 500 damaged) and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def page_number(text: str | None) -> int:
    """The page ``?page=`` asks for (1 when it is absent or empty); a ValueError of one line
    when it is not a number from 1 to ``MAX_PAGE`` (``int()`` of 5,000 digits would raise,
    and ``"²".isdigit()`` is true)."""
    if not text:
        return 1
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(MAX_PAGE))) or not 1 <= int(text) <= MAX_PAGE:
        raise ValueError(f"page: expected a number from 1 to {MAX_PAGE:,}, not {text[:20]!r}")
    return int(text)


def acis(settings: Any, owner: str, page: int = 1, size: int = 50) -> Page:
    """The owner's ACIs, newest first, ``size`` a page."""
    with open_aci_store(settings) as store:
        found = store.list(owner)
    start = (max(page, 1) - 1) * size
    return Page(found[start:start + size], max(page, 1), len(found) > start + size)


def aci(settings: Any, aci_id: str) -> Aci | None:
    with open_aci_store(settings) as store:
        return store.get(aci_id)


def notifications(settings: Any, owner: str, limit: int = MAX_NOTIFICATIONS) -> list[dict]:
    """The owner's newest notifications."""
    with open_sentinel_store(settings) as store:
        return store.notifications(owner)[:limit]


def notification(settings: Any, owner: str, note_id: str) -> tuple[dict, list[tuple[str, str]]] | None:
    """The owner's notification ``note_id`` and what changed in its region (diff segments)."""
    with open_sentinel_store(settings) as store:
        note = next((n for n in store.notifications(owner) if n.get("id") == note_id), None)
        if note is None:
            return None
        return note, notification_diff(store, note)


def segments_html(segments: list[tuple[str, str]]) -> str:
    """The diff as HTML (escaped; ``<ins>``/``<del>`` in a ``div.diff``)."""
    return diff_html(segments)


def owners(settings: Any, accounts: list[str]) -> list[dict[str, Any]]:
    """Every owner (accounts, and owners of ACIs or URDs without an account) with their counts."""
    with open_aci_store(settings) as store:
        counts = {o: len(store.list(o)) for o in store.owners()}
    with open_urd_store(settings) as urd_store:
        urds: dict[str, int] = {}
        for urd in urd_store.all():
            urds[urd.owner] = urds.get(urd.owner, 0) + 1
    names = sorted(set(accounts) | set(counts) | set(urds))
    return [{"name": n, "account": n in accounts, "acis": counts.get(n, 0), "urds": urds.get(n, 0)} for n in names]


def stored_version(settings: Any, item: Aci) -> tuple[str, bytes]:
    """(media type, body) of the version ``item`` points to, with a ``<base>`` so that its
    relative links go to the original site; :class:`StoredUnavailable` when it is gone."""
    with open_object_cache(settings) as cache:
        try:
            body = cache.objects.get(item.docbase)
        except ObjectMissing:
            raise StoredUnavailable(410, f"Version {item.version} of {item.uri} is no longer stored "
                                         "(acknowledged and removed by `scrapy store gc`)") from None
        except ObjectCorrupt:
            raise StoredUnavailable(500, f"The stored copy of {item.uri} is damaged") from None
        meta = cache.lookup(item.uri)
    content_type = meta.header_value("Content-Type") if meta is not None and meta.digest == item.docbase else None
    content_type = content_type or _MEDIA.get(item.format, "application/octet-stream")
    if item.format in ("html", "xhtml") and b"<base" not in body[:4096].lower():
        base = f'<base href="{escape(item.uri, quote=True)}">'.encode()
        body, found = _HEAD.subn(lambda m: m.group(0) + base, body, count=1)
        if not found:
            body = base + body
    return content_type, body
