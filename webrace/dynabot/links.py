"""What DynaBot's link frontiers (``randomwalk``, ``linkhint``; seed 004, section 2.5) follow, as
pure functions over URLs and media types (Scrapy only lends its list of file extensions).

- :func:`source_key`: a page as a person sees it. URLs that differ only by sort order, paging,
  output format, display options or tracking parameters (``?_sort=name``, ``?page=2``,
  ``.json``, ``?utm_source=x``) show the same source, with the same forms: it is analysed
  once, not once per variant;
- :func:`form_key`: a form as a person sees it: the search box a site repeats on every page
  (Sphinx's, pydoc's, Trac's) is one form, probed from the first page it is met on;
- :data:`NOT_PAGES`: extensions of files that are not pages (data, images, archives...),
  left unfetched; :func:`html_media`: whether a Content-Type is a page's;
- :class:`Sites`: the sites a link frontier stays on, the seeds' registrable domains unless
  the user allows others.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from scrapy.linkextractors import IGNORED_EXTENSIONS
from w3lib.url import canonicalize_url

from webrace.urls import BadURL, hostname, normalize, registered_domain

# Query parameters that change how a page shows the same thing, never what it is, matched on
# their name lowercased without the marks applications put before their own (Datasette's
# "_sort", Roundup's "@sort").
SORT = frozenset({"sort", "sort_desc", "sortdesc", "sort_by", "sortby", "sort_order", "sortorder", "sort_dir",
                  "sortdir", "order", "orderby", "order_by", "ordering", "dir", "direction", "asc", "desc"})
PAGING = frozenset({"page", "pg", "pageno", "page_num", "pagenum", "offset", "start", "startwith", "limit",
                    "pagesize", "page_size", "per_page", "perpage"})
FORMAT = frozenset({"format", "fmt"})
DISPLAY = frozenset({"col"})  # a column a table shows (Trac's query)
# Names too common to mean "how it is shown" unless an application marks them as its own
# (Datasette's "_size", "_next", "_facet"; Roundup's "@columns", "@group").
MARKED = frozenset({"size", "next", "shape", "facet", "facet_size", "nocol", "columns", "labels", "nolabels",
                    "nofacet", "nocount", "nosuggest", "group"})
TRACKING = frozenset({"fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "mc_cid", "mc_eid", "yclid",
                      "igshid", "ga", "gl"})
_MARKS = "_@-$."
# a path ending in a data format's extension is the same page in that format (Datasette's
# /db/table.json and /db/table.csv); an index document is its directory
FORMAT_EXTENSIONS = re.compile(r"\.(?:json|jsonl|ndjson|csv|tsv|xml|rss|atom)$", re.I)
INDEX_DOCUMENT = re.compile(r"(?<=/)index\.(?:html?|php|cgi)$", re.I)

# Files that are not pages: Scrapy's list (images, media, office documents, archives), less
# the script extensions a search page's URL may end with (search.py, query.sh, find.exe),
# plus data and feed formats, fonts and source maps.
SCRIPTS = frozenset({"py", "sh", "rb", "exe"})
NOT_PAGES = sorted((set(IGNORED_EXTENSIONS) - SCRIPTS) | {
    "json", "jsonl", "ndjson", "geojson", "csv", "tsv", "xml", "atom", "txt", "db", "sqlite", "gz", "tgz",
    "woff", "woff2", "ttf", "otf", "eot", "map", "wasm", "mjs", "inv"})
HTML_MEDIA = frozenset({"text/html", "application/xhtml+xml"})


def _transient(name: str) -> bool:
    name = name.strip().lower()
    bare = name.lstrip(_MARKS)
    return bare in SORT or bare in PAGING or bare in FORMAT or bare in DISPLAY or bare in TRACKING \
        or bare.startswith("utm_") or (bare in MARKED and bare != name)


def source_key(url: str) -> str:
    """The source ``url`` shows: its canonical form (w3lib's ``canonicalize_url``: query sorted,
    fragment dropped) without sort, paging, format, display and tracking parameters, without a
    data format's extension, an index document as its directory."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _transient(k)]
    path = INDEX_DOCUMENT.sub("", FORMAT_EXTENSIONS.sub("", parts.path))
    return canonicalize_url(urlunsplit((parts.scheme, parts.netloc, path, urlencode(query), "")))


def form_key(method: str, action: str, names: Iterable[str]) -> tuple[str, str, tuple[str, ...]]:
    """What makes forms of different pages the same: method, action (as :func:`source_key`
    sees it; a GET form's query is replaced by its fields) and the names of their fields (not
    their values: a token differs on every page)."""
    method = method.upper()
    if method == "GET":
        action = action.split("#", 1)[0].split("?", 1)[0]
    return method, source_key(action), tuple(sorted(set(names)))


def html_media(content_type: str | bytes | None) -> bool:
    """Whether a ``Content-Type`` is a page's (HTML or XHTML); a missing one may be."""
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    media = (content_type or "").split(";")[0].strip().lower()
    return not media or media in HTML_MEDIA


class Sites:
    """The sites a link frontier may follow links to: the registrable domains of the seeds
    (``www.x.org`` and ``blast.x.org`` are one site; an IP address is its own), those named in
    ``also``, or any site when ``also`` is ``any``."""

    def __init__(self, seeds: Iterable[str], also: str = "") -> None:
        words = [w.strip().lower().rstrip(".") for w in also.split(",") if w.strip()]
        self.any = "any" in words
        self.domains = sorted({registered_domain(hostname(url)) for url in seeds if hostname(url)}
                              | {registered_domain(w) for w in words if w != "any"})

    @staticmethod
    def problems(also: str) -> list[str]:
        """What is wrong with a ``-a sites=`` value (one line each)."""
        found = []
        for word in (w.strip() for w in also.split(",")):
            if not word or word.lower() == "any":
                continue
            try:
                host = hostname(normalize(f"http://{word}/"))
            except BadURL:
                host = ""
            if host != word.lower().rstrip("."):
                found.append(f"-a sites={also}: {word!r} is not a host name (expected host names or domains, "
                             "comma-separated, or 'any')")
        return found

    def allows(self, url: str) -> bool:
        return self.any or registered_domain(hostname(url)) in self.domains
