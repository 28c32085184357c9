"""Table tests of the URL functions (w3lib/Protego style)."""

from __future__ import annotations

import pytest

from webrace.urls import BadURL, Blocklist, IgnoreTypes, MediaTypes, in_scope, normalize, registered_domain

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


def test_blocklist_domains_hosts_and_prefixes():
    blocklist = Blocklist(["tracker.test", "*.ads.test", "http://www.site.test/private/"])
    assert blocklist.blocks("http://tracker.test/")
    assert blocklist.blocks("http://x.y.tracker.test/a")
    assert blocklist.blocks("http://banner.ads.test/")
    assert blocklist.blocks("http://www.site.test/private/a.html")
    assert not blocklist.blocks("http://www.site.test/public/")
    assert not blocklist.blocks("http://nottracker.test/")
    assert not Blocklist([])
