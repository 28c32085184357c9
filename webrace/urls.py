"""URL normalisation and the URL-level filters of the extractor pipe.

Pure functions and small classes over plain strings, in the manner of w3lib and Protego:
no Scrapy, no Twisted. The seed's URL-normalizer (WebRACE section 4.2, step 3) is w3lib's
``canonicalize_url`` plus the checks the seed's Table 2 asks for (http/https only, a legal
host, a port in range) and a length limit; Proactive Link Filtering (step 2) is
:class:`IgnoreTypes`; the BlockDomain table (step 4) is :class:`Blocklist`; the crawl's
accepted media types (``conf/mime.types``) are :class:`MediaTypes`.
"""

from __future__ import annotations

import ipaddress
import mimetypes
import posixpath
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit, urlunsplit

from w3lib.html import strip_html5_whitespace
from w3lib.url import canonicalize_url

if TYPE_CHECKING:
    import tldextract

SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
SCOPES = ("host", "domain", "any")
DEFAULT_MAX_URL_LENGTH = 2048

# Verdicts of MediaTypes.judge at a response's headers.
ACCEPT, REFUSE, SNIFF = "accept", "refuse", "sniff"
# Content-Types that say nothing about the body (WHATWG MIME Sniffing's unknown types, and
# the octet-stream servers such as `python -m http.server` send for a name they do not know).
UNDECLARED = frozenset({"", "application/octet-stream", "application/unknown", "unknown/unknown", "*/*"})
SNIFF_BYTES = 1445  # WHATWG's resource header: the first bytes a body is judged by
_BINARY_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
_BOMS = (b"\xfe\xff", b"\xff\xfe", b"\xef\xbb\xbf")

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_RE = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?$")
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


class BadURL(ValueError):
    """A URL the crawler will not fetch. ``reason`` is one of ``scheme``, ``malformed``,
    ``too_long`` (the counters of the crawl summary)."""

    def __init__(self, reason: str, url: str, detail: str = "") -> None:
        self.reason = reason
        self.url = url
        super().__init__(f"{reason}: {url[:200]!r}" + (f" ({detail})" if detail else ""))


def normalize(href: str, base: str | None = None, max_length: int = DEFAULT_MAX_URL_LENGTH) -> str:
    """Return the canonical absolute form of ``href`` (resolved against ``base``).

    Raises :class:`BadURL` for a non-http(s) scheme, a URL that cannot be parsed (bad host,
    bad port, unbalanced IPv6 brackets) or one longer than ``max_length`` characters.
    """
    raw = strip_html5_whitespace(href or "")
    if not raw:
        raise BadURL("malformed", raw, "empty")
    if len(raw) > 4 * max_length:  # do not spend time parsing a hostile megabyte-long href
        raise BadURL("too_long", raw)
    scheme_match = _SCHEME_RE.match(raw)
    if scheme_match and scheme_match.group(1).lower() not in SCHEMES:
        raise BadURL("scheme", raw)
    try:
        absolute = urljoin(base, raw) if base else raw
        parts = urlsplit(absolute)
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES:
            raise BadURL("scheme" if scheme else "malformed", absolute)
        port = parts.port  # raises ValueError when out of range or not a number
        url = canonicalize_url(absolute, keep_fragments=False)
    except BadURL:
        raise
    except (ValueError, UnicodeError) as exc:
        raise BadURL("malformed", raw, str(exc)) from None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not _valid_host(host):
        raise BadURL("malformed", raw, f"bad host {host!r}")
    netloc = parts.netloc
    if port is not None and port == DEFAULT_PORTS[scheme]:
        netloc = netloc.rsplit(":", 1)[0]
    query = parts.query
    raw_query = urlsplit(absolute).query
    if ";" in raw_query and "&" not in raw_query and "%3b" not in raw_query.lower():
        # a query written with ";" separators (gitweb's ?p=x;a=summary): canonicalize_url would
        # send it as one parameter, "%3B" and all, which such servers do not read
        query = urlsplit(canonicalize_url(f"http://x/?{raw_query.replace(';', '&')}")).query.replace("&", ";")
    url = urlunsplit((parts.scheme, netloc, parts.path or "/", query, ""))
    if len(url) > max_length:
        raise BadURL("too_long", url)
    return url


