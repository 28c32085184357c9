"""Evidence that a service's answer depends on the query (pure; no Scrapy here).

A page that matched a result type may still say nothing about the query: a table browser
answers ``0 rows where search matches "crawler"`` and its sort and facet links carry the
word in their URLs; a filter the server dropped answers the whole table, whose first rows
happen to hold the word. So DynaBot backs every claim with a *control probe*: the same
request with a value that cannot match (:func:`nonsense`), and :func:`judge` compares the
two answers:

- what merely repeats the query is not a result (:func:`mask_echoes`): the value inside
  tags (a link's URL, the search box's ``value``), scripts, styles, comments, the title and
  text areas; and every occurrence of the value whose surroundings the other answer shows
  too with its own value there (``... rows where search matches "X" sorted by ...``) or with
  the same value (a row the unfiltered table shows whatever was asked);
- the hit must still be a result once its echoes are masked;
- the nonsense value must not get results holding it (a page that echoes anything), nor the
  hit's results (an answer that does not depend on the query); an answer the class's
  ``<noresults>`` patterns describe, or no result at all, is what a control expects.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import lxml.html
from lxml import etree

from scd import ServiceClass, Vertex

MASK = "\u2591"  # what an echo is replaced with: no pattern of a service class matches it
CONTEXT = 20  # characters on each side of a value that make its surroundings
MIN_NONSENSE = 10  # letters of a nonsense word, at least (short words have few letters to draw from)
SAME_RESULTS = 0.5  # share of the hit's results the control's answer holds that makes them "the same"
MAX_OCCURRENCES = 5_000  # occurrences of a value looked at per answer
_HIDDEN = ("script", "style", "textarea", "title")  # elements whose text a reader does not see as a result
_TAG = re.compile(r"<(/?)([A-Za-z!?][^\s/>]*)")
_DIGITS = re.compile(r"\d+")
_ANY_TAG = re.compile(r"<[^>]*>")


def nonsense(value: str, rng: random.Random, fits: Callable[[str], bool] = lambda _: True) -> str:
    """A value like ``value`` that no service holds: each run of letters replaced by letters
    drawn from that run's own (so a DNA line stays DNA, a FASTA defline a word), digits by
    digits, the rest kept; a single short word grows to :data:`MIN_NONSENSE` letters.
    ``fits`` (the argument's type) is tried a few times before the value is only shuffled."""
    for _ in range(8):
        made = _scramble(value, rng)
        if made.lower() != value.lower() and value.lower() not in made.lower() and fits(made):
            return made
    letters = list(value)
    rng.shuffle(letters)
    return "".join(letters)


def _scramble(value: str, rng: random.Random) -> str:
    tokens = re.split(r"(\s+)", value)
    out = []
    for token in tokens:
        if not token or token.isspace():
            out.append(token)
            continue
        pool = sorted({c for c in token if c.isalpha()}) or list("qxzjk")
        made = "".join(rng.choice(pool) if c.isalpha() else rng.choice("0123456789") if c.isdigit() else c
                       for c in token)
        out.append(made)
    made = "".join(out)
    if len(tokens) == 1 and made.isalpha() and len(made) < MIN_NONSENSE:
        pool = sorted(set(made.lower())) + ["q", "x", "z"]
        made += "".join(rng.choice(pool) for _ in range(MIN_NONSENSE - len(made)))
    return made


def _value_pattern(value: str) -> re.Pattern | None:
    words = value.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)


def _hidden_spans(markup: str) -> list[tuple[int, int]]:
    """Where a reader sees no text of the page: tags, comments, and the insides of scripts,
    styles, text areas and the title. Linear: each closing tag is found once."""
    spans = []
    position = 0
    lowered = None
    while True:
        start = markup.find("<", position)
        if start < 0:
            break
        if markup.startswith("<!--", start):
            end = markup.find("-->", start + 4)
            end = len(markup) if end < 0 else end + 3
            spans.append((start, end))
            position = end
            continue
        tag = _TAG.match(markup, start)
        if tag is None:
            position = start + 1
            continue
        end = markup.find(">", start)
        end = len(markup) if end < 0 else end + 1
        name = tag.group(2).lower()
        if not tag.group(1) and name in _HIDDEN:
            lowered = lowered if lowered is not None else markup.lower()
            close = lowered.find(f"</{name}", end)
            close = len(markup) if close < 0 else close
            spans.append((start, close))
            position = close
            continue
        spans.append((start, end))
        position = end
    return spans


