"""Table tests of the URL functions (w3lib/Protego style)."""

from __future__ import annotations

import pytest

from webrace.urls import (
    ACCEPT,
    REFUSE,
    SNIFF,
    BadURL,
    Blocklist,
    IgnoreTypes,
    MediaTypes,
    in_scope,
    looks_binary,
    normalize,
    registered_domain,
    type_of_name,
)

BASE = "http://www.site.test/dir/page.html"


@pytest.mark.parametrize(("href", "expected"), [
    ("other.html", "http://www.site.test/dir/other.html"),
    ("../up.html", "http://www.site.test/up.html"),
    ("//cdn.test/x", "http://cdn.test/x"),
    ("HTTP://WWW.Site.TEST:80/a?b=2&a=1#frag", "http://www.site.test/a?a=1&b=2"),
    ("https://site.test:443", "https://site.test/"),
    ("http://site.test:8080/%7Euser/", "http://site.test:8080/~user/"),
    ("  /spaced.html \n", "http://www.site.test/spaced.html"),
    ("http://[::1]:8000/x", "http://[::1]:8000/x"),
    # ";" separators (gitweb) stay separators; an escaped one stays data
    ("/cgi-bin/gitweb.cgi?p=webrace.git;a=summary", "http://www.site.test/cgi-bin/gitweb.cgi?a=summary;p=webrace.git"),
    ("/find?q=a%3Bb", "http://www.site.test/find?q=a%3Bb"),
])
def test_normalize_resolves_and_canonicalises(href, expected):
    assert normalize(href, BASE) == expected


@pytest.mark.parametrize(("href", "reason"), [
    ("mailto:a@b.test", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("ftp://files.test/", "scheme"),
    ("data:text/html,hi", "scheme"),
    ("http://[::1/x", "malformed"),
    ("http://site.test:99999/", "malformed"),
    ("http://bad host.test/", "malformed"),
    ("http://a..b/", "malformed"),
    ("", "malformed"),
    ("/" + "a" * 3000, "too_long"),
])
def test_normalize_refuses_with_a_reason(href, reason):
    with pytest.raises(BadURL) as info:
        normalize(href, BASE)
    assert info.value.reason == reason


@pytest.mark.parametrize(("url", "scope", "expected"), [
    ("http://www.site.test/x", "host", True),
    ("https://www.site.test:8443/x", "host", True),
    ("http://news.site.test/x", "host", False),
    ("http://news.site.test/x", "domain", True),
    ("http://site.test/x", "domain", True),
    ("http://other.test/x", "domain", False),
    ("http://other.test/x", "any", True),
])
def test_in_scope(url, scope, expected):
    assert in_scope(url, "http://www.site.test/", scope) is expected


@pytest.mark.parametrize(("host", "domain"), [
    ("www.cs.ucy.ac.cy", "ucy.ac.cy"),
    ("a.b.example.co.uk", "example.co.uk"),
    ("127.0.0.1", "127.0.0.1"),
    ("localhost", "localhost"),
    ("x.webrace.test", "webrace.test"),
])
def test_registered_domain_uses_the_public_suffix_list_offline(host, domain):
    assert registered_domain(host) == domain


def test_ignore_types_match_the_path_extension_case_insensitively():
    types = IgnoreTypes(["jpg .PDF", "*.zip"])
    assert types.ignored("http://a.test/x.JPG")
    assert types.ignored("http://a.test/doc.pdf?download=1")
    assert types.ignored("/rel/archive.zip")
    assert not types.ignored("http://a.test/page.html")
    assert not types.ignored("http://a.test/jpg")


def test_media_types_exact_wildcard_and_parameters():
    types = MediaTypes(["text/html html htm", "application/*"])
    assert types.accepts("text/html; charset=utf-8")
    assert types.accepts(b"application/pdf")
    assert types.accepts(None)  # no Content-Type: let Scrapy sniff it
    assert not types.accepts("image/png")
    assert MediaTypes(["*/*"]).accepts("image/png")


SHIPPED = MediaTypes(["text/html", "application/xhtml+xml", "text/plain", "text/xml", "application/xml"])


@pytest.mark.parametrize(("content_type", "url", "verdict"), [
    ("text/html; charset=utf-8", "http://a.test/x.pdf", ACCEPT),  # a declared type decides
    ("image/png", "http://a.test/page.html", REFUSE),
    ("application/octet-stream", "http://a.test/api/element-list", SNIFF),  # no name: the body decides
    ("application/octet-stream", "http://a.test/notes.txt", SNIFF),  # an accepted name: the body confirms
    ("application/octet-stream", "http://a.test/page.xhtml?x=1", SNIFF),
    ("application/octet-stream", "http://a.test/dir/", SNIFF),
    (None, "http://a.test/api/element-list", SNIFF),
    (b"", "http://a.test/", SNIFF),
    ("application/unknown", "http://a.test/a", SNIFF),
    ("application/octet-stream", "http://a.test/report.pdf", REFUSE),  # the name says what it is
    (None, "http://a.test/picture.PNG", REFUSE),
    ("application/octet-stream", "http://a.test/notes.txt.gz", REFUSE),  # compressed, whatever it holds
])
def test_media_types_judge_an_undeclared_type_by_the_name_then_the_body(content_type, url, verdict):
    assert SHIPPED.judge(content_type, url) == verdict


def test_media_types_listing_octet_stream_accepts_it_outright():
    assert MediaTypes(["application/octet-stream"]).judge("application/octet-stream", "http://a.test/x.pdf") == ACCEPT
    assert MediaTypes(["*/*"]).judge(None, "http://a.test/x.pdf") == ACCEPT


@pytest.mark.parametrize(("url", "mtype"), [
    ("http://a.test/a/b.html", "text/html"),
    ("http://a.test/feed.atom", "application/atom+xml"),
    ("http://a.test/api/element-list", None),
    ("http://a.test/", None),
    ("http://a.test/archive.tar.gz", "application/octet-stream"),
])
def test_type_of_name(url, mtype):
    assert type_of_name(url) == mtype


@pytest.mark.parametrize(("head", "binary"), [
    (b"shapes\nutil\n", False),
    (b"", False),
    (b"tab\tform feed\x0c escape\x1b[0m\r\n", False),
    ("caf\u00e9 na\u00efve".encode(), False),
    (b"\xff\xfeh\x00i\x00", False),  # UTF-16 with its byte-order mark
    (b"\x00" * 300, True),
    (b"%PDF-1.4\n\x01\x02", True),
    (b"\x89PNG\r\n\x1a\n", True),
    (b"a" * 1445 + b"\x00", False),  # only the first 1445 bytes are read, as WHATWG reads them
])
def test_looks_binary_follows_whatwg_text_or_binary(head, binary):
    assert looks_binary(head) is binary


def test_blocklist_domains_hosts_and_prefixes():
    blocklist = Blocklist(["tracker.test", "*.ads.test", "http://www.site.test/private/"])
    assert blocklist.blocks("http://tracker.test/")
    assert blocklist.blocks("http://x.y.tracker.test/a")
    assert blocklist.blocks("http://banner.ads.test/")
    assert blocklist.blocks("http://www.site.test/private/a.html")
    assert not blocklist.blocks("http://www.site.test/public/")
    assert not blocklist.blocks("http://nottracker.test/")
    assert not Blocklist([])
