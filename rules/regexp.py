"""RegExpRule: the seed's regular-expression matcher (Scout's UniversityName, PhoneNumber,
Acronym rules are three instances of it)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from rules.base import Doc, Rule, RuleConfigError

_SPACE = re.compile(r"\s+")


class RegExpRule(Rule):
    """Every match of ``pattern`` in the document's text, in order.

    Parameters (from the template; ``${VAR}`` variables are expanded before):

    - ``pattern``: a Python regular expression (required);
    - ``squeezedoc``: collapse runs of whitespace in the text to one space before matching;
    - ``squeezematch``: collapse runs of whitespace inside each match;
    - ``trim``: strip whitespace around each match;
    - ``group``: which group of the match to record (default 0, the whole match);
    - ``ignorecase``: match case-insensitively;
    - ``source``: ``text`` (default: the text without tags), ``body`` (the decoded markup);
    - ``unique``: record each distinct match once;
    - ``maxresults``: at most this many results per document (default 1000).
    """

    def configure(self, pattern: str, squeezedoc: bool = False, squeezematch: bool = False, trim: bool = False,
                  group: int = 0, ignorecase: bool = False, source: str = "text", unique: bool = False,
                  maxresults: int = 1000) -> None:
        try:
            self.pattern = re.compile(pattern, re.IGNORECASE if ignorecase else 0)
        except re.error as exc:
            raise RuleConfigError(f"parameter 'pattern': not a valid regular expression: {exc}") from None
        if not 0 <= group <= self.pattern.groups:
            raise RuleConfigError(f"parameter 'group': the pattern has {self.pattern.groups} group(s), not {group}")
        if source not in ("text", "body"):
            raise RuleConfigError(f"parameter 'source': expected text or body, got {source!r}")
        if maxresults < 1:
            raise RuleConfigError("parameter 'maxresults': must be at least 1")
        self.squeezedoc, self.squeezematch, self.trim = squeezedoc, squeezematch, trim
        self.group, self.source, self.unique, self.maxresults = group, source, unique, maxresults

    def process_doc(self, doc: Doc) -> Iterator[str]:
        text = doc.text if self.source == "text" else doc.unicode_body
        if self.squeezedoc:
            text = _SPACE.sub(" ", text)
        seen: set[str] = set()
        count = 0
        for match in self.pattern.finditer(text):
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
