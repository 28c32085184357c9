"""Evaluating a group of sentinels over two versions of one page (seed 004, 3.6.1-3.6.2).

All the sentinels of one URL are evaluated together, on one encode of the new version and
one load of the previous digest:

- the signature check first: the same digest, nothing can have changed, nothing runs;
- every region (location minus ignored regions), text list, link list and Sdiff
  annotation is computed once per version and shared by every sentinel that needs it;
- sentinels run from the general to the specific (``any``, ``content``, ``keyword``,
  ``regex``, ``structure``, ``links``...), and a specific one is skipped when the general
  comparison it refines found nothing in its region (no text change: no keyword can have
  appeared).

No Scrapy here.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from webrace.digest.core import PageDigest
from webrace.digest.sdiff import mask as location_mask
from webrace.digest.sdiff import sdiff
from webrace.patterns import PatternError, compile_pattern
from webrace.records.sentinel import Sentinel

logger = logging.getLogger(__name__)

SNIPPET = 200
MAX_LISTED = 50


@dataclass(frozen=True)
class Notification:
    sentinel: str
    owner: str
    url: str
    type: str
    where: str | None
    changes: dict[str, list[str]]  # "added" / "removed" (texts, links, images, matches), "nodes"
    before: str  # what was removed, as a snippet
    after: str  # what was added, as a snippet
    at: int = 0  # epoch ms of the new version
    version: int | None = None
    id: str = field(default="")
    # SHA-256s of the two Page Digests compared, in the sentinel store (the diff on the
    # notification's page is built from them; set by the crawl, which knows them)
    before_digest: str = ""
    after_digest: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            key = f"{self.sentinel}\n{self.at}\n{self.version}\n{sorted(self.changes.items())}"
            object.__setattr__(self, "id", hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:16])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _View:
    """One version of the page, with everything the group asks for computed once."""

    def __init__(self, digest: PageDigest) -> None:
        self.digest = digest
        self._tree: Any = None
        self.masks: dict[tuple, Any] = {}
        self.texts: dict[tuple, list[str]] = {}

    def tree(self) -> Any:
        if self._tree is None:
            self._tree = self.digest.to_tree()
        return self._tree

    def mask(self, where: str | None, ignore: tuple[str, ...]) -> Any:
        selectors = tuple(i for i in ignore if i.startswith(("css:", "xpath:")))
        key = (where, selectors)
        if key not in self.masks:
            region = location_mask(self.digest, where, self.tree()) if where or selectors else None
            if selectors:
                region = bytearray(b"\x01") * self.digest.size if region is None else region
                for selector in selectors:
                    for i, marked in enumerate(location_mask(self.digest, selector, self.tree())):
                        if marked:
                            region[i] = 0
            self.masks[key] = region
        return self.masks[key]

    def nodes(self, where: str | None, ignore: tuple[str, ...]) -> Iterable[int] | None:
        region = self.mask(where, ignore)
        return None if region is None else [i for i, m in enumerate(region) if m]

    def text_list(self, where: str | None, ignore: tuple[str, ...]) -> list[str]:
        key = (where, ignore)
        if key not in self.texts:
            patterns = [compile_pattern(i) for i in ignore if not i.startswith(("css:", "xpath:"))]
            texts = []
            for text in self.digest.texts(self.nodes(where, ignore)):
                for pattern in patterns:
                    text = pattern.sub("", text)
                text = " ".join(text.split())
                if text:
                    texts.append(text)
            self.texts[key] = texts
        return self.texts[key]

    def values(self, tag: str, name: str, where: str | None, ignore: tuple[str, ...]) -> list[str]:
        return [v for _, v in self.digest.attribute_values(tag, name, self.nodes(where, ignore))]


@dataclass
class GroupStats:
    evaluated: int = 0
    skipped: int = 0  # short-circuited by a more general comparison
    fired: int = 0
    unchanged: bool = False
    refused: int = 0  # sentinels whose pattern RE2 cannot run (stored before patterns were checked with it)
    failed: int = 0  # sentinels whose evaluation failed otherwise (a location the digest cannot select...)


def evaluate(sentinels: Iterable[Sentinel], old: PageDigest | None, new: PageDigest, at: int = 0,
             version: int | None = None, stats: GroupStats | None = None) -> list[Notification]:
    """The notifications a new version gives the sentinels of one URL (None for ``old``:
    the first version, which only becomes the reference)."""
    stats = stats if stats is not None else GroupStats()
    group = sorted(sentinels, key=lambda s: (s.rank, s.id))
    if old is None or not group:
        return []
    if old == new:  # the signature check: nothing changed, no sentinel runs
        stats.unchanged = True
        stats.skipped += len(group)
        return []
    before, after = _View(old), _View(new)
    diffs: dict[tuple, Any] = {}

    def annotation(facet: str, where: str | None, ignore: tuple[str, ...]) -> Any:
        key = (facet, where, ignore)
        if key not in diffs:
            diffs[key] = sdiff(old, new, facet, after.mask(where, ignore))
        return diffs[key]

    memo: dict[tuple, Any] = {}  # comparisons shared by sentinels with the same region and parameters
    notes = []
    for s in group:
        try:  # one owner's sentinel that cannot run (a pattern stored before RE2) costs the others nothing
            texts_old = texts_new = None
            if s.type in ("content", "keyword", "regex", "any"):
                texts_old, texts_new = before.text_list(s.where, s.ignore), after.text_list(s.where, s.ignore)
                if s.type in ("keyword", "regex") and texts_old == texts_new:
                    stats.skipped += 1  # the general comparison found no text change here
                    continue
            key = (s.type, s.where, s.ignore, s.pattern)
            if key not in memo:
                memo[key] = _changes(s, before, after, texts_old, texts_new, annotation)
        except PatternError:
            stats.refused += 1
            continue
        except Exception as exc:  # noqa: BLE001 - any failure of one owner's sentinel is that sentinel's alone
            stats.failed += 1
            logger.warning("Sentinel %s on %s not evaluated: %s: %s", s.id, s.url, type(exc).__name__, exc)
            continue
        stats.evaluated += 1
        changes = memo[key]
        if changes is None:
            continue
        if s.on != "any" and not changes.get(s.on):
            continue
        stats.fired += 1
        notes.append(Notification(
            s.id, s.owner, s.url, s.type, s.where,
            {k: v[:MAX_LISTED] for k, v in changes.items() if v},
            _snippet(changes.get("removed")), _snippet(changes.get("added")), at, version,
        ))
    return notes


def _changes(s: Sentinel, before: _View, after: _View, texts_old: list[str] | None, texts_new: list[str] | None,
             annotation: Any) -> dict[str, list[str]] | None:
    """What changed for ``s`` (None: nothing it watches)."""
    region_old = before.mask(s.where, s.ignore) if s.where else None
    region_new = after.mask(s.where, s.ignore) if s.where else None
    if s.where and any(region_old) != any(region_new):  # the region appeared or disappeared
        key = "added" if any(region_new) else "removed"
        return {key: [f"region {s.where} {'appeared' if key == 'added' else 'disappeared'}"]}
    if s.type in ("any", "content"):
        added, removed = _text_delta(texts_old, texts_new)
        if s.type == "content":
            return {"added": added, "removed": removed} if added or removed else None
        # text through the ignore rules; shape and attributes from Sdiff
        marked = [ann for ann in (annotation("structure", s.where, s.ignore),
                                  annotation("attributes", s.where, s.ignore)) if _marked(ann)]
        if not (added or removed or marked):
            return None
        return {"added": added, "removed": removed,
                "nodes": [label for ann in marked for label in _labels(after.digest, ann)]}
    if s.type == "keyword":
        was, now = _has_word(" ".join(texts_old), s.pattern), _has_word(" ".join(texts_new), s.pattern)
        if was == now:
            return None
        return {"added": [s.pattern]} if now else {"removed": [s.pattern]}
    if s.type == "regex":
        pattern = compile_pattern(s.pattern)  # RE2: linear time whatever the owner wrote
        was = Counter(m.group(0) for m in pattern.finditer("\n".join(texts_old)))
        now = Counter(m.group(0) for m in pattern.finditer("\n".join(texts_new)))
        added, removed = list((now - was).elements()), list((was - now).elements())
        return {"added": added, "removed": removed} if added or removed else None
    if s.type in ("links", "images"):
        tag, name = ("a", "href") if s.type == "links" else ("img", "src")
        was = Counter(before.values(tag, name, s.where, s.ignore))
        now = Counter(after.values(tag, name, s.where, s.ignore))
        added, removed = list((now - was).elements()), list((was - now).elements())
        return {"added": added, "removed": removed} if added or removed else None
    facet = "structure" if s.type == "structure" else "attributes"
    nodes = annotation(facet, s.where, s.ignore)
    return {"nodes": _labels(after.digest, nodes)} if _marked(nodes) else None


def _has_word(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` as a whole word, ignoring case (str.find in C,
    then a look at the two neighbours)."""
    haystack, needle = text.lower(), word.lower()
    at = haystack.find(needle)
    while at >= 0:
        end = at + len(needle)
        if (at == 0 or not (haystack[at - 1].isalnum() or haystack[at - 1] == "_")) and (
                end == len(haystack) or not (haystack[end].isalnum() or haystack[end] == "_")):
            return True
        at = haystack.find(needle, at + 1)
    return False


def _marked(ann: Any) -> bool:
    from webrace.digest.sdiff import ATTRIBUTES, CONTENT, STRUCTURE

    return any(code & (CONTENT | ATTRIBUTES | STRUCTURE) for code in ann.codes)


def _labels(digest: PageDigest, ann: Any) -> list[str]:
    return [f"{digest.label(i)}#{i}" for i in ann.nodes()][:MAX_LISTED]


def _text_delta(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """Texts added and removed, in order (a line-level diff of the region's texts)."""
    added, removed = [], []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            removed.extend(old[a1:a2])
        if op in ("replace", "insert"):
            added.extend(new[b1:b2])
    return added, removed


def _snippet(values: list[str] | None) -> str:
    if not values:
        return ""
    text = " | ".join(values)
    return text if len(text) <= SNIPPET else text[: SNIPPET - 3] + "..."
