"""One message per owner, channel and delivery pass: the new ACIs and notifications, listed
with links, bounded (at most ``max_items`` listed, the rest counted: "and 37 more").

Plain text, so that mail, webhooks, ntfy and chat services all show it as written. Pure: no
Apprise, no store.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from webrace.records.aci import Aci

SUMMARY_CHARS = 200  # of an ACI's summary shown in a message
TITLE_CHARS = 120  # of a page title
LIST_CHARS = 160  # of a notification's added or removed texts shown


@dataclass(frozen=True)
class Message:
    title: str
    body: str
    items: tuple[tuple[str, str, int], ...]  # (kind, id, time) of every item it stands for, listed or counted


def compose(owner: str, acis: list[Aci], notes: list[dict], base_url: str = "", max_items: int = 20) -> Message:
    """The message telling ``owner`` about ``acis`` and ``notes`` (either may be empty)."""
    acis = sorted(acis, key=lambda a: (not a.urgent, -a.updatetime, a.id))
    notes = sorted(notes, key=lambda n: (-int(n.get("at") or 0), str(n.get("id"))))
    shown_notes = min(len(notes), max(max_items - len(acis), max_items // 2))
    shown_acis = min(len(acis), max_items - shown_notes)
    lines = []
    if acis:
        lines.append(f"New or changed pages ({len(acis)}):")
        lines += [line for a in acis[:shown_acis] for line in _aci_lines(a, owner, base_url)]
    if notes:
        lines.append(f"Changes your sentinels saw ({len(notes)}):")
        lines += [line for n in notes[:shown_notes] for line in _note_lines(n, owner, base_url)]
    more = len(acis) - shown_acis + len(notes) - shown_notes
    if more:
        where = (f": {_link(base_url, 'owner', owner)}/" if base_url
                 else " (`scrapy aci list`, `scrapy sentinel notifications`)")
        lines.append(f"... and {more} more{where}")
    items = tuple([("aci", a.id, a.updatetime) for a in acis] +
                  [("notification", str(n["id"]), int(n.get("at") or 0)) for n in notes])
    return Message(_title(owner, len(acis), len(notes)), "\n".join(lines) + "\n", items)


def _title(owner: str, pages: int, changes: int) -> str:
    parts = [f"{pages} new page{'s' * (pages != 1)}"] if pages else []
    parts += [f"{changes} change{'s' * (changes != 1)}"] if changes else []
    return f"WebRACE for {owner}: {', '.join(parts) or 'nothing new'}"


def _aci_lines(aci: Aci, owner: str, base_url: str) -> list[str]:
    head = (aci.title or aci.uri)[:TITLE_CHARS]
    flags = " [urgent]" if aci.urgent else ""
    lines = [f"- {head}{flags} (relevance {aci.relevance:g}, {_iso(aci.updatetime)})", f"  {aci.uri}"]
    if aci.summary:
        lines.append(f"  {_clip(aci.summary, SUMMARY_CHARS)}")
    lines.append(f"  stored version: {_link(base_url, 'stored', aci.id)}" if base_url else f"  ACI {aci.id}")
    return lines


def _note_lines(note: dict, owner: str, base_url: str) -> list[str]:
    changes = note.get("changes") or {}
    counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(changes.items()) if isinstance(v, list) and v)
    where = f" in {note['where']}" if note.get("where") else ""
    lines = [f"- {note.get('type', 'change')} change{where} on {note.get('url', '')}"
             f" ({counts or 'changed'}, {_iso(int(note.get('at') or 0))})"]
    for key, sign in (("added", "+"), ("removed", "-")):
        texts = [t for t in changes.get(key) or [] if isinstance(t, str)]
        if texts:
            lines.append(f"  {sign} {_clip(' | '.join(texts), LIST_CHARS)}")
    link = _link(base_url, "owner", owner, "notifications", str(note["id"]))
    lines.append(f"  what changed: {link}" if base_url else f"  notification {note['id']}")
    return lines


def _link(base_url: str, *parts: str) -> str:
    return base_url.rstrip("/") + "".join("/" + quote(p, safe="@+") for p in parts)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
