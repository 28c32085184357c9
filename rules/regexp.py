"""RegExpRule: the seed's regular-expression matcher (Scout's UniversityName, PhoneNumber,
Acronym rules are three instances of it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from rules.base import Doc, Rule, RuleConfigError, is_plain

try:  # RE2: linear time (no catastrophic backtracking), and much faster on long texts
    import re2
except ImportError:  # pragma: no cover - a dependency; the rule still works without it
    re2 = None

_SPACE = re.compile(r"\s+")


class RegExpRule(Rule):
    """Every match of ``pattern`` in the document's text, in order.

    Parameters (from the template; ``${VAR}`` variables are expanded before):

    - ``pattern``: a Python regular expression (required);
    - ``squeezedoc``: collapse runs of whitespace in the text to one space before matching
      (and strip its ends);
    - ``squeezematch``: collapse runs of whitespace inside each match;
    - ``trim``: strip whitespace around each match;
    - ``group``: which group of the match to record (default 0, the whole match);
    - ``ignorecase``: match case-insensitively;
    - ``source``: ``text`` (default: the text without tags), ``body`` (the decoded markup);
    - ``unique``: record each distinct match once;
    - ``maxresults``: at most this many results per document (default 1000);
    - ``engine``: ``auto`` (default) or ``re``. Patterns are Python regular expressions and
      match as Python's ``re`` does. With ``auto``, a pattern RE2 also accepts runs on RE2
      for documents whose text is plain ASCII, where the two agree: linear time, so a page
      cannot make a pattern backtrack for minutes, and tens of times faster on long pages.
      ``re`` always uses Python's engine.
    """

    def configure(self, pattern: str, squeezedoc: bool = False, squeezematch: bool = False, trim: bool = False,
                  group: int = 0, ignorecase: bool = False, source: str = "text", unique: bool = False,
                  maxresults: int = 1000, engine: str = "auto") -> None:
        try:
            self.pattern = re.compile(pattern, re.IGNORECASE if ignorecase else 0)
        except re.error as exc:
            raise RuleConfigError(f"parameter 'pattern': not a valid regular expression: {exc}") from None
        if engine not in ("auto", "re"):
            raise RuleConfigError(f"parameter 'engine': expected auto or re, got {engine!r}")
        self.fast = compile_re2(pattern, ignorecase, self.pattern.groups) if engine == "auto" else None
        if not 0 <= group <= self.pattern.groups:
            raise RuleConfigError(f"parameter 'group': the pattern has {self.pattern.groups} group(s), not {group}")
        if source not in ("text", "body"):
            raise RuleConfigError(f"parameter 'source': expected text or body, got {source!r}")
        if maxresults < 1:
            raise RuleConfigError("parameter 'maxresults': must be at least 1")
        self.squeezedoc, self.squeezematch, self.trim = squeezedoc, squeezematch, trim
        self.group, self.source, self.unique, self.maxresults = group, source, unique, maxresults

    def process_doc(self, doc: Doc) -> Iterator[str]:
        if self.source == "text":
            text, plain = doc.text, self.fast is not None and doc.plain_text
        else:
            text, plain = doc.unicode_body, self.fast is not None and is_plain(doc.unicode_body)
        if self.squeezedoc:
            text = " ".join(text.split())  # whitespace runs become one space (the ends are stripped)
        seen: set[str] = set()
        count = 0
        engine = self.fast if plain else self.pattern
        for match in engine.finditer(text):
            value = match.group(self.group) or ""
            if self.squeezematch:
                value = _SPACE.sub(" ", value)
            if self.trim:
                value = value.strip()
            if not value or (self.unique and value in seen):
                continue
            seen.add(value)
            yield value
            count += 1
            if count >= self.maxresults:
                return


def compile_re2(pattern: str, ignorecase: bool, groups: int) -> Any:
    """The pattern compiled by RE2, or None when RE2 refuses it (backreferences,
    lookarounds...) or when its syntax may mean something else there (POSIX classes, ``{,n}``)."""
    if re2 is None or "[:" in pattern or "{," in pattern:
        return None
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignorecase
    try:
        compiled = re2.compile(pattern, options=options)
    except Exception:  # re2.error: RE2 cannot run it; Python's re will
        return None
    return compiled if compiled.groups == groups else None