def _replace(markup: str, spans: Iterable[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in sorted(set(spans)):
        if start < last:
            continue
        out += [markup[last:start], MASK * (end - start)]
        last = end
    out.append(markup[last:])
    return "".join(out)


def _occurrences(markup: str, pattern: re.Pattern) -> list[tuple[int, int]]:
    found = []
    for match in pattern.finditer(markup):
        found.append(match.span())
        if len(found) >= MAX_OCCURRENCES:
            break
    return found


def mask_in_tags(markup: str, values: Iterable[str]) -> str:
    """``markup`` with every occurrence of ``values`` that a reader does not see as page text
    (inside tags, scripts, styles, comments, text areas, the title) masked."""
    patterns = [p for v in values if (p := _value_pattern(v)) is not None]
    if not patterns or not markup:
        return markup
    hidden = _hidden_spans(markup)
    spans = []
    for pattern in patterns:
        for start, end in _occurrences(markup, pattern):
            if _inside(start, end, hidden):
                spans.append((start, end))
    return _replace(markup, spans) if spans else markup


def _inside(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    low, high = 0, len(spans)
    while low < high:  # the last span starting at or before `start`
        middle = (low + high) // 2
        if spans[middle][0] <= start:
            low = middle + 1
        else:
            high = middle
    return low > 0 and spans[low - 1][1] >= end


def _contexts(markup: str, pattern: re.Pattern) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Each side's surroundings of each occurrence (numbers aside): ("L", text before) and ("R",
    text after) -> the occurrences."""
    found: dict[tuple[str, str], list[tuple[int, int]]] = {}
    lowered = markup.lower()
    for start, end in _occurrences(markup, pattern):
        for key in (("L", _DIGITS.sub("0", lowered[max(0, start - CONTEXT):start])),
                    ("R", _DIGITS.sub("0", lowered[end:end + CONTEXT]))):
            if len(key[1]) == CONTEXT:  # a page's first or last characters say too little
                found.setdefault(key, []).append((start, end))
    return found


def mask_shared(markup: str, values: Iterable[str], other: str, other_values: Iterable[str]) -> str:
    """``markup`` with the occurrences of ``values`` masked that ``other`` shows in the same
    surroundings (the text just before, or just after; numbers aside) around one of ``values``
    or ``other_values``: the query repeated by the page's template, or text both answers hold
    whatever was asked."""
    mine = [p for v in values if (p := _value_pattern(v)) is not None]
    theirs = [p for v in [*values, *other_values] if (p := _value_pattern(v)) is not None]
    if not mine or not markup or not other:
        return markup
    seen = set()
    for pattern in theirs:
        seen |= set(_contexts(other, pattern))
    spans = []
    for pattern in mine:
        for key, places in _contexts(markup, pattern).items():
            if key in seen:
                spans += places
    return _replace(markup, spans) if spans else markup


def text_of(markup: str) -> str:
    """The page's text, as the recogniser reads it when the markup has no match."""
    if not markup.strip():
        return ""
    try:
        return lxml.html.document_fromstring(markup.encode("utf-8", "replace"),
                                             parser=lxml.html.HTMLParser(encoding="utf-8")).text_content()
    except (etree.ParserError, ValueError):
        return markup


@dataclass(frozen=True)
class Answer:
    """One probe's answer, as :func:`judge` compares them."""

    markup: str
    values: dict[str, str]  # argument name -> value sent ({arg:NAME})


@dataclass(frozen=True)
class Evidence:
    """Whether the control probe's answer backs the claim, and why (for the trace and the profile)."""

    backed: bool
    reason: str
    no_results: str | None = None  # what the control's answer says, when a <noresults> pattern found it


def _found(service: ServiceClass, type_name: str, markup: str, values: dict[str, str]) -> bool:
    recognizer = service.recognizer()
    return bool(recognizer.find(type_name, markup, values) or recognizer.find(type_name, text_of(markup), values))


def _results(service: ServiceClass, vertex: Vertex, markup: str, values: dict[str, str], limit: int) -> list[str]:
    if not vertex.result_type:
        return []
    recognizer = service.recognizer()
    found = recognizer.find_all(vertex.result_type, markup, values, limit=limit) or \
        recognizer.find_all(vertex.result_type, text_of(markup), values, limit=limit)
    return [" ".join(m.text.split()) for m in found]


def page_results_only(service: ServiceClass, vertex: Vertex, markup: str, page_markup: str,
                      values: dict[str, str], limit: int = 20) -> bool:
    """Whether every result of an answer is one the form's own page shows too with the same
    values: the site's menus and header holding the word sent (Sphinx's "Python 3.11
    Documentation" when sent "python"), not an answer to it."""
    def shown(results: list[str]) -> set[str]:  # as a reader sees them: a link to "#" on its own page
        return {" ".join(_ANY_TAG.sub(" ", r).split()).lower() for r in results}

    mine = _results(service, vertex, markup, values, limit)
    return bool(mine) and shown(mine) <= shown(_results(service, vertex, page_markup, values, 10 * limit))


def echoed(service: ServiceClass, vertex: Vertex) -> set[str]:
    """The arguments whose values the vertex's types look for in an answer ({arg:NAME})."""
    recognizer = service.recognizer()
    names = recognizer.arguments(vertex.type)
    if vertex.result_type:
        names |= recognizer.arguments(vertex.result_type)
    return names


def judge(service: ServiceClass, vertex: Vertex, hit: Answer, control: Answer, limit: int = 20) -> Evidence:
    """Does the control probe's answer back the claim that ``hit`` (a ``vertex`` page) answers
    the query? See the module's docstring."""
    names = echoed(service, vertex)
    hit_values = [hit.values[n] for n in names if hit.values.get(n)]
    control_values = [control.values[n] for n in names if control.values.get(n)]
    hit_markup = mask_in_tags(hit.markup, hit_values)
    control_markup = mask_in_tags(control.markup, control_values + hit_values)
    if names:
        hit_markup = mask_shared(hit_markup, hit_values, control_markup, control_values)
        control_markup = mask_shared(control_markup, control_values + hit_values, hit_markup, hit_values)
        if not _found(service, vertex.type, hit_markup, hit.values):
            return Evidence(False, "the hit's results are not there once what the nonsense probe's answer shows "
                                   "too is set aside: they echo the query, or do not depend on it")
        if _found(service, vertex.type, control_markup, control.values):
            return Evidence(False, f"the nonsense probe ({_short(control_values)}) got results holding it: the "
                                   "service echoes whatever it is asked")
    said = service.no_results(text_of(control.markup), control.values)
    hit_results = _results(service, vertex, hit_markup, hit.values, limit)
    if hit_results:
        same = set(_results(service, vertex, control_markup, hit.values, limit)) & set(hit_results)
        if len(same) >= max(1, SAME_RESULTS * len(hit_results)):
            return Evidence(False, f"the nonsense probe got {len(same)} of the hit's {len(hit_results)} results: "
                                   "the answer does not depend on the query")
    if said:
        return Evidence(True, f"the nonsense probe's answer says {' '.join(said.split())[:80]!r}", said)
    if not hit_results:
        return Evidence(True, "an empty answer, which the class's result type describes; the nonsense probe "
                              "got no results either")
    return Evidence(True, "the nonsense probe got no results like the hit's")


def _short(values: list[str]) -> str:
    text = " ".join(values)
    return repr(text if len(text) <= 40 else text[:37] + "...")