def _valid_host(host: str) -> bool:
    if not host:
        return False
    if ":" in host:  # IPv6 literal (urlsplit strips the brackets)
        try:
            ipaddress.IPv6Address(host.split("%")[0])
        except ValueError:
            return False
        return True
    return bool(_HOST_RE.match(host))


def hostname(url: str) -> str:
    return (urlsplit(url).hostname or "").lower().rstrip(".")


@lru_cache(maxsize=1)
def _extractor() -> tldextract.TLDExtract:
    # The public suffix list snapshot shipped with tldextract: no network access, ever.
    import tldextract  # here: slow to import, and most commands never ask for a registered domain

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def public_suffix(domain: str) -> bool:
    """Whether ``domain`` is a public suffix, private ones included (``co.uk``, ``github.io``):
    a name under which anyone may register, so a cookie set for it would reach other sites."""
    return not _extractor()(domain.lower().rstrip("."), include_psl_private_domains=True).domain


@lru_cache(maxsize=65536)
def registered_domain(host: str) -> str:
    """The registrable domain of ``host`` (``www.cs.ucy.ac.cy`` -> ``ucy.ac.cy``).

    IP addresses are their own domain; names outside the public suffix list (``localhost``,
    ``*.test``) fall back to their last two labels.
    """
    host = host.lower().rstrip(".")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    domain = _extractor()(host).top_domain_under_public_suffix
    if domain:
        return domain
    return ".".join(host.split(".")[-2:])


def in_scope(url: str, anchor_url: str, scope: str) -> bool:
    """Whether ``url`` lies within ``scope`` (``host``, ``domain`` or ``any``) of the URD
    whose start page is ``anchor_url``. Ports do not matter, as in Scrapy's offsite filter."""
    if scope == "any":
        return True
    host, anchor = hostname(url), hostname(anchor_url)
    if scope == "host":
        return host == anchor
    if scope == "domain":
        return registered_domain(host) == registered_domain(anchor)
    raise ValueError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")


def scope_anchor(anchor_url: str, scope: str) -> tuple[str, str]:
    """What a URL must share with ``anchor_url`` to lie within ``scope`` of it: ``("host",
    its host)``, ``("domain", its registrable domain)`` or ``("any", "")``. URDs with the
    same anchor take the same decision on every link, so it is made once for them all
    (``in_scope(url, a, s)`` is the host, or its domain, of ``url`` equal to the anchor's)."""
    if scope == "any":
        return ("any", "")
    host = hostname(anchor_url)
    if scope == "host":
        return ("host", host)
    if scope == "domain":
        return ("domain", registered_domain(host))
    raise ValueError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")


def read_list(source: str | Path | Iterable[str] | None) -> list[str]:
    """Entries of a one-per-line configuration list (``#`` starts a comment).

    ``source`` is a file path, or already a sequence of entries (settings may hold either).
    """
    if source is None or source == "":
        return []
    if isinstance(source, (str, Path)):
        text = Path(source).read_text(encoding="utf-8")
        lines: Iterable[str] = text.splitlines()
    else:
        lines = source
    entries = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            entries.append(line)
    return entries


