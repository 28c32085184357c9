"""What a notification's change is, word by word, for its page on the owner's pages.

Change to the agreed interface: the digests are read from ``note["before_digest"]`` and
``note["after_digest"]``, not ``note["before"]`` / ``note["after"]``, which already were (and
stay) the removed and added text snippets `scrapy sentinel notifications` prints. Callers
pass the notification dict as the store returns it, unchanged.

A notification names the two Page Digests it compares (``before_digest`` and
``after_digest``, SHA-256s in the sentinel store, which keeps them as long as the
notification) and the sentinel's region (``where``). :func:`notification_diff`
loads both digests, takes the text of that region from each exactly as the evaluation did
(:class:`~webrace.sentinels.evaluate._View`: the location mask, minus the sentinel's
``ignore`` regions and patterns, whitespace folded), and diffs them with difflib (Sdiff marks
changed nodes, not words): the texts first, then the words of each changed block. The
result is a list of segments ``(op, text)``, ``op`` one of ``=`` (kept), ``+`` (inserted),
``-`` (deleted), consecutive ones of a kind merged, bounded: long unchanged stretches are cut
to their ends, a change to ``CHANGE_CHARS``, after ``MAX_CHANGES`` changes the rest is
counted (``… N more changes``), and
the work is bounded too (``MAX_LINES``, ``WORD_DIFF_MAX``, ``WORD_BUDGET``).
:func:`diff_html` renders it, escaped.

No Scrapy here.
"""

from __future__ import annotations

import difflib
import os
import re
from html import escape
from typing import Any

from webrace import digest as D
from webrace.sentinels.evaluate import _View

CONTEXT = 160  # characters of an unchanged stretch kept on each side of a change
MAX_CHANGES = 200  # inserted or deleted segments shown; the rest are counted
CHANGE_CHARS = 2_000  # characters of one inserted or deleted segment shown; the rest are counted
MAX_LINES = 5_000  # texts (text nodes) of each version diffed: a huge region is cut there
WORD_DIFF_MAX = 1_000  # words of a changed block of texts diffed word by word; a bigger one is shown whole
WORD_BUDGET = 10_000  # words diffed word by word in all (each diff may cost quadratic time)
_TOKEN = re.compile(r"\s*\S+")
ELIDED = " … "

Segment = tuple[str, str]


def notification_diff(store: Any, note: dict) -> list[Segment]:
    """The segments of ``note``'s change in its sentinel's region, between its ``before``
    and ``after`` digests (read with ``store.get_digest``); one ``=`` segment saying why
    when a digest is missing or unreadable."""
    views = []
    for side in ("before", "after"):
        sha = note.get(f"{side}_digest") or ""
        data = store.get_digest(sha) if sha else None
        if data is None:
            return [("=", f"The {side} version of this change is no longer stored (digest {sha[:12] or 'none'}): "
                          "no diff to show.")]
        try:
            views.append(_View(D.loads(data)))
        except (ValueError, LookupError) as exc:  # a corrupt digest (DigestError is a ValueError)
            return [("=", f"The {side} version of this change cannot be read ({exc}): no diff to show.")]
    where, ignore = note.get("where"), _ignore(store, note)
    old, new = (v.text_list(where, ignore) for v in views)
    return diff_texts(old, new)


def _ignore(store: Any, note: dict) -> tuple[str, ...]:
    """The ``ignore`` rules of the note's sentinel (none if it was removed since)."""
    for sentinel, _, _ in store.all(note.get("owner")):
        if sentinel.id == note.get("sentinel"):
            return sentinel.ignore
    return ()


def diff_texts(old: list[str], new: list[str]) -> list[Segment]:
    """Segments turning the texts ``old`` into ``new`` (each text a line): lines first, then
    the words of each changed block of lines (a block too big for that is shown whole)."""
    cut = len(old) > MAX_LINES or len(new) > MAX_LINES
    old, new = old[:MAX_LINES], new[:MAX_LINES]
    segments: list[Segment] = []
    budget = WORD_BUDGET
    # autojunk: texts repeated all over a long region (menus, "Read more") anchor nothing, which
    # keeps this linear-ish; the word diff of each changed block recovers the detail
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, old, new, autojunk=True).get_opcodes():
        a, b = _tokens(old[a1:a2]), _tokens(new[b1:b2])
        if op == "equal":
            _append(segments, "=", "".join(a))
        else:
            budget = _words(segments, a, b, budget)
    if segments and segments[-1] == ("=", "\n"):
        segments.pop()
    elif segments and segments[-1][0] == "=":
        segments[-1] = ("=", segments[-1][1].removesuffix("\n"))
    segments = _bounded(segments)
    if cut:
        segments.append(("=", f"{ELIDED}(the region has more than {MAX_LINES} texts: the rest is not compared)"))
    return segments


