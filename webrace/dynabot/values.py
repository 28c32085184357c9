"""Probe values: what DynaBot types into a form, tried in turn (pure; no Scrapy here).

A probing template's value ("crawler") finds nothing on a site whose documents never use the
word, and a site that answers nothing proves nothing. So each typed-in required argument is
tried with, in turn:

1. the values given on the command line (``-a keywords=library,socket`` for the argument
   ``keywords``, or ``-a probe=library`` for every typed-in required argument), checked
   against the argument's type when DynaBot starts;
2. the template's own value;
3. the site's own words: the most frequent content words of the start page's text (not its
   forms, scripts or styles), those that are instances of the argument's type;
4. the words of the answers: when a probe got no result, the most frequent content words its
   answer shows that the start page does not (a bare search page's "no match" answer listing
   popular or recent documents, a result list the control probe did not back: words the
   site's documents use), :func:`answer_words`, tried next (:func:`with_value`), as many in
   all per source as the site's words;
5. the template's further values (``<value>`` repeated: general words most collections hold,
   for a search page that shows no words of its own, as Xapian Omega's, whose answers say no
   more than "No documents match your query").

:func:`vary` turns a plan into probes that carry those values, each planned probe with every
value before the next planned probe.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from scd import Argument, ServiceClass
from webrace.dynabot.answers import STOPWORDS, prose

MAX_VALUES = 10  # values given for one argument on the command line, at most
MAX_VALUE_CHARS = 1_000  # characters of one such value
_SITE_WORD = re.compile(r"[A-Za-z][a-z]{3,24}")  # a word as people type it: letters, not a code or camelCase
PROBE = "probe"  # -a probe=...: values for every typed-in required argument
NEXT_VALUE = "the class's next value"  # how a probe with a template's further value says so
_COMMON = frozenset("""
    home page pages next previous last first help about contact search login logout sign account menu
    view edit show hide more less back top main site index list item items link links click here
    copyright rights reserved privacy terms powered version using used date time
    """.split())  # navigation and boilerplate: words of every site, no subject of this one


def typed_arguments(service: ServiceClass) -> dict[str, Argument]:
    """The arguments a person types in (required, not an iterator over options), by name."""
    return {a.name: a for e in service.examples for a in e.arguments if a.required and not a.iterator}


def parse_values(service: ServiceClass, given: Mapping[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """The command line's values (``-a NAME=V1,V2``: NAME an argument of the class, or ``probe``
    for each typed-in one) by argument name, and the problems (one line each)."""
    arguments = typed_arguments(service)
    everyone = {a.name for e in service.examples for a in e.arguments}
    found: dict[str, list[str]] = {}
    problems = []
    recognizer = service.recognizer()
    for key, text in given.items():
        names = list(arguments) if key == PROBE else [key]
        if key != PROBE and key not in arguments:
            why = "is chosen among a form's options" if key in everyone else "is no argument of the service class"
            problems.append(f"-a {key}=...: {key!r} {why}; typed-in arguments: {', '.join(sorted(arguments))}")
            continue
        values = [v.strip() for v in str(text).split(",") if v.strip()]
        if not values:
            problems.append(f"-a {key}=: no value given")
            continue
        if len(values) > MAX_VALUES or any(len(v) > MAX_VALUE_CHARS for v in values):
            problems.append(f"-a {key}=...: at most {MAX_VALUES} values of {MAX_VALUE_CHARS} characters")
            continue
        for name in names:
            argument = arguments[name]
            for value in values:
                if _fits(recognizer, argument, value):
                    if value not in found.setdefault(name, []):
                        found[name].append(value)
                elif key != PROBE:
                    problems.append(f"-a {key}={value}: not an instance of the argument's type {argument.type!r}")
    return found, problems


def _fits(recognizer: Any, argument: Argument, value: str) -> bool:
    if argument.type not in recognizer.types and argument.type not in ("string", "integer", "float"):
        return True
    try:
        return recognizer.is_instance(argument.type, value, {argument.name: value})
    except ValueError:  # the type needs another argument's value: not decidable alone
        return True


def site_words(markup: str, limit: int = 2, exclude: Sequence[str] = ()) -> list[str]:
    """The ``limit`` most frequent content words of a page's text (its forms, scripts, styles
    and one-word links aside), lower-case, four letters or more, no stop word nor navigation
    word, seen twice at least; ties in the order the page shows them."""
    if limit <= 0:
        return []
    counts: Counter = Counter()
    first: dict[str, int] = {}
    skip = STOPWORDS | _COMMON | {e.lower() for e in exclude}
    for n, token in enumerate(_SITE_WORD.findall(prose(_without_menus(markup)))):
        word = token.lower()
        if word in skip:
            continue
        counts[word] += 1
        first.setdefault(word, n)
    ranked = sorted(counts, key=lambda w: (-counts[w], first[w]))
    return [w for w in ranked if counts[w] >= 2][:limit]


_ONE_WORD_LINK = re.compile(r"(<a\b[^>]*>)\s*[^\s<]+\s*(</a\s*>)", re.IGNORECASE)


def _without_menus(markup: str) -> str:
    """The page without its one-word links (``Wiki``, ``commitdiff``, ``Next``): a site's menus
    and a listing's actions, not what its pages are about."""
    return _ONE_WORD_LINK.sub(r"\1\2", markup)