class IgnoreTypes:
    """File extensions never fetched (the seed's ``/conf/ignore.types``), judged from the
    URL alone, before normalisation and before any request is made."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.extensions = {
            token.lower().lstrip("*").lstrip(".") for entry in entries for token in entry.split()
        }
        self.extensions.discard("")

    def ignored(self, url: str) -> bool:
        try:
            path = urlsplit(url).path
        except ValueError:
            return False
        ext = posixpath.splitext(path.rstrip("/"))[1]
        return ext[1:].lower() in self.extensions if ext else False


class MediaTypes:
    """Accepted Internet media types (the seed's ``/conf/mime.types``).

    An entry is ``type/subtype``, ``type/*`` or ``*/*``; further tokens on the line (file
    extensions, as in Apache's mime.types) are ignored. :meth:`judge` decides at a
    response's headers; a type that says nothing (no Content-Type, or
    ``application/octet-stream``) is judged as browsers do, by the URL's name and then by
    the body's first bytes (:func:`looks_binary`).
    """

    def __init__(self, entries: Iterable[str]) -> None:
        self.exact: set[str] = set()
        self.major: set[str] = set()
        self.any = False
        for entry in entries:
            mtype = entry.split()[0].lower()
            if mtype == "*/*" or mtype == "*":
                self.any = True
            elif mtype.endswith("/*"):
                self.major.add(mtype[:-2])
            else:
                self.exact.add(mtype)

    def accepts(self, content_type: str | bytes | None) -> bool:
        mtype = media_type(content_type)
        if not mtype or self.any:
            return True
        return mtype in self.exact or mtype.split("/", 1)[0] in self.major

    def judge(self, content_type: str | bytes | None, url: str) -> str:
        """:data:`ACCEPT`, :data:`REFUSE`, or :data:`SNIFF` (let the body through, keep it
        only if it is text). A declared type is accepted or refused as listed; an undeclared
        one (:data:`UNDECLARED`, unless listed) is refused when the URL's extension names a
        type not accepted (``.pdf``, ``.gz``), else sniffed (``.html``, or no known name)."""
        mtype = media_type(content_type)
        if self.any or (mtype and self.accepts(mtype)):
            return ACCEPT
        if mtype not in UNDECLARED:
            return REFUSE
        named = type_of_name(url)
        return SNIFF if named is None or self.accepts(named) else REFUSE


@lru_cache(maxsize=1)
def _names() -> mimetypes.MimeTypes:
    # Python's own table, not the system's mime.types: the same verdict on every machine.
    names = mimetypes.MimeTypes()
    for mtype, extension in (("application/xhtml+xml", ".xhtml"), ("application/rss+xml", ".rss"),
                             ("application/atom+xml", ".atom")):
        names.add_type(mtype, extension)
    return names


def type_of_name(url: str) -> str | None:
    """The media type a URL's file name says (``/a/b.html`` -> ``text/html``), ``None`` when
    it says none (``/api/element-list``); a compressed name (``.gz``) is
    ``application/octet-stream``, whatever it holds."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return None
    mtype, encoding = _names().guess_type(path.rstrip("/") or "/", strict=False)
    return "application/octet-stream" if encoding else mtype


def looks_binary(head: bytes) -> bool:
    """WHATWG MIME Sniffing's rule telling text from binary, over a body's first
    :data:`SNIFF_BYTES`: a byte-order mark says text; otherwise a control byte other than
    tab, line feed, form feed, carriage return and escape says binary."""
    head = head[:SNIFF_BYTES]
    if head.startswith(_BOMS):
        return False
    return len(head.translate(None, _BINARY_BYTES)) != len(head)


def media_type(content_type: str | bytes | None) -> str:
    """``text/html; charset=utf-8`` -> ``text/html``."""
    if not content_type:
        return ""
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    return content_type.split(";", 1)[0].strip().lower()


class Blocklist:
    """Domains, hosts and URL prefixes never fetched (the seed's BlockDomain table).

    A bare name (``example.com``, ``.example.com`` or ``*.example.com``) blocks that host and
    every host below it; an entry with a scheme (``http://example.com/private/``) blocks URLs
    starting with that prefix (compared in canonical form).
    """

    def __init__(self, entries: Iterable[str]) -> None:
        self.domains: set[str] = set()
        self.prefixes: list[str] = []
        for entry in entries:
            if "://" in entry:
                try:
                    prefix = normalize(entry)
                except BadURL:
                    prefix = entry.lower()
                if not entry.endswith("/") and prefix.endswith("/") and urlsplit(entry).path:
                    prefix = prefix[:-1]
                self.prefixes.append(prefix)
            else:
                self.domains.add(entry.lower().lstrip("*").lstrip(".").rstrip("."))
        self.domains.discard("")

    def __bool__(self) -> bool:
        return bool(self.domains or self.prefixes)

    def blocks(self, url: str) -> bool:
        if self.domains:
            host = hostname(url)
            labels = host.split(".")
            for i in range(len(labels)):
                if ".".join(labels[i:]) in self.domains:
                    return True
        return any(url.startswith(prefix) for prefix in self.prefixes)
