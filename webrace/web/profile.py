"""An owner's profile (the seed's Service Manager manages profiles): their URDs and
sentinels, added, edited and removed from the web app with the same validation as
``scrapy urd add`` (``webrace.urd.parse``: urd.xsd, then the checks a schema cannot make)
and ``scrapy sentinel add`` (``webrace.records.sentinel.make``), plus the web's own rule:
an owner adds, edits and removes only their own.

Every problem is a :class:`ProfileError` whose ``problems`` are one line each, with
``line N`` where the pasted XML has one. Nothing is stored when there is any.

No Flask here: the pages and the JSON API both call these functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from webrace.backends import open_object_cache, open_sentinel_store, open_urd_store
from webrace.records.sentinel import Sentinel, SentinelError, make, parse_duration
from webrace.sentinels.baseline import newest_stored
from webrace.urd import MAX_PROBLEMS, Urd, UrdError, hide_credentials, now_millis, parse
from webrace.urls import BadURL, normalize
from webrace.web.config import setting

SOURCE = "pasted"  # the name problems give the pasted XML, turned into "line N"
MAX_FIELD = 2048  # characters in one sentinel form field
MAX_IGNORE = 20  # ignore rules of one sentinel
SENTINEL_FIELDS = ("url", "type", "where", "pattern", "every", "on", "ignore")  # the form's, and the API's JSON
_AT_LINE = re.compile(rf"{SOURCE}:(\d+|\?)")


class ProfileError(ValueError):
    """What is wrong with a URD or sentinel an owner gave (``problems``: one line each)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


# -- URDs -----------------------------------------------------------------------------------

def urds(settings: Any, owner: str) -> list[Urd]:
    """The owner's URDs by id, URLs shown without credentials."""
    with open_urd_store(settings) as store:
        return [replace(u, url=hide_credentials(u.url)) for u in store.all() if u.owner == owner]


def urd(settings: Any, owner: str, urd_id: str) -> Urd | None:
    with open_urd_store(settings) as store:
        found = store.get(urd_id)
    return found if found is not None and found.owner == owner else None


def add_urds(settings: Any, owner: str, xml: bytes, editing: str | None = None) -> list[Urd]:
    """Validate the pasted ``xml`` (one ``<urd>`` or a ``<urds>`` list) as `scrapy urd add`
    does and store its URDs, all or none. Every URD must be ``owner``'s, and an id another
    owner uses is refused (ids are global: replacing it would take their URD). ``editing``:
    the id of the URD being edited, which the XML must keep."""
    max_bytes = min(int(setting(settings, "WEBRACE_MAX_XML_BYTES")), int(setting(settings, "WEBRACE_WEB_MAX_BODY")))
    if not xml.strip():
        raise ProfileError(["nothing to add: paste one <urd> or a <urds> list"])
    try:
        found = parse(xml, SOURCE, max_bytes)
    except UrdError as exc:
        raise ProfileError([_located(p) for p in exc.problems]) from None
    if not found:
        raise ProfileError(["no <urd> in the XML"])
    with open_urd_store(settings) as store:
        problems = [p for u in found for p in _ownership(store, u, owner, editing)]
        if editing is not None and len(found) != 1:
            problems.append(f"an edit holds exactly one <urd> (with id {editing!r}), not {len(found)}")
        if problems:
            more = [f"... and {len(problems) - MAX_PROBLEMS} more problem(s)"] if len(problems) > MAX_PROBLEMS else []
            raise ProfileError(problems[:MAX_PROBLEMS] + more)
        store.put_many(found)
    return found


def _ownership(store: Any, item: Urd, owner: str, editing: str | None) -> list[str]:
    where = _located(item.source)
    if item.owner != owner:
        return [f"{where}: URD {item.id!r} names owner {item.owner!r}: the URDs added here are {owner!r}'s"]
    if editing is not None and item.id != editing:
        return [f"{where}: the URD's id must stay {editing!r} (add a new URD for another id)"]
    stored = store.get(item.id)
    if stored is not None and stored.owner != owner:
        return [f"{where}: the URD id {item.id!r} is taken: choose another"]
    return []


def remove_urd(settings: Any, owner: str, urd_id: str) -> bool:
    """Remove the owner's URD ``urd_id``; False when the owner has none by that id."""
    with open_urd_store(settings) as store:
        found = store.get(urd_id)
        return found is not None and found.owner == owner and bool(store.remove([urd_id]))


def _located(problem: str) -> str:
    """``pasted:12: reason`` -> ``line 12: reason`` (and ``pasted: reason`` -> ``reason``)."""
    return _AT_LINE.sub(r"line \1", problem).removeprefix(f"{SOURCE}: ")


# -- sentinels ------------------------------------------------------------------------------

