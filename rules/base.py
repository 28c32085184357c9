"""The Rule base class and the document rules see (seed 001, Scout).

A rule is a small class that overrides one method, :meth:`Rule.process_doc`, called once for
every document of the crawl. It returns or yields results (anything JSON can hold; a
dataclass is stored as its fields); they are recorded in the results table under the rule's
name and the document, an empty list when it produced nothing (so "nothing found" differs
from "not yet seen"). A rule reads any rule's earlier results through ``self.results``, adds
URLs to the crawl with ``self.enqueue(url)``, and may override :meth:`Rule.close`, which
runs once when the crawl (or the offline run) ends.

Parameters come from the template (``<param name="...">``) and are declared by the rule's
:meth:`Rule.configure` signature: each is converted to the annotated type (``str``,
``int``, ``float``, ``bool``); an unknown, missing or unconvertible parameter, or a
:class:`RuleConfigError` raised by ``configure``, refuses the template before any request.

No Scrapy here: rules run in a worker thread during the crawl and in-process offline.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, get_type_hints

from lxml import etree, html
from parsel import Selector
from w3lib.encoding import html_to_unicode


class RuleConfigError(ValueError):
    """A rule's parameters are wrong; the message says which and why."""


@dataclass(frozen=True)
class Tag:
    """One start tag of the document, in document order: name and attributes."""

    name: str
    attrs: Mapping[str, str]


_TEXT_XPATH = etree.XPath("//text()[not(ancestor::script or ancestor::style or ancestor::noscript "
                          "or ancestor::template)]")


@dataclass
class Doc:
    """A document as Scout buffered it: headers and body, the body separated into text and
    tags, plus a parsel selector. ``seq`` is the document's number in the results table,
    the same for every rule, every crawl and every offline run."""

    url: str
    seq: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)  # names lower-cased
    status: int = 200
    version: int | None = None

    @cached_property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @cached_property
    def unicode_body(self) -> str:
        """The body decoded as Scrapy decodes it (HTTP charset, BOM, meta, sniffing)."""
        try:
            return html_to_unicode(self.content_type or None, self.body)[1].replace("\x00", "")
        except (LookupError, ValueError):
            return self.body.decode("utf-8", errors="replace")

    @cached_property
    def _tree(self) -> Any:
        try:
            return html.document_fromstring(self.unicode_body) if self.unicode_body.strip() else None
        except (etree.ParserError, ValueError):
            return None

    @cached_property
    def text(self) -> str:
        """The text of the document (no tags, scripts or styles), whitespace as in the page."""
        if self._tree is None:
            return ""
        return " ".join(t for t in _TEXT_XPATH(self._tree) if t.strip())

    @cached_property
    def plain_text(self) -> bool:
        """Whether :attr:`text` is plain ASCII (where Python's re and RE2 agree)."""
        return is_plain(self.text)

    @cached_property
    def tags(self) -> list[Tag]:
        """Every start tag in document order (Scout's tag stream)."""
        if self._tree is None:
            return []
        return [Tag(el.tag, dict(el.attrib)) for el in self._tree.iter() if isinstance(el.tag, str)]

    @cached_property
    def selector(self) -> Selector:
        """A parsel selector over the document (CSS and XPath)."""
        if self._tree is None:
            return Selector(text="<html></html>", base_url=self.url)
        return Selector(root=self._tree, type="html", base_url=self.url)  # the same tree: one parse

    @cached_property
    def links(self) -> list[str]:
        """Absolute URLs of the document's ``<a href>`` and ``<area href>`` links, in order."""
        hrefs = self.selector.xpath("//a/@href | //area/@href").getall()
        base = self.selector.xpath("//base/@href").get() or self.url
        from urllib.parse import urljoin

        seen: dict[str, None] = {}
        for href in hrefs:
            href = href.strip()
            if href and not href.startswith("#"):
                seen.setdefault(urljoin(base, href).split("#", 1)[0], None)
        return list(seen)


# Characters on which Python's re and RE2 classify differently even in ASCII (\s and \v...).
_ODD = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def is_plain(text: str) -> bool:
    """ASCII without control characters other than tab, newline, carriage return, form feed."""
    return text.isascii() and not _ODD.search(text)


class ResultsView:
    """What a rule reads of the results table: every rule's results, by rule and URL."""

    def __init__(self, get: Callable[[str, str], list | None], for_rule: Callable[[str], Iterator]) -> None:
        self._get = get
        self._for_rule = for_rule

    def get(self, rule: str, url: str) -> list | None:
        """Results ``rule`` recorded for ``url`` (None: that rule has not seen it)."""
        return self._get(rule, url)

    def of(self, rule: str) -> Iterator[tuple[str, int, list]]:
        """(url, seq, results) of every document ``rule`` has recorded, in seq order."""
        return self._for_rule(rule)


class Rule:
    """Subclass and override :meth:`process_doc` (and, if needed, :meth:`configure` and
    :meth:`close`)."""

    def __init__(self, name: str, params: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.results: ResultsView = ResultsView(lambda rule, url: None, lambda rule: iter(()))
        self._enqueue: Callable[[str], None] = lambda url: None
        self.configure(**convert_params(self, dict(params or {})))

    def configure(self) -> None:
        """Take the template's parameters (declare them as keyword arguments)."""

    def process_doc(self, doc: Doc) -> Iterable[Any] | Any | None:
        """Look at one document; return or yield results."""
        return None

    def close(self) -> Iterable[Any] | Any | None:
        """Runs once when the crawl ends; may return results (recorded for the session)."""
        return None

    def enqueue(self, url: str) -> None:
        """Add ``url`` to the crawl (a link of the current document: the URDs' scope and
        depth still apply)."""
        self._enqueue(url)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def convert_params(rule: Rule, params: dict[str, str]) -> dict[str, Any]:
    """The template's string parameters converted to what ``configure`` declares."""
    signature = inspect.signature(rule.configure)
    try:
        hints = get_type_hints(rule.configure)
    except Exception:  # an annotation that cannot be resolved: take strings
        hints = {}
    accepted = {n: p for n, p in signature.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    unknown = sorted(set(params) - set(accepted)) if not takes_any else []
    if unknown:
        names = ", ".join(sorted(accepted)) or "none"
        raise RuleConfigError(f"unknown parameter {', '.join(map(repr, unknown))} (accepted: {names})")
    missing = [n for n, p in accepted.items() if p.default is inspect.Parameter.empty and n not in params]
    if missing:
        raise RuleConfigError(f"missing parameter {', '.join(map(repr, missing))}")
    converted: dict[str, Any] = {}
    for name, value in params.items():
        kind = hints.get(name, str)
        converted[name] = _convert(name, value, kind)
    return converted


def _convert(name: str, value: str, kind: Any) -> Any:
    if kind is bool:
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise RuleConfigError(f"parameter {name!r}: expected true or false, got {value!r}")
    if kind in (int, float):
        try:
            return kind(value.strip())
        except ValueError:
            raise RuleConfigError(f"parameter {name!r}: expected {kind.__name__}, got {value!r}") from None
    return value
