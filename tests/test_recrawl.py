"""Conditional re-crawl against a real server that sends ETag / Last-Modified and answers
conditional requests (seed 003 section 5.1)."""

from __future__ import annotations

import pytest
from conftest import urd

from webrace.backends import open_object_cache


@pytest.fixture
def small_site(site):
    site.validators = True
    site.html("/", ["/a.html", "/b.html"])
    site.html("/a.html", ["/c.html"])
    site.html("/b.html", ["/"])
    site.html("/c.html")
    return site


def next_round(project):
    project.make_due()


def test_first_round_stores_every_page(small_site, project):
    project.add_urds(urd("u1", "alice", small_site.url("/"), depth=2))
    run = project.crawl()
    assert len(run.items) == 4
    assert all(i["new_version"] and i["version"] == 1 and not i["not_modified"] for i in run.items)
    assert run.stat("recrawl/first_fetch") == 4
    with open_object_cache(project.settings()) as cache:  # the store `scrapy store versions` reads
        for path in ("/", "/a.html", "/b.html", "/c.html"):
            assert [v.number for v in cache.versions(small_site.url(path))] == [1]


def test_unchanged_site_is_revalidated_with_304s_only(small_site, project):
    project.add_urds(urd("u1", "alice", small_site.url("/"), depth=2))
    first = project.crawl()
    small_site.clear_hits()
    next_round(project)
    second = project.crawl()
    assert set(small_site.statuses().values()) == {304}
    assert sorted(small_site.statuses()) == ["/", "/a.html", "/b.html", "/c.html"]
    assert all(h.headers.get("If-None-Match") and h.headers.get("If-Modified-Since")
               for h in small_site.hits if h.path != "/robots.txt")
    # every page still emitted, marked not_modified, and its stored links followed
    assert {i["url"] for i in second.items} == {i["url"] for i in first.items}
    assert all(i["not_modified"] and not i["new_version"] and i["version"] == 1 for i in second.items)
    assert second.by_url[small_site.url("/a.html")]["links"] == [small_site.url("/c.html")]
    assert second.stat("recrawl/not_modified") == 4
    assert second.stat("recrawl/bytes_saved") == sum(i["size"] for i in first.items)
    assert second.stat("recrawl/bytes_received") == 0
    assert second.summary["expanded"] == 0  # nothing re-parsed
    assert small_site.count("/") == 1


def test_changed_pages_and_only_those_get_new_versions(small_site, project):
    project.add_urds(urd("u1", "alice", small_site.url("/"), depth=2))
    project.crawl()
    small_site.html("/b.html", ["/", "/new.html"], text="changed")
    small_site.html("/new.html")
    next_round(project)
    run = project.crawl()
    new = {i["url"] for i in run.items if i["new_version"]}
    assert new == {small_site.url("/b.html"), small_site.url("/new.html")}
    assert run.by_url[small_site.url("/b.html")]["version"] == 2
    assert run.by_url[small_site.url("/a.html")]["not_modified"] is True
    assert run.stat("recrawl/modified") == 1 and run.stat("recrawl/not_modified") == 3
    old = project.scrapy("store", "get", small_site.url("/b.html"), "--version", "1")
    now = project.scrapy("store", "get", small_site.url("/b.html"))
    assert "changed" not in old.stdout and "changed" in now.stdout


def test_200_with_an_identical_body_adds_no_version(site, project):
    site.html("/")  # no validators at all: every round fetches in full
    project.add_urds(urd("u1", "alice", site.url("/")))
    project.crawl()
    next_round(project)
    run = project.crawl()
    assert run.stat("recrawl/no_validators") == 1
    assert run.stat("recrawl/unchanged_body") == 0  # nothing conditional was asked
    assert run.items[0]["new_version"] is False and run.items[0]["version"] == 1
    assert "If-None-Match" not in site.hits[-1].headers
    versions = project.scrapy("store", "versions", site.url("/")).stdout.splitlines()
    assert len(versions) == 2


def test_store_get_writes_the_body_to_stdout(site, project):
    body = "<html><body>exact bytes \u00e9</body></html>".encode()
    site.add("/", body)
    project.add_urds(urd("u1", "alice", site.url("/")))
    project.crawl()
    result = subprocess_bytes(project, "store", "get", site.url("/"))
    assert result == body


