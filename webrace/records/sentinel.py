"""Sentinels (seed 004, section 3.5.1): what an owner watches on one URL, and how often.

Types, from the most general to the most specific (the seed's hierarchy): ``any``;
``content``, then its refinements ``keyword`` and ``regex``; ``structure``, then its
refinements ``links``, ``images``, ``attributes``. Each may be restricted to a location
(``css:SELECTOR`` or ``xpath:EXPR``: the matched elements and everything below), may ignore
noise (``ignore``: selectors whose regions do not count, or regular expressions removed from
the text before comparing), and may fire only on ``added`` or only on ``removed`` text,
links, images or matches (``on``). The firing interval is a multiple of
``WEBRACE_SENTINEL_TICK``.

No Scrapy here.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace

from webrace.digest.sdiff import check_location
from webrace.names import canonical_owner, owner_name_problem
from webrace.patterns import PatternError, compile_pattern
from webrace.urd import MAX_TIMING_MS

TYPES = ("any", "content", "keyword", "regex", "structure", "links", "images", "attributes")
ON = ("any", "added", "removed")
_ORDER = {t: n for n, t in enumerate(TYPES)}  # general before specific
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000, None: 1000}


class SentinelError(ValueError):
    """A sentinel that cannot work; the message says why."""


@dataclass(frozen=True)
class Sentinel:
    owner: str
    url: str
    type: str = "any"
    where: str | None = None
    pattern: str | None = None  # keyword (literal, case-insensitive) or regular expression
    on: str = "any"  # any | added | removed
    ignore: tuple[str, ...] = ()
    every: int = 3_600_000  # ms, a multiple of the tick
    created: int = 0
    id: str = field(default="")
    # read from the store, never kept in the JSON: added or made due (`sentinel due`) and not
    # checked since, so its next round fetches the page rather than serving it from a recent fetch
    asked: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not self.id:
            key = json.dumps([self.owner, self.url, self.type, self.where, self.pattern, self.on, list(self.ignore)])
            object.__setattr__(self, "id", hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:12])

    @property
    def rank(self) -> int:
        """Evaluation order in a group: general sentinels, and whole-page ones, first."""
        return _ORDER[self.type] * 2 + (1 if self.where else 0)

    def to_json(self) -> str:
        data = asdict(self)
        data["ignore"] = list(self.ignore)
        del data["asked"]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Sentinel:
        data = json.loads(text)
        data["ignore"] = tuple(data.get("ignore") or ())
        data.pop("asked", None)
        return cls(**data)


def parse_duration(text: str) -> int:
    """``90s``, ``15m``, ``1h``, ``2d``, ``1w`` or plain seconds -> milliseconds."""
    found = _DURATION.fullmatch(text.strip().lower()) if len(text) <= 40 else None
    if not found:
        raise SentinelError(f"not a duration: {text[:40]!r} (examples: 90s, 15m, 1h, 2d)")
    ms = float(found.group(1)) * _UNIT_MS[found.group(2)]
    if not ms <= MAX_TIMING_MS:  # (inf and nan too)
        raise SentinelError(f"{text.strip()!r} is longer than {MAX_TIMING_MS // 86_400_000:,} days")
    return int(ms)


def make(owner: str, url: str, type: str = "any", where: str | None = None, pattern: str | None = None,  # noqa: A002
         on: str = "any", ignore: tuple[str, ...] = (), every_ms: int | None = None, tick_ms: int = 60_000,
         now_ms: int = 0) -> Sentinel:
    """A checked sentinel (every problem a clear :class:`SentinelError`); the interval is
    rounded up to a multiple of the tick."""
    problem = owner_name_problem(owner)
    if problem:
        raise SentinelError(problem)
    owner = canonical_owner(owner)  # the form accounts and URDs store: Alice's sentinel is alice's
    if type not in TYPES:
        raise SentinelError(f"unknown sentinel type {type!r}: expected one of {', '.join(TYPES)}")
    if on not in ON:
        raise SentinelError(f"--on must be one of {', '.join(ON)}, not {on!r}")
    if type in ("structure", "attributes") and on != "any":
        raise SentinelError(f"--on {on} is for sentinels on text, links, images or matches, not {type}")
    if type in ("keyword", "regex") and not pattern:
        raise SentinelError(f"a {type} sentinel needs --pattern")
    if type not in ("keyword", "regex") and pattern:
        raise SentinelError(f"--pattern is for keyword and regex sentinels, not {type}")
    if type == "regex":
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            raise SentinelError(f"--pattern: {exc}") from None
    for location in [where] if where else []:
        try:
            check_location(location)
        except ValueError as exc:
            raise SentinelError(str(exc)) from None
    for rule in ignore:
        if rule.startswith(("css:", "xpath:")):
            try:
                check_location(rule)
            except ValueError as exc:
                raise SentinelError(f"--ignore: {exc}") from None
        else:
            try:
                compile_pattern(rule)
            except PatternError as exc:
                raise SentinelError(f"--ignore {rule[:80]!r} is neither css:/xpath: nor a regular expression: "
                                    f"{exc}") from None
    tick = max(int(tick_ms), 1)
    every = every_ms if every_ms is not None else tick
    if every <= 0:
        raise SentinelError("the interval must be positive")
    every = -(-every // tick) * tick  # the next multiple of the tick
    if every > MAX_TIMING_MS:  # as a URD's timing: a time beyond it cannot be stored or added to a date
        raise SentinelError(f"the interval must be at most {MAX_TIMING_MS // 86_400_000:,} days")
    return Sentinel(owner, url, type, where or None, pattern or None, on, tuple(ignore), every, now_ms)


def with_interval(sentinel: Sentinel, every_ms: int) -> Sentinel:
    return replace(sentinel, every=every_ms)
