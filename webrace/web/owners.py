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
from webrace.backends.base import Cursor
from webrace.records.aci import Aci
from webrace.sentinels.diff import diff_html, notification_diff
from webrace.store.objects import ObjectCorrupt, ObjectMissing

MAX_NOTIFICATIONS = 200  # listed on an owner's page, newest first
MAX_PAGE = 1_000_000  # the highest page number asked for (?page=): a longer number is refused, not converted
MAX_CURSOR = 300  # characters of a cursor (?after=, ?before=): time, a dot, an id
_MEDIA = {"html": "text/html", "xhtml": "application/xhtml+xml", "xml": "application/xml", "text": "text/plain"}
_CURSOR_ID = re.compile(r"[!-~]+")  # printable ASCII, no space
_HEAD = re.compile(rb"<head(\s[^>]*)?>", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    """One page of a listing, newest first: ``items``; ``more``: older ones follow (``next``:
    the cursor of its last item, for ``?after=``); ``newer``: newer ones precede it
    (``previous``: the cursor of its first, for ``?before=``); ``number``: the page asked for by
    number (old ``?page=`` links), else None."""

    items: list
    more: bool
    newer: bool = False
    number: int | None = None

    @property
    def next(self) -> str | None:
        return cursor_text(self.items[-1]) if self.more and self.items else None

    @property
    def previous(self) -> str | None:
        return cursor_text(self.items[0]) if self.newer and self.items else None


def cursor_of(item: Any) -> Cursor:
    """(time, id) of an ACI or a notification (a dict)."""
    return (item["at"], item["id"]) if isinstance(item, dict) else (item.updatetime, item.id)


def cursor_text(item: Any) -> str:
    """The cursor of an ACI or a notification, as a URL carries it: ``TIME.ID``."""
    when, item_id = cursor_of(item)
    return f"{when}.{item_id}"


def parse_cursor(text: str | None, name: str = "after") -> Cursor | None:
    """``TIME.ID`` as (time, id); None when absent or empty; a ValueError of one line when it is
    not one (the time a number of at most 16 digits, the id printable ASCII without spaces)."""
    if not text:
        return None
    when, _, item = text.partition(".")
    if (len(text) > MAX_CURSOR or not (when.isascii() and when.isdigit() and len(when) <= 16) or not item
            or not _CURSOR_ID.fullmatch(item)):
        raise ValueError(f"{name}: expected a cursor TIME.ID (the `next` or `previous` of a page), not {text[:40]!r}")
    return int(when), item


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


def acis(settings: Any, owner: str, page: int | None = None, size: int = 50, after: Cursor | None = None,
         before: Cursor | None = None) -> Page:
    """The owner's ACIs, newest first, ``size`` a page: the first page, the one past cursor
    ``after`` or the one before cursor ``before``, each one read of the store's index; or page
    number ``page`` (old links), reached from the first a page at a time."""
    with open_aci_store(settings) as store:
        return _paged(store.page, owner, size, page, after, before)


def _paged(read: Any, owner: str, size: int, page: int | None, after: Cursor | None, before: Cursor | None) -> Page:
    size = max(size, 1)
    if before is not None:
        found = read(owner, size + 1, before, newer=True)
        return Page(found[-size:], True, len(found) > size)
    for _ in range(max(page or 1, 1) - 1):  # to page number ``page``: a read per page before it
        skipped = read(owner, size, after)
        if len(skipped) < size:
            return Page([], False, True, page)
        after = cursor_of(skipped[-1])
    found = read(owner, size + 1, after)
    return Page(found[:size], len(found) > size, after is not None, page)


def aci(settings: Any, aci_id: str) -> Aci | None:
    with open_aci_store(settings) as store:
        return store.get(aci_id)


def notifications(settings: Any, owner: str, size: int = MAX_NOTIFICATIONS, after: Cursor | None = None,
                  before: Cursor | None = None) -> Page:
    """The owner's notifications, newest first, ``size`` a page, as :func:`acis` pages them."""
    with open_sentinel_store(settings) as store:
        return _paged(store.notifications_page, owner, size, None, after, before)


def notification(settings: Any, owner: str, note_id: str) -> tuple[dict, list[tuple[str, str]]] | None:
    """The owner's notification ``note_id`` and what changed in its region (diff segments)."""
    with open_sentinel_store(settings) as store:
        note = store.notification(owner, note_id)
        if note is None:
            return None
        return note, notification_diff(store, note)


def segments_html(segments: list[tuple[str, str]]) -> str:
    """The diff as HTML (escaped; ``<ins>``/``<del>`` in a ``div.diff``)."""
    return diff_html(segments)


def owners(settings: Any, accounts: list[str]) -> list[dict[str, Any]]:
    """Every owner (accounts, and owners of ACIs or URDs without an account) with their counts."""
    with open_aci_store(settings) as store:
        counts = {o: store.count(o) for o in store.owners()}
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