def subprocess_bytes(project, *args):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=project.root, env=project.env,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_store_commands_refuse_unknown_urls_and_versions(site, project):
    site.html("/")
    project.add_urds(urd("u1", "alice", site.url("/")))
    project.crawl()
    missing = project.scrapy("store", "versions", site.url("/nope.html"))
    assert missing.returncode == 1 and "no stored version" in missing.stderr
    bad_version = project.scrapy("store", "get", site.url("/"), "--version", "7")
    assert bad_version.returncode == 1 and "has no version 7" in bad_version.stderr


def test_gc_keeps_the_newest_versions_and_deletes_unreferenced_objects(project):
    """`scrapy store gc` over four editions of a page, stored here as the recrawl middleware
    stores a changed page (the crawls that store new versions are the tests above)."""
    url = "http://a.test/"
    with open_object_cache(project.settings()) as cache:
        for n in range(4):
            cache.record_fetch(url, 200, f"<html><body><p>edition {n}</p></body></html>".encode(), fetched=1000 + n,
                               header="HTTP/1.1 200 OK\nContent-Type: text/html", links=[])
        assert [v.number for v in cache.versions(url)] == [1, 2, 3, 4]
    objects_before = len(list((project.data / "objects").glob("??/*.z")))
    gc = project.scrapy("store", "gc", "--keep", "2", "-s", "WEBRACE_STORE_GC_GRACE=0")
    assert gc.returncode == 0 and "dropped 2 version(s)" in gc.stdout
    assert len(list((project.data / "objects").glob("??/*.z"))) == objects_before - 2
    with open_object_cache(project.settings()) as cache:
        assert [v.number for v in cache.versions(url)] == [3, 4]
        assert b"edition 3" in cache.get(url)[1]
        assert b"edition 2" in cache.get(url, 3)[1]
        with pytest.raises(LookupError):
            cache.get(url, 1)


def test_continuous_mode_starts_each_urd_again_when_it_falls_due(small_site, project):
    project.add_urds(urd("u1", "alice", small_site.url("/"), depth=0, timing=200))
    run = project.crawl(WEBRACE_CONTINUOUS=True, CLOSESPIDER_ITEMCOUNT=3)
    assert [i["not_modified"] for i in run.items] == [False, True, True]
    assert small_site.count("/") == 3
    assert run.stat("webrace/rounds") >= 3


# -- servers that lie ----------------------------------------------------------------------