def sentinels(settings: Any, owner: str) -> list[tuple[Sentinel, int, str | None]]:
    """(sentinel, next due epoch ms, digest it last saw) of the owner's sentinels."""
    with open_sentinel_store(settings) as store:
        return store.all(owner)


def sentinel(settings: Any, owner: str, sentinel_id: str) -> Sentinel | None:
    return next((s for s, _, _ in sentinels(settings, owner) if s.id == sentinel_id), None)


def sentinel_from_form(settings: Any, owner: str, form: Mapping[str, str]) -> Sentinel:
    """A checked sentinel from the form's fields (url, type, where, pattern, every, on,
    ignore: one rule a line), as `scrapy sentinel add` checks its options."""
    fields = {k: (form.get(k) or "").strip() for k in SENTINEL_FIELDS}
    too_long = [k for k, v in fields.items() if len(v) > MAX_FIELD]
    if too_long:
        raise ProfileError([f"{k}: longer than {MAX_FIELD} characters" for k in too_long])
    ignore = tuple(line.strip() for line in fields["ignore"].splitlines() if line.strip())
    if len(ignore) > MAX_IGNORE:
        raise ProfileError([f"ignore: at most {MAX_IGNORE} rules"])
    try:
        url = normalize(fields["url"], max_length=int(setting(settings, "WEBRACE_MAX_URL_LENGTH")))
    except BadURL as exc:
        raise ProfileError([f"url: not a URL WebRACE can fetch: {exc}"]) from None
    tick = max(int(float(setting(settings, "WEBRACE_SENTINEL_TICK")) * 1000), 1)
    try:
        every = parse_duration(fields["every"]) if fields["every"] else None
        return make(owner, url, fields["type"] or "any", fields["where"] or None, fields["pattern"] or None,
                    fields["on"] or "any", ignore, every, tick, now_millis())
    except SentinelError as exc:
        raise ProfileError([str(exc)]) from None


def sentinel_fields(data: Any) -> dict[str, str]:
    """The form fields of a sentinel given as JSON (the API): an object of ``SENTINEL_FIELDS``,
    each a string or null (absent); ``every`` may be a number (seconds) and ``ignore`` a list
    of strings (a rule each). Anything else is a :class:`ProfileError` naming the field."""
    if not isinstance(data, dict):
        raise ProfileError([f"expected a JSON object with the fields {', '.join(SENTINEL_FIELDS)}"])
    unknown = [k for k in data if k not in SENTINEL_FIELDS]
    if unknown:
        raise ProfileError([f"unknown field {unknown[0][:40]!r}: expected {', '.join(SENTINEL_FIELDS)}"])
    fields = {}
    for key, value in data.items():
        if key == "every" and isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        elif key == "ignore" and isinstance(value, list):
            if not all(isinstance(rule, str) and "\n" not in rule and "\r" not in rule for rule in value):
                raise ProfileError(["ignore: expected a list of strings (one rule each, without line breaks)"])
            value = "\n".join(value)
        if value is not None and not isinstance(value, str):
            kind = "a string or a number of seconds" if key == "every" else "a string"
            raise ProfileError([f"{key}: expected {kind}, not {type(value).__name__}"])
        if value is not None:
            fields[key] = value
    return fields


def add_sentinel(settings: Any, owner: str, form: Mapping[str, str], replacing: str | None = None) -> Sentinel:
    """Add the sentinel the form describes (replacing the owner's ``replacing``: an edit
    changes the id when it changes what is watched). Its baseline is the newest stored
    version of its page, as with `scrapy sentinel add`, so the first change is reported."""
    new = sentinel_from_form(settings, owner, form)
    with open_sentinel_store(settings) as store:
        mine = {s.id for s, _, _ in store.all(owner)}
        if replacing is not None and replacing not in mine:
            raise ProfileError([f"no sentinel {replacing!r}"])
        fresh = new.id not in mine
        store.add([new])
        if replacing is not None and replacing != new.id:
            store.remove([replacing])
        if fresh:
            _take_baseline(settings, store, new)
    return new


def _take_baseline(settings: Any, store: Any, new: Sentinel) -> None:
    with open_object_cache(settings) as cache:
        stored = newest_stored(cache, new.url)
    if stored.baseline is not None:
        now = now_millis()
        store.put_digest(stored.baseline.sha, stored.baseline.data)
        store.checked([new.id], now, seen=stored.baseline.sha)
        store.make_due([new.id], now)  # still due now: the next crawl compares against it


def remove_sentinel(settings: Any, owner: str, sentinel_id: str) -> bool:
    with open_sentinel_store(settings) as store:
        if sentinel_id not in {s.id for s, _, _ in store.all(owner)}:
            return False
        return bool(store.remove([sentinel_id]))
