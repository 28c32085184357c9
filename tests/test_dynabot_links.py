"""What DynaBot's link frontiers follow (webrace.dynabot.links): a source once whatever its sort
order, page or format, a site's search box once whatever page it is on, pages only, the seeds'
sites only; and a linkhint crawl of a site with JSON pages and links to other hosts, which never
leaves the site nor ends in a traceback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import Site, _Handler
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor

from webrace.dynabot.links import NOT_PAGES, Sites, form_key, html_media, source_key
from webrace.spiders.dynabot import check_arguments

ROOT = Path(__file__).resolve().parent.parent
TABLE = "http://127.0.0.1:8001/packages/packages"


@pytest.mark.parametrize("variant", [
    TABLE, TABLE + "?_sort=version", TABLE + "?_sort_desc=name", TABLE + "?_sort=name&_next=101",
    TABLE + ".json", TABLE + ".csv", TABLE + ".json?_shape=array", TABLE + "?_size=50&_facet=section",
    TABLE + "#fragment", TABLE + "?utm_source=mail&utm_campaign=x&fbclid=1",
])
def test_sort_order_paging_format_and_tracking_variants_are_one_source(variant):
    assert source_key(variant) == source_key(TABLE)


@pytest.mark.parametrize("variants", [
    ["http://x.org/query?status=new&order=priority&desc=1", "http://x.org/query?status=new&page=2&order=id"],
    ["http://x.org/issue?@columns=title&@sort=-activity&status=1", "http://x.org/issue?status=1&@pagesize=50"],
    ["http://x.org/docs/", "http://x.org/docs/index.html", "http://x.org/docs/index.html?sort=a"],
    ["http://x.org/s?b=2&a=1", "http://x.org/s?a=1&b=2&dir=asc&per_page=20&start=40&format=html"],
])
def test_equal_views_share_a_key(variants):
    assert len({source_key(url) for url in variants}) == 1


@pytest.mark.parametrize("one, other", [
    (TABLE, TABLE + "?_search=library"),                 # a query is another answer, not another view
    (TABLE, "http://127.0.0.1:8001/packages/other"),     # another table
    (TABLE, "http://127.0.0.1:8002/packages/packages"),  # another server
    ("http://x.org/issue?status=1", "http://x.org/issue?status=2"),
    ("http://x.org/search.py", "http://x.org/search.sh"),
    ("http://x.org/news?group=comp.lang.python", "http://x.org/news?group=comp.os.linux"),  # unmarked: a choice
    ("http://x.org/shoes?size=42", "http://x.org/shoes?size=43"),
])
def test_different_sources_keep_different_keys(one, other):
    assert source_key(one) != source_key(other)


def test_a_form_repeated_on_every_page_has_one_key():
    here = form_key("get", "http://x.org/search.html", ["q", "check_keywords", "area"])
    assert form_key("GET", "http://x.org/search.html?q=", ["area", "q", "check_keywords"]) == here
    assert form_key("GET", "http://x.org/search.html", ["q"]) != here
    assert form_key("POST", "http://x.org/search.html", ["q", "check_keywords", "area"]) != here
    assert form_key("GET", "http://x.org/other.html", ["q", "check_keywords", "area"]) != here


def test_not_pages_are_known_by_extension_and_search_scripts_are_pages():
    for extension in ("json", "csv", "png", "pdf", "zip", "xml", "woff2", "js", "css"):
        assert extension in NOT_PAGES
    for extension in ("py", "sh", "rb", "exe", "cgi", "php", "html", "pl"):
        assert extension not in NOT_PAGES
    markup = b"".join(b'<a href="/%s">x</a>' % name.encode() for name in
                      ("t.json", "t.csv", "logo.png", "search.py", "find.cgi", "t", "t.html"))
    response = HtmlResponse("http://127.0.0.1:1/", body=markup, encoding="utf-8")
    kept = [link.url.rsplit("/", 1)[1] for link in LinkExtractor(deny_extensions=NOT_PAGES).extract_links(response)]
    assert kept == ["search.py", "find.cgi", "t", "t.html"]


@pytest.mark.parametrize("content_type, page", [
    ("text/html; charset=utf-8", True), (b"application/xhtml+xml", True), (None, True), ("", True),
    ("application/json", False), ("text/csv", False), ("image/png", False), ("text/plain", False),
])
def test_html_media(content_type, page):
    assert html_media(content_type) is page


def test_sites_are_the_seeds_registrable_domains_unless_others_are_allowed():
    sites = Sites(["http://www.bbc.co.uk/search", "http://127.0.0.1:8001/"])
    assert sites.allows("http://news.bbc.co.uk/x") and sites.allows("http://127.0.0.1:9999/")
    assert not sites.allows("http://127.0.0.2:8001/") and not sites.allows("http://bbc.com/")
    assert not sites.allows("http://co.uk/")
    wider = Sites(["http://127.0.0.1/"], "example.org, www.other.net")
    assert wider.allows("http://a.example.org/") and wider.allows("http://other.net/")
    assert Sites(["http://127.0.0.1/"], "any").allows("http://anything.test/")
    assert Sites.problems("example.org,any") == []
    (problem,) = Sites.problems("example.org,http://x.org/")
    assert "'http://x.org/' is not a host name" in problem


def test_a_bad_sites_option_is_refused_before_any_request(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:1/\n")
    scd = str(ROOT / "serviceclasses" / "keyword_search.xml")
    with pytest.raises(ValueError, match=r"-a sites=x\.org:80: 'x\.org:80' is not a host name"):
        check_arguments(scd, str(seeds), "linkhint", None, "x.org:80")
    assert check_arguments(scd, str(seeds), "linkhint", None, "x.org")[1] == ["http://127.0.0.1:1/"]


# -- a linkhint crawl ------------------------------------------------------------------------------

FORM = '<form action="/search"><input type="text" name="q"><input type="submit" value="Search"></form>'
KNOWN = {"crawler": ["Web crawler basics", "Crawler politeness", "A focused crawler"]}


def table_page(path: str) -> str:
    sorts = "".join(f'<a href="/table?_sort={c}">{c}</a> <a href="/table?_sort_desc={c}">{c} desc</a> '
                    for c in ("name", "size"))
    return (f"<html><body><h1>table {path}</h1>{FORM}<p>{sorts}<a href='/table?_sort=name&_next=20'>next</a> "
            "<a href='/table.json'>JSON</a> <a href='/table.csv'>CSV</a> <a href='/table?utm_source=feed'>feed</a>"
            "</p><ul><li><a href='/row/1'>row 1</a></li></ul></body></html>")


def answers(host: str, path: str):
    """The site's pages with a query string: the table's views, the search's answers."""
    if path.startswith("/table?"):
        return 200, {"Content-Type": "text/html"}, table_page(path).encode()
    if path.startswith("/search?q="):
        word = path.split("=", 1)[1].split("&")[0]
        found = KNOWN.get(word, [])
        items = "".join(f'<li><a href="/doc/{n}">{title}</a> about the {word}</li>' for n, title in enumerate(found))
        return 200, {"Content-Type": "text/html"}, (f"<html><body>{FORM}<p>{len(found)} results</p>"
                                                    f"<ul>{items}</ul></body></html>").encode()
    return None