def _tokens(lines: list[str]) -> list[str]:
    """Words with the spaces before them (few repeats: a fast diff), and a line break token."""
    return [token for line in lines for token in (*_TOKEN.findall(line), "\n")]


def _words(segments: list[Segment], a: list[str], b: list[str], budget: int) -> int:
    """The words of a changed block: what both start and end with kept, the middle diffed
    word by word when it is small enough and the budget allows, else shown whole. Returns
    the budget left."""
    head = len(os.path.commonprefix([a, b]))
    tail = len(os.path.commonprefix([a[head:][::-1], b[head:][::-1]]))
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    _append(segments, "=", "".join(a[:head]))
    if max(len(mid_a), len(mid_b)) <= WORD_DIFF_MAX and len(mid_a) + len(mid_b) <= budget:
        budget -= len(mid_a) + len(mid_b)
        for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes():
            if op == "equal":
                _append(segments, "=", "".join(mid_a[a1:a2]))
            else:
                _change(segments, "".join(mid_a[a1:a2]), "".join(mid_b[b1:b2]))
    else:
        _change(segments, "".join(mid_a), "".join(mid_b))
    _append(segments, "=", "".join(a[len(a) - tail:]))
    return budget


def _change(segments: list[Segment], removed: str, added: str) -> None:
    """The deleted and inserted text, the whitespace both start and end with kept out of them."""
    texts = [t for t in (removed, added) if t]
    lead = min(len(t) - len(t.lstrip()) for t in texts)
    trail = min(len(t) - len(t.rstrip()) for t in texts)
    _append(segments, "=", texts[0][:lead])
    _append(segments, "-", removed[lead:len(removed) - trail])
    _append(segments, "+", added[lead:len(added) - trail])
    _append(segments, "=", texts[0][len(texts[0]) - trail:])


def _append(segments: list[Segment], op: str, text: str) -> None:
    if not text:
        return
    if segments and segments[-1][0] == op:
        segments[-1] = (op, segments[-1][1] + text)
    else:
        segments.append((op, text))


def _bounded(segments: list[Segment]) -> list[Segment]:
    """Unchanged stretches cut to ``CONTEXT`` characters beside each change; at most
    ``MAX_CHANGES`` changes, the others counted."""
    out: list[Segment] = []
    changes = 0
    for n, (op, text) in enumerate(segments):
        if op != "=":
            changes += 1
            if changes > MAX_CHANGES:
                left = sum(1 for o, _ in segments[n:] if o != "=")
                out.append(("=", f"{ELIDED}{left} more change{'s' if left > 1 else ''}"))
                break
            cut = len(text) - CHANGE_CHARS
            out.append((op, text if cut <= 0 else f"{text[:CHANGE_CHARS]}{ELIDED}({cut} more characters)"))
            continue
        first, last = n == 0, n == len(segments) - 1
        keep_head, keep_tail = (0 if first else CONTEXT), (0 if last else CONTEXT)
        if first and last:  # nothing changed in the region's text (a change of shape or links)
            keep_head = 2 * CONTEXT
        if len(text) > keep_head + keep_tail + len(ELIDED):
            text = text[:keep_head] + ELIDED + (text[-keep_tail:] if keep_tail else "")
        out.append(("=", text))
    return out


_TAGS = {"+": ("<ins>", "</ins>"), "-": ("<del>", "</del>"), "=": ("", "")}


def diff_html(segments: list[Segment]) -> str:
    """``segments`` as HTML: every text escaped, inserted in ``<ins>``, deleted in ``<del>``,
    line breaks as ``<br>``, all in ``<div class="diff">``."""
    parts = []
    for op, text in segments:
        start, end = _TAGS.get(op, ("", ""))
        parts.append(start + escape(text).replace("\n", "<br>\n") + end)
    return f'<div class="diff">{"".join(parts)}</div>'


__all__ = ["CONTEXT", "MAX_CHANGES", "MAX_LINES", "diff_html", "diff_texts", "notification_diff"]
