"""robots.txt (Disallow, Crawl-delay), block lists and media types, in real crawls."""

from __future__ import annotations

import gzip

from conftest import urd


def test_robots_disallow_is_obeyed_and_counted(site, project):
    site.robots("User-agent: *\nDisallow: /private/\n")
    site.html("/", ["/private/secret.html", "/public.html"])
    site.html("/private/secret.html")
    site.html("/public.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl()
    assert "/private/secret.html" not in site.paths()
    assert "/public.html" in site.paths()
    assert run.summary["ignored_by_reason"].get("robots") == 1


def test_robots_group_for_webrace_user_agent_applies(site, project):
    site.robots("User-agent: WebRACE\nDisallow: /\n\nUser-agent: *\nAllow: /\n")
    site.html("/", ["/a.html"])
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl()
    assert site.paths() == []
    assert run.items == []
    assert run.summary["ignored_by_reason"] == {"robots": 1}


def test_user_agent_names_webrace_and_its_version(site, project):
    from webrace import __version__

    site.html("/")
    project.add_urds(urd("u1", "alice", site.url("/")))
    project.crawl()
    agents = {h.headers.get("User-Agent") for h in site.hits}
    assert agents and all(a.startswith(f"WebRACE/{__version__}") for a in agents)


def test_crawl_delay_spaces_requests_to_the_host(site, project):
    site.robots("User-agent: *\nCrawl-delay: 0.6\n")
    site.html("/", ["/a.html", "/b.html", "/c.html"])
    for path in ("/a.html", "/b.html", "/c.html"):
        site.html(path)
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl(CONCURRENT_REQUESTS_PER_DOMAIN=8)
    assert run.stat("webrace/crawl_delay/127.0.0.1") == 0.6
    times = sorted(h.at for h in site.hits if h.path != "/robots.txt")
    assert len(times) == 4
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # Arrival gaps may differ from send gaps by network jitter: allow a small margin.
    assert min(gaps) >= 0.5, gaps


def test_crawl_delay_over_the_maximum_skips_the_host(site, project):
    site.robots("User-agent: *\nCrawl-delay: 3600\n")
    site.html("/")
    project.add_urds(urd("u1", "alice", site.url("/")))
    run = project.crawl(WEBRACE_MAX_CRAWL_DELAY=30)
    assert site.paths() == []
    assert run.summary["ignored_by_reason"] == {"crawl_delay": 1}


def test_blocklist_blocks_hosts_domains_and_url_prefixes(site, project):
    host = "www.site.test"
    site.html("/", [
        site.url("/ok.html", host=host),
        site.url("/x.html", host="ads.tracker.test"),  # domain entry
        site.url("/y.html", host="blocked.test"),  # host entry
        site.url("/private/z.html", host=host),  # URL prefix entry
    ], host=host)
    for path in ("/ok.html", "/x.html", "/y.html", "/private/z.html"):
        site.html(path)
    blocklist = project.write("blocklist.txt", "# blocked\ntracker.test\nblocked.test\n"
                                               f"{site.url('/private/', host=host)}\n")
    project.add_urds(urd("u1", "alice", site.url("/", host=host), depth=1, scope="any"))
    run = project.crawl(WEBRACE_BLOCKLIST=blocklist)
    assert sorted(site.paths()) == ["/", "/ok.html"]
    assert run.summary["ignored_by_reason"] == {"blocklist": 3}


def test_blocklist_applies_to_the_urd_start_page_itself(site, project):
    site.html("/")
    blocklist = project.write("blocklist.txt", "127.0.0.1\n")
    project.add_urds(urd("u1", "alice", site.url("/")))
    run = project.crawl(WEBRACE_BLOCKLIST=blocklist)
    assert site.paths() == []
    assert run.summary["ignored_by_reason"] == {"blocklist": 1}


def test_ignore_types_drop_links_before_any_request(site, project):
    site.html("/", ["/doc.pdf", "/pic.JPG", "/page.html", "/style.css?v=2"])
    site.add("/doc.pdf", b"%PDF-1.4", content_type="application/pdf")
    site.add("/pic.JPG", b"\xff\xd8", content_type="image/jpeg")
    site.html("/page.html")
    site.add("/style.css", "body{}", content_type="text/css")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl()
    assert sorted(site.paths()) == ["/", "/page.html"]
    assert run.summary["ignored_by_reason"] == {"type": 3}
    assert run.by_url[site.url("/")]["links"] == [site.url("/page.html")]


def test_custom_ignore_types_file_replaces_the_default(site, project):
    site.html("/", ["/a.html", "/b.php"])
    site.html("/a.html")
    site.html("/b.php")
    types = project.write("ignore.types", "php\n")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl(WEBRACE_IGNORE_TYPES=types)
    assert sorted(site.paths()) == ["/", "/a.html"]
    assert run.summary["ignored_by_reason"] == {"type": 1}


def test_media_types_not_accepted_are_stopped_and_counted(site, project):
    site.html("/", ["/data", "/notes"])
    site.add("/data", b"\x00" * 300_000, content_type="application/octet-stream")
    site.add("/notes", "plain words", content_type="text/plain")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl()
    assert set(run.by_url) == {site.url("/"), site.url("/notes")}
    assert run.by_url[site.url("/notes")]["content_type"] == "text/plain"
    assert run.summary["ignored_by_reason"] == {"mime": 1}
    assert run.stat("webrace/not_html") == 1


def test_octet_stream_is_judged_by_its_name_and_content_as_browsers_do(site, project):
    """``python -m http.server`` calls every name it does not know application/octet-stream:
    such a file is kept when its name and its first bytes say text, refused by a name that
    says otherwise (at its headers) or by a binary body (after it)."""
    octets = "application/octet-stream"
    site.html("/", ["/api/element-list", "/page.html", "/bare", "/data", "/export.json", "/packed"])
    site.add("/api/element-list", "shapes\nutil\n", content_type=octets)
    site.add("/page.html", '<html><body><a href="/linked.html">on</a></body></html>', content_type=octets)
    site.html("/linked.html")
    site.add("/bare", "no type at all", content_type=None)
    site.add("/data", b"\x00\x01" * 1000, content_type=None)
    site.add("/export.json", '{"text": "but not a type we gather"}', content_type=octets)
    site.add("/packed", gzip.compress(b"plain words\n" * 100), content_type=octets,
             headers={"Content-Encoding": "gzip"})  # judged decompressed
    project.add_urds(urd("u1", "alice", site.url("/"), depth=2))
    run = project.crawl()
    kept = {site.url(p) for p in ("/", "/api/element-list", "/page.html", "/linked.html", "/bare", "/packed")}
    assert set(run.by_url) == kept
    assert all(run.by_url[url]["kept"] for url in kept)
    assert run.by_url[site.url("/page.html")]["links"] == [site.url("/linked.html")]  # read as HTML by its name
    assert run.summary["ignored_by_reason"] == {"mime": 2}
    assert run.stat("webrace/mime_sniffed") == 5
    stored = project.scrapy("store", "get", site.url("/api/element-list"))
    assert stored.stdout == "shapes\nutil\n"


def test_custom_mime_types_file_narrows_what_is_gathered(site, project):
    site.html("/", ["/notes"])
    site.add("/notes", "plain words", content_type="text/plain; charset=utf-8")
    types = project.write("mime.types", "text/html\n")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl(WEBRACE_MIME_TYPES=types)
    assert set(run.by_url) == {site.url("/")}
    assert run.summary["ignored_by_reason"] == {"mime": 1}