@contextmanager
def served(site: Site, host: str) -> Iterator[Site]:
    server = ThreadingHTTPServer((host, 0), type("Handler", (_Handler,), {"site": site}))
    server.daemon_threads = True
    site.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield site
    finally:
        site.stopping.set()
        server.shutdown()
        server.server_close()


def test_linkhint_on_a_site_with_json_pages_and_offsite_links_stays_on_it_without_a_traceback(project, tmp_path):
    with served(Site(), "127.0.0.1") as site, served(Site(), "127.0.0.2") as elsewhere:
        elsewhere.html("/elsewhere", text="another host")
        elsewhere.html("/redirected", text="another host")
        cookie = {"Set-Cookie": "sid=1; Path=/"}  # the crawl's first cookie: no public suffix list is fetched
        links = ["/table", "/table?_sort=name", "/moved", "/api", "/table.json", "/logo.png", "/away",
                 elsewhere.url("/elsewhere", host="127.0.0.2"), "http://offsite.invalid/page",
                 f"http://localhost:{site.port}/table"]
        site.add("/", "<html><body>" + "".join(f'<a href="{u}">{u}</a> ' for u in links) + "</body></html>",
                 headers=cookie)
        site.add("/table", table_page("/table"), headers=cookie, content_type=None)  # no type: a page all the same
        site.add("/api", json.dumps({"rows": [{"url": "/row/2"}], "next": "/api?_next=2"}),
                 content_type="application/json")
        site.add("/table.json", "{}", content_type="application/json")
        site.add("/logo.png", b"\x89PNG\r\n", content_type="image/png")
        site.add("/moved", b"", status=301, headers={"Location": "/table?_sort=size"})  # lands on a known source
        site.add("/away", b"", status=302, headers={"Location": elsewhere.url("/redirected", host="127.0.0.2")})
        site.add("/row/1", f"<html><body><p>a row</p>{FORM}</body></html>")  # the site's search box again
        site.fallback = answers
        (project.root / "seeds.txt").write_text(site.url("/") + "\n")
        # Any request for another host would reach the other server (NO_PROXY) or fail at a dead
        # proxy, never the network; tldextract (requests) would fail at the dead proxy too.
        project.env.update({"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
                            "NO_PROXY": "127.0.0.1,127.0.0.2", "TLDEXTRACT_CACHE": str(tmp_path / "tldextract")})
        out = project.root / "out.jsonl"
        done = project.scrapy("crawl", "dynabot", "-a", f"scd={ROOT / 'serviceclasses' / 'keyword_search.xml'}",
                              "-a", "seeds=seeds.txt", "-a", "frontier=linkhint", "-a", "hints=table",
                              "-O", str(out), "-s", "DOWNLOAD_DELAY=0", "-s", "WEBRACE_DELAY_FACTOR=0",
                              "-s", "TELNETCONSOLE_ENABLED=False", "-s", "WEBRACE_DYNABOT_BROWSER=False",
                              "-s", "LOG_LEVEL=DEBUG")
        items = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        paths = site.paths()
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr and "spider_exceptions" not in done.stderr, done.stderr[-5000:]
        assert elsewhere.paths() == []  # nothing sent to the other host, not even after a redirect
        assert "offsite.invalid" not in done.stderr and "localhost" not in done.stderr
        assert "publicsuffix" not in done.stderr
        # one source for the table's views (one link, one redirect to another view); no JSON, CSV or
        # image fetched by its name
        assert len([p for p in paths if p.startswith("/table") and not p.startswith("/table.")]) == 2
        assert "/moved" in paths
        assert not {"/table.json", "/table.csv", "/logo.png"} & set(paths)
        assert "/api" in paths and "/row/2" not in paths  # a JSON page is read as no page: its "links" are data
        # the one source analysed: the search box of the table's views and of the row page is one form
        assert "/row/1" in paths
        assert [i["source"].split("?")[0] for i in items if i["kind"] == "trace"] == [site.url("/table")]
        profiles = [i for i in items if i["kind"] == "profile"]
        assert [p["source"].split("?")[0] for p in profiles] == [site.url("/table")]
        assert all(not p.startswith("/search") or "q=" in p for p in paths)