def vary(plan: Sequence[Any], service: ServiceClass, given: Mapping[str, list[str]],
         words: Sequence[str] = ()) -> list[Any]:
    """Each planned probe (analyzer.Probe) with each typed-in argument's values in turn: the
    command line's, the template's own, the site's words that fit the argument's type, then
    the template's further values."""
    recognizer = service.recognizer()
    varied, seen = [], set()
    for probe in plan:
        example = service.examples[probe.example]
        for argument in example.arguments:
            field = probe.arguments.get(argument.name)
            if not argument.required or argument.iterator or field is None:
                continue
            if not isinstance(probe.assignment.get(field), str) or probe.assignment.get(field) != argument.value:
                continue  # placed as an option, or reshaped: the value stays
            choices = [(v, f"from -a {argument.name}") for v in given.get(argument.name, [])]
            choices.append((argument.value, ""))
            choices += [(w, "a word of the site") for w in words if _fits(recognizer, argument, w)]
            choices += [(v, NEXT_VALUE) for v in argument.also]
            break
        else:
            choices, field = [(None, "")], None
        for value, source in choices:
            changed = probe if value is None or value == probe.assignment.get(field) else replace(
                probe, assignment={**probe.assignment, field: value},
                why=f"{probe.why}; {field}={value!r} ({source})")
            if changed.key() not in seen:
                seen.add(changed.key())
                varied.append(changed)
    return varied


def answer_words(markup: str, page_markup: str, limit: int, exclude: Sequence[str] = ()) -> list[str]:
    """The ``limit`` most frequent content words of an answer (as :func:`site_words` reads a
    page) that its source's start page does not show: what the answer adds, not the site's
    menus repeated."""
    if limit <= 0 or not markup:
        return []
    shown = {w.lower() for w in _SITE_WORD.findall(prose(page_markup))}
    return site_words(markup, limit, [*exclude, *shown])


def with_value(probe: Any, service: ServiceClass, names: set[str], word: str, source: str) -> Any | None:
    """``probe`` with ``word`` in the field of its first typed-in argument among ``names``
    whose type takes it (its ``why`` saying where the word came from); None when none does."""
    recognizer = service.recognizer()
    example = service.examples[probe.example]
    for argument in example.arguments:
        field = probe.arguments.get(argument.name)
        if (argument.name not in names or not argument.required or argument.iterator or field is None
                or not isinstance(probe.assignment.get(field), str) or not _fits(recognizer, argument, word)):
            continue
        why = probe.why.split(f"; {field}=")[0]  # the plan's reason, without the value it was sent with
        return replace(probe, assignment={**probe.assignment, field: word}, why=f"{why}; {field}={word!r} ({source})")
    return None