def test_304_with_a_body_keeps_the_cache_consistent(site, project):
    site.validators = True
    site.html("/", ["/a.html"])
    site.html("/a.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    project.crawl()
    site.routes[(None, "/a.html")] = lambda: (304, {"Connection": "close"}, b"<html>junk after a 304</html>")
    next_round(project)
    run = project.crawl()
    assert run.returncode == 0
    assert run.by_url[site.url("/a.html")]["not_modified"] is True
    stored = project.scrapy("store", "get", site.url("/a.html")).stdout
    assert "junk" not in stored and "<title>/a.html</title>" in stored


def test_304_for_an_unknown_url_is_retried_plainly_then_failed(site, project):
    site.add("/", b"", status=304, content_type=None)
    project.add_urds(urd("u1", "alice", site.url("/")))
    run = project.crawl()
    assert run.items == []
    assert run.stat("recrawl/unexpected_304") == 2
    assert run.summary["failed_by_reason"] == {"unexpected_304": 1}
    retry = [h for h in site.hits if h.path == "/"][-1]
    assert retry.headers.get("Cache-Control") == "no-cache" and "If-None-Match" not in retry.headers
    assert project.scrapy("store", "versions", site.url("/")).returncode == 1


def test_changed_body_under_the_same_etag_is_stored(site, project):
    site.add("/", "<html><body>one</body></html>", headers={"ETag": '"same"'})
    project.add_urds(urd("u1", "alice", site.url("/")))
    project.crawl()
    site.add("/", "<html><body>two</body></html>", headers={"ETag": '"same"'})  # server ignores validators
    next_round(project)
    run = project.crawl()
    assert site.hits[-1].headers.get("If-None-Match") == '"same"'
    assert run.items[0]["new_version"] is True and run.items[0]["version"] == 2
    assert run.stat("recrawl/modified") == 1


def test_invalid_last_modified_date_is_not_sent_back(site, project):
    site.add("/", "<html><body>x</body></html>", headers={"Last-Modified": "yesterday, around noon"})
    project.add_urds(urd("u1", "alice", site.url("/")))
    project.crawl()
    next_round(project)
    run = project.crawl()
    last = site.hits[-1].headers
    assert "If-Modified-Since" not in last and "If-None-Match" not in last
    assert run.stat("recrawl/no_validators") == 1
    assert run.items[0]["new_version"] is False


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_missing_or_corrupt_stored_object_is_counted_and_refetched(small_site, project, damage):
    project.add_urds(urd("u1", "alice", small_site.url("/"), depth=0))
    first = project.crawl()
    digest = first.items[0]["digest"]
    path = project.data / "objects" / digest[:2] / f"{digest}.z"
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(b"not zlib at all")
    next_round(project)
    run = project.crawl()
    assert run.stat(f"recrawl/object_{damage}") == 1
    assert "If-None-Match" not in small_site.hits[-1].headers
    assert small_site.hits[-1].status == 200
    assert project.scrapy("store", "get", small_site.url("/")).returncode == 0  # repaired


# -- types not kept: remembered with their validators, not downloaded again --------------

BLOB = bytes(range(256)) * 64  # 16 KiB, binary


def test_a_type_not_kept_is_remembered_and_recrawled_conditionally(project, nginx):
    server = nginx
    server.extra = "location /files/ { default_type application/pdf; }"
    server.write("/index.html", '<html><body><a href="/download">d</a><a href="/files/report">r</a></body></html>')
    server.write("/download", BLOB)  # application/octet-stream: the body decides
    server.write("/files/report", b"%PDF-1.4\n" + BLOB)  # refused at its headers
    server.start()
    project.add_urds(urd("u1", "alice", server.url("/index.html"), depth=1))
    first = project.crawl()
    hits = {hit.uri: hit for hit in server.hits()}
    server.clear_log()
    next_round(project)
    second = project.crawl()
    again = {hit.uri: hit for hit in server.hits()}
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-3000:]
    assert hits["/download"].status == 200 and hits["/download"].sent == len(BLOB)  # sniffed: downloaded once
    assert first.stat("webrace/ignored/mime") == 2 and first.stat("webrace/not_kept/remembered") == 2
    assert [item["url"] for item in first.pages] == [server.url("/index.html")]
    # the re-crawl asks "has this changed?" and nginx says no: no body sent
    for path in ("/download", "/files/report"):
        assert again[path].status == 304 and again[path].sent == 0, path
        assert again[path].inm and again[path].ims
    assert second.stat("webrace/not_kept/not_modified") == 2 and second.stat("webrace/ignored/mime") == 2
    assert second.stat("recrawl/not_modified") == 3  # the page, and the two not kept
    assert [item["url"] for item in second.pages] == [server.url("/index.html")]  # still no item for them
    with open_object_cache(project.settings()) as cache:
        meta = cache.lookup(server.url("/download"))
        assert meta.not_kept and meta.etag and not cache.versions(server.url("/download"))


def test_a_binary_download_without_validators_is_refused_at_its_headers_next_time(site, project):
    site.html("/", ["/blob"])
    site.add("/blob", BLOB, content_type="application/octet-stream")  # no ETag, no Last-Modified
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    first = project.crawl()
    next_round(project)
    second = project.crawl()
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-3000:]
    assert site.count("/blob") == 2  # nothing to ask conditionally: asked again
    page_bytes = len(site.routes[(None, "/")][2])
    assert first.stat("recrawl/bytes_received") == page_bytes + len(BLOB)  # sniffed once: binary, not kept
    assert second.stat("webrace/not_kept/known_binary") == 1 and second.stat("webrace/ignored/mime") == 1
    assert second.stat("recrawl/bytes_received") == page_bytes  # stopped at its headers
    assert second.summary["ignored"] == 1
