"""WARC out of and into the object cache (webrace/store/warc.py, `scrapy store export|import`):
records checked with warcio's own CLI, replayed in pywb, a wget archive imported and
re-crawled conditionally, truncated and corrupt archives."""

from __future__ import annotations

import base64
import contextlib
import errno
import functools
import gzip
import hashlib
import io
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import _free_port, urd
from scrapy.http import HtmlResponse, Request
from scrapy.settings import Settings
from warcio.archiveiterator import ArchiveIterator
from warcio.warcwriter import WARCWriter

from webrace import settings as webrace_settings
from webrace.archive import CrawlView, WarcFiles, exchange_records
from webrace.backends import open_object_cache
from webrace.middlewares.recrawl import CONDITIONAL
from webrace.outputs import write_output as write_atomically
from webrace.store import warc
from webrace.store.warc import export_warc, import_warcs, urd_urls, warc_date
from webrace.urd import Urd

T0 = 1_700_000_000_000  # epoch ms of the first fetch in these tests
HTML = "HTTP/1.1 200 OK\nContent-Type: text/html; charset=utf-8"


def make_settings(data: Path, **extra: object) -> Settings:
    settings = Settings()
    settings.setmodule(webrace_settings)
    settings.set("WEBRACE_DATA_DIR", str(data))
    for name, value in extra.items():
        settings.set(name, value)
    return settings


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path / "data")


@pytest.fixture
def cache(settings):
    with open_object_cache(settings) as c:
        yield c


@pytest.fixture
def other(tmp_path):
    """A second, empty object cache: where exports are imported."""
    with open_object_cache(make_settings(tmp_path / "other")) as c:
        yield c


def page(links=(), text="") -> bytes:
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
    return f"<html><head><title>t</title></head><body><p>{text}</p>{anchors}</body></html>".encode()


def fetch(cache, url, body, at, *, links=(), header=HTML, etag=None, lastmodified=None):
    if etag:
        header += f'\nEtag: {etag}'
    if lastmodified:
        header += f"\nLast-Modified: {lastmodified}"
    return cache.record_fetch(url, 200, body, fetched=at, header=header, links=list(links), etag=etag,
                              lastmodified=lastmodified)


def export(cache, path: Path, urls=None, **kw) -> warc.Exported:
    with open(path, "wb") as fh:
        return export_warc(cache, fh, sorted(cache.index.urls()) if urls is None else urls,
                           headers=[("User-Agent", "WebRACE-test")], filename=path.name, **kw)


def records(path: Path) -> list[dict]:
    """Every record of a WARC: its WARC headers, HTTP status line and headers, and content."""
    found = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            found.append({
                "type": rec.rec_type, "warc": dict(rec.rec_headers.headers),
                "status": rec.http_headers.statusline if rec.http_headers else None,
                "protocol": rec.http_headers.protocol if rec.http_headers else None,
                "http": dict(rec.http_headers.headers) if rec.http_headers else {},
                "body": rec.content_stream().read()})
    return found


@functools.cache
def crawl_pages() -> CrawlView:
    """The crawl's media types and URL extractor pipe, from the default settings."""
    return CrawlView.from_settings(make_settings(Path("unused")))


def do_import(cache, *paths, max_body=1 << 20) -> warc.Imported:
    return import_warcs(cache, [str(p) for p in paths], crawl_pages(), max_body=max_body)


def write_raw_warc(path: Path, captures: list[tuple[str, int, bytes]], compress: bool = True) -> None:
    """A WARC of ``(url, epoch ms, raw HTTP response bytes)`` response records, as another
    crawler would write them (the HTTP message as it came off the wire)."""
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=compress)
        for url, at, raw in captures:
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(raw), length=len(raw),
                warc_headers_dict={"WARC-Date": warc_date(at)}))


def raw_response(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = "\r\n".join([f"HTTP/1.1 {status}", *headers]) + "\r\n\r\n"
    return head.encode() + body


# -- export ----------------------------------------------------------------------------


def test_export_writes_a_response_and_request_per_version_and_a_revisit_per_304(cache, tmp_path):
    url = "http://a.test/p.html"
    first = fetch(cache, url, page(["/q.html"]), T0, etag='"v1"')
    cache.record_not_modified(first.meta, T0 + 60_000, None, None, 'HTTP/1.1 304 Not Modified\nEtag: "v1"')
    fetch(cache, url, page(text="second"), T0 + 120_000)
    export(cache, tmp_path / "out.warc.gz")
    recs = records(tmp_path / "out.warc.gz")
    assert [r["type"] for r in recs] == ["warcinfo", "response", "request", "revisit", "request", "response",
                                         "request"]
    v1, rv, v2 = recs[1], recs[3], recs[5]
    assert v1["warc"]["WARC-Target-URI"] == url and v1["warc"]["WARC-Date"] == "2023-11-14T22:13:20Z"
    assert v1["body"] == page(["/q.html"]) and v2["body"] == page(text="second")
    sha = "sha256:" + base64.b32encode(hashlib.sha256(page(["/q.html"])).digest()).decode()
    assert v1["warc"]["WARC-Payload-Digest"] == sha
    assert rv["warc"]["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    assert rv["warc"]["WARC-Refers-To-Target-URI"] == url
    assert rv["warc"]["WARC-Refers-To-Date"] == v1["warc"]["WARC-Date"]
    assert rv["warc"]["WARC-Payload-Digest"] == sha and rv["warc"]["WARC-Refers-To"] == v1["warc"]["WARC-Record-ID"]
    # replayed as the version it confirms: that response's status and headers, freshened by the 304's
    assert rv["status"] == "200 OK" and rv["http"]["Etag"] == '"v1"'
    assert rv["http"]["Content-Length"] == str(len(page(["/q.html"])))
    assert rv["http"]["Content-Type"] == "text/html; charset=utf-8"
    assert rv["warc"][warc.ANSWER_FIELD] == "HTTP/1.1 304 Not Modified"
    request = recs[2]
    assert request["warc"]["WARC-Concurrent-To"] == v1["warc"]["WARC-Record-ID"]
    assert request["status"] == "/p.html HTTP/1.1" and request["protocol"] == "GET"
    assert request["http"]["Host"] == "a.test" and request["http"]["User-Agent"] == "WebRACE-test"
    assert recs[4]["http"]["If-None-Match"] == '"v1"'  # a 304 answers a conditional request


def test_export_makes_decoded_bodies_self_consistent(cache, tmp_path):
    body = page(text="decoded by Scrapy")
    header = HTML + "\nContent-Encoding: gzip\nTransfer-Encoding: chunked\nContent-Length: 17"
    fetch(cache, "http://a.test/", body, T0, header=header)
    export(cache, tmp_path / "out.warc.gz")
    response = records(tmp_path / "out.warc.gz")[1]
    assert response["body"] == body
    assert response["http"]["Content-Length"] == str(len(body))
    assert "Content-Encoding" not in response["http"] and "Transfer-Encoding" not in response["http"]
    assert response["http"]["X-WebRACE-Orig-Content-Encoding"] == "gzip"
    assert response["http"]["X-WebRACE-Orig-Transfer-Encoding"] == "chunked"
    assert response["http"]["X-WebRACE-Orig-Content-Length"] == "17"


def test_exported_warc_passes_warcio_check_and_index_lists_every_record(cache, tmp_path):
    for n in range(3):
        first = fetch(cache, f"http://a.test/{n}.html", page(text=str(n)), T0 + n, etag=f'"e{n}"')
        cache.record_not_modified(first.meta, T0 + 1000 + n, None, None, None)
    out = tmp_path / "out.warc.gz"
    report = export(cache, out)
    assert (report.responses, report.requests, report.revisits) == (3, 6, 3)
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(out)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("digest pass") == 1 + 3 + 6  # warcinfo, responses, requests (revisits: not checked)
    index = subprocess.run([sys.executable, "-m", "warcio.cli", "index", "-f", "warc-type,offset", str(out)],
                           capture_output=True, text=True, timeout=60)
    assert index.returncode == 0, index.stderr
    listed = [line for line in index.stdout.splitlines() if line.strip()]
    assert len(listed) == len(records(out)) == 13


def test_export_since_keeps_what_was_fetched_at_or_after_it(cache, tmp_path):
    url = "http://a.test/"
    first = fetch(cache, url, b"one", T0, etag='"1"')
    cache.record_not_modified(first.meta, T0 + 10, None, None, None)
    fetch(cache, url, b"two", T0 + 20)
    export(cache, tmp_path / "since.warc.gz", since=T0 + 10)
    recs = [r for r in records(tmp_path / "since.warc.gz") if r["type"] in ("response", "revisit")]
    assert [(r["type"], r["body"]) for r in recs] == [("revisit", b""), ("response", b"two")]
    # the revisit still names the digest of the version it confirms, which is not in this file
    sha = "sha256:" + base64.b32encode(hashlib.sha256(b"one").digest()).decode()
    assert recs[0]["warc"]["WARC-Payload-Digest"] == sha


def test_export_from_the_distributed_mode(redis_url, redis_prefix, other, tmp_path):
    settings = make_settings(tmp_path / "worker", REDIS_URL=redis_url, WEBRACE_REDIS_PREFIX=redis_prefix,
                             WEBRACE_OBJECTS_DIR=str(tmp_path / "shared-bodies"))
    url = "http://a.test/"
    with open_object_cache(settings) as shared:
        first = fetch(shared, url, page(text="one"), T0, etag='"1"')
        shared.record_not_modified(first.meta, T0 + 10, None, None, None)
        fetch(shared, url, page(text="two"), T0 + 20)
        report = export(shared, tmp_path / "out.warc.gz")
        assert (report.responses, report.revisits, report.problems) == (2, 1, [])
        revisit = [r for r in records(tmp_path / "out.warc.gz") if r["type"] == "revisit"][0]
        assert revisit["status"] == "200 OK" and revisit["warc"]["WARC-Refers-To-Date"] == warc_date(T0)
        assert revisit["warc"][warc.ANSWER_FIELD] == "HTTP/1.1 304 Not Modified"  # Redis keeps no 304 headers
        do_import(other, tmp_path / "out.warc.gz")
        assert [v.digest for v in other.versions(url)] == [v.digest for v in shared.versions(url)]


def test_urd_urls_are_the_pages_its_crawl_reaches(cache):
    fetch(cache, "http://a.test/", page(), T0, links=["http://a.test/1", "http://b.test/", "http://a.test/deep0"])
    fetch(cache, "http://a.test/1", page(), T0, links=["http://a.test/2"])
    fetch(cache, "http://a.test/2", page(), T0, links=["http://a.test/3"])
    fetch(cache, "http://a.test/3", page(), T0)
    fetch(cache, "http://b.test/", page(), T0)  # another host: out of the URD's scope
    fetch(cache, "http://a.test/alone", page(), T0)  # same host, linked from nothing the URD reaches
    found = urd_urls(cache, Urd("u", "alice", "http://a.test/", 3_600_000, depth=2))
    assert found == ["http://a.test/", "http://a.test/1", "http://a.test/2"]
    anywhere = urd_urls(cache, Urd("u", "alice", "http://a.test/", 3_600_000, depth=1, scope="any"))
    assert anywhere == ["http://a.test/", "http://a.test/1", "http://b.test/"]


def test_export_names_a_missing_body_and_writes_the_rest(cache, tmp_path):
    gone = fetch(cache, "http://a.test/gone", b"gone", T0)
    fetch(cache, "http://a.test/kept", b"kept", T0)
    cache.objects.delete(gone.meta.digest)
    report = export(cache, tmp_path / "out.warc.gz")
    assert report.responses == 1
    assert report.problems == ["http://a.test/gone version 1: stored body missing: not written"]


def test_atomic_write_leaves_no_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "out.warc.gz"
    target.write_bytes(b"previous export")

    def fail(stream):
        stream.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomically(target, fail)
    assert target.read_bytes() == b"previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.warc.gz"]


# -- import ----------------------------------------------------------------------------


def test_import_of_an_export_gives_the_same_versions_and_bodies(cache, other, tmp_path):
    url = "http://a.test/p.html"
    fetch(cache, url, page(["/q.html"]), T0, etag='"v1"', lastmodified="Tue, 14 Nov 2023 22:00:00 GMT")
    fetch(cache, url, page(text="two"), T0 + 5000, etag='"v2"')
    export(cache, tmp_path / "out.warc.gz")
    report = do_import(other, tmp_path / "out.warc.gz")
    assert (report.responses, report.new_versions, report.bad) == (2, 2, [])
    assert report.skipped == {"warcinfo": 1, "request": 2}
    assert [(v.number, v.fetched, v.digest) for v in other.versions(url)] == \
        [(v.number, v.fetched, v.digest) for v in cache.versions(url)]
    meta = other.lookup(url)
    assert meta.etag == '"v2"' and meta.fetched == T0 + 5000 and other.get(url)[1] == page(text="two")


def test_import_decodes_chunked_and_compressed_bodies(other, tmp_path):
    body = page(["/next.html"], text="compressed")
    zipped = gzip.compress(body)
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (zipped[:10], zipped[10:])) + b"0\r\n\r\n"
    raw = raw_response(chunked, "Content-Type: text/html", "Content-Encoding: gzip", "Transfer-Encoding: chunked",
                       'ETag: "z"')
    write_raw_warc(tmp_path / "in.warc.gz", [("http://a.test/z.html", T0, raw)])
    report = do_import(other, tmp_path / "in.warc.gz")
    assert report.new_versions == 1 and not report.bad
    version, stored = other.get("http://a.test/z.html")
    assert stored == body
    meta = other.lookup("http://a.test/z.html")
    assert meta.etag == '"z"' and meta.links == ("http://a.test/next.html",)
    assert meta.header_value("Content-Encoding") is None  # as Scrapy hands a decoded body over
    assert meta.header.startswith("HTTP/1.1 200 OK\n") and version.header == meta.header
    # how it came over the wire, kept as the crawl keeps it (middlewares/compression.py)
    assert meta.header_value("X-WebRACE-Orig-Content-Encoding") == "gzip"
    assert meta.header_value("X-WebRACE-Orig-Transfer-Encoding") == "chunked"
    assert meta.header_value("X-WebRACE-Orig-Content-Length") == str(len(chunked))


def test_import_extracts_links_exactly_as_the_crawl_does(other, tmp_path):
    body = (b'<html><head><base href="http://a.test/dir/"></head><body><a href="x.html">x</a>'
            b'<a href="#top">top</a><a href="pic.png">img</a><a href="mailto:a@b">m</a>'
            b'<area href="/y.html"><iframe src="f.html"></iframe><a href="x.html">again</a></body></html>')
    write_raw_warc(tmp_path / "in.warc.gz", [("http://a.test/p", T0, raw_response(body, "Content-Type: text/html"))])
    do_import(other, tmp_path / "in.warc.gz")
    crawl = crawl_pages().extractor.extract(HtmlResponse("http://a.test/p", body=body).selector, "http://a.test/dir/")
    assert other.lookup("http://a.test/p").links == tuple(crawl.links)
    assert crawl.links == ["http://a.test/dir/x.html", "http://a.test/y.html", "http://a.test/dir/f.html"]


def test_import_keeps_only_what_the_crawl_keeps(other, tmp_path):
    write_raw_warc(tmp_path / "in.warc.gz", [
        ("http://a.test/robots.txt", T0, raw_response(b"User-agent: *", "Content-Type: text/plain")),
        ("http://a.test/pic.png", T0, raw_response(b"\x89PNG\r\n\x1a\n\x00", "Content-Type: image/png")),
        ("http://a.test/moved", T0, raw_response(b"", "Location: /", status="304 Not Modified")),
        ("dns:a.test", T0, b"127.0.0.1"),
        ("http://a.test/page", T0, raw_response(b"<html>ok</html>", "Content-Type: text/html")),
    ])
    report = do_import(other, tmp_path / "in.warc.gz")
    assert report.responses == 1 and report.bad == []
    assert report.skipped == {"robots.txt": 1, "mime": 1, "304 answer (no body to keep)": 1,
                              "response (not HTTP)": 1}
    assert sorted(other.index.urls()) == ["http://a.test/page"]


def test_import_stores_captures_of_one_url_in_warc_date_order(other, tmp_path):
    url = "http://a.test/"
    write_raw_warc(tmp_path / "newer.warc.gz", [(url, T0 + 2000, raw_response(b"<p>new</p>", 'ETag: "n"'))])
    write_raw_warc(tmp_path / "older.warc.gz", [(url, T0, raw_response(b"<p>old</p>", 'ETag: "o"')),
                                                (url, T0 + 1000, raw_response(b"<p>mid</p>", 'ETag: "m"'))])
    report = do_import(other, tmp_path / "newer.warc.gz", tmp_path / "older.warc.gz")
    assert report.new_versions == 3
    assert [(v.number, v.fetched) for v in other.versions(url)] == [(1, T0), (2, T0 + 1000), (3, T0 + 2000)]
    assert other.lookup(url).etag == '"n"' and other.get(url)[1] == b"<p>new</p>"


def test_an_older_capture_never_replaces_the_newest_stored_metainfo(cache, tmp_path):
    url = "http://a.test/"
    fetch(cache, url, b"<p>crawled</p>", T0 + 10_000, etag='"c"')
    before = cache.lookup(url)
    write_raw_warc(tmp_path / "old.warc.gz", [(url, T0, raw_response(b"<p>archived</p>", 'ETag: "a"'))])
    report = do_import(cache, tmp_path / "old.warc.gz")
    assert report.skipped == {"not newer than stored": 1} and report.responses == 0
    assert cache.lookup(url) == before and len(cache.versions(url)) == 1


def test_importing_a_file_twice_adds_nothing(other, tmp_path):
    write_raw_warc(tmp_path / "in.warc.gz", [("http://a.test/", T0, raw_response(b"<p>x</p>"))])
    assert do_import(other, tmp_path / "in.warc.gz").new_versions == 1
    again = do_import(other, tmp_path / "in.warc.gz")
    assert again.responses == 0 and again.skipped == {"not newer than stored": 1}
    assert len(other.versions("http://a.test/")) == 1


def three_pages(path: Path, compress: bool = True) -> list[int]:
    """A WARC of three responses (a.test/0..2); returns each record's offset."""
    write_raw_warc(path, [(f"http://a.test/{n}", T0 + n, raw_response(page(text=f"page {n}" * 50),
                                                                       "Content-Type: text/html"))
                          for n in range(3)], compress=compress)
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        return [it.offset for _ in it]


@pytest.mark.parametrize("compress", [True, False], ids=["warc.gz", "warc"])
def test_truncated_warc_imports_the_good_records_and_names_the_bad(other, tmp_path, compress):
    path = tmp_path / ("in.warc.gz" if compress else "in.warc")
    offsets = three_pages(path, compress)
    data = path.read_bytes()
    path.write_bytes(data[:offsets[2] + (len(data) - offsets[2]) // 2])
    report = do_import(other, path)
    assert sorted(other.index.urls()) == ["http://a.test/0", "http://a.test/1"]
    assert len(report.bad) == 1 and report.bad[0].offset == offsets[2] and report.bad[0].path == str(path)
    assert "truncated" in report.bad[0].reason or "EOF" in report.bad[0].reason


def test_corrupt_gzip_member_is_named_and_the_records_after_it_imported(other, tmp_path):
    path = tmp_path / "in.warc.gz"
    offsets = three_pages(path)
    data = bytearray(path.read_bytes())
    middle = (offsets[1] + offsets[2]) // 2
    data[middle:middle + 8] = b"\x00" * 8  # the second record's compressed bytes
    path.write_bytes(bytes(data))
    report = do_import(other, path)
    assert sorted(other.index.urls()) == ["http://a.test/0", "http://a.test/2"]
    assert [b.offset for b in report.bad] == [offsets[1]]


def test_corrupt_uncompressed_record_is_named_and_nothing_stored_changes(cache, tmp_path):
    fetch(cache, "http://a.test/1", b"<p>stored</p>", T0 - 1)
    before = cache.lookup("http://a.test/1")
    path = tmp_path / "in.warc"
    offsets = three_pages(path, compress=False)
    data = path.read_bytes()
    at = data.index(b"page 1", offsets[1])
    path.write_bytes(data[:at] + b"PAGE 1" + data[at + 6:])  # the body no longer matches its digest
    report = do_import(cache, path)
    assert [(b.offset, "digest" in b.reason) for b in report.bad] == [(offsets[1], True)]
    assert cache.lookup("http://a.test/1") == before
    assert {"http://a.test/0", "http://a.test/2"} <= set(cache.index.urls())


def test_a_file_that_is_not_a_warc_is_one_bad_line(other, tmp_path):
    path = tmp_path / "page.html"
    path.write_bytes(b"<html>not an archive</html>\n" * 100)
    report = do_import(other, path, tmp_path / "missing.warc.gz")
    assert [(Path(b.path).name, b.offset) for b in report.bad] == [("page.html", 0), ("missing.warc.gz", 0)]
    assert "cannot read" in report.bad[1].reason and other.index.urls() == []


def test_a_body_in_an_encoding_nobody_decodes_is_skipped(other, tmp_path):
    raw = raw_response(b"\x1f\x9d\x90compressed", "Content-Type: text/html", "Content-Encoding: compress")
    write_raw_warc(tmp_path / "in.warc.gz", [("http://a.test/", T0, raw),
                                             ("http://a.test/ok", T0, raw_response(b"<p>ok</p>"))])
    report = do_import(other, tmp_path / "in.warc.gz")
    assert sorted(other.index.urls()) == ["http://a.test/ok"]
    assert report.skipped == {"content-encoding compress": 1} and report.bad == []


def test_a_body_over_the_size_limit_is_skipped(other, tmp_path):
    write_raw_warc(tmp_path / "in.warc.gz", [("http://a.test/", T0, raw_response(b"x" * 5000))])
    report = do_import(other, tmp_path / "in.warc.gz", max_body=4096)
    assert report.skipped == {"too large": 1} and other.index.urls() == []


# -- the commands ----------------------------------------------------------------------


def test_store_export_and_import_commands(project, tmp_path):
    data = project.data
    with open_object_cache(make_settings(data)) as c:
        fetch(c, "http://a.test/", page(["http://a.test/1"]), T0, links=["http://a.test/1"])
        fetch(c, "http://a.test/1", page(), T0 + 1000)
        fetch(c, "http://b.test/", page(), T0 + 2000)
    project.add_urds(urd("ua", "alice", "http://a.test/", depth=1))
    out = tmp_path / "a.warc.gz"
    done = project.scrapy("store", "export", "--warc", str(out), "--urd", "ua", "--since", "2023-11-14T22:13:21Z")
    assert done.returncode == 0, done.stderr
    assert "Wrote 1 response, 1 request and 0 revisit record(s) of 1 URL(s)" in done.stderr
    assert [r["warc"]["WARC-Target-URI"] for r in records(out) if r["type"] == "response"] == ["http://a.test/1"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".a.warc.gz")] == []
    stdout = subprocess.run([sys.executable, "-m", "scrapy", "store", "export", "--warc", "-", "--since", str(T0)],
                            cwd=project.root, env=project.env, capture_output=True, timeout=120)
    assert stdout.returncode == 0 and stdout.stdout[:2] == b"\x1f\x8b"
    bad_since = project.scrapy("store", "export", "--warc", str(out), "--since", "yesterday-ish")
    assert bad_since.returncode == 2 and len(bad_since.stderr.strip().splitlines()) == 1
    assert bad_since.stderr.startswith("error: --since 'yesterday-ish'")
    unknown = project.scrapy("store", "export", "--warc", str(out), "--urd", "nosuch")
    assert unknown.returncode == 1 and unknown.stderr.strip() == "error: no URD with id nosuch (see `scrapy urd list`)"
    # import into a second data directory, with a truncated copy beside the good file
    broken = tmp_path / "broken.warc.gz"
    broken.write_bytes(out.read_bytes()[:-20])
    project.env["WEBRACE_DATA_DIR"] = str(tmp_path / "second")
    imported = project.scrapy("store", "import", "--warc", str(out), str(broken))
    assert imported.returncode == 1
    assert imported.stdout.startswith("Imported 1 response(s) from 2 file(s): 1 new version(s)")
    assert "skipped: not newer than stored 0" not in imported.stdout
    bad_lines = [line for line in imported.stderr.splitlines() if line.startswith("bad: ")]
    assert len(bad_lines) == 1 and bad_lines[0].startswith(f"bad: {broken}:")


# -- the crawl's own WARC files (WEBRACE_STORE_WARC) -------------------------------------


def exchange(url: str, body: bytes, status: int = 200, meta: dict | None = None, **headers: str):
    request = Request(url, meta=meta or {}, headers={"User-Agent": "WebRACE-test", "Accept-Encoding": "gzip"})
    response = HtmlResponse(url, status=status, body=body, request=request,
                            headers={"Content-Type": "text/html", **headers})
    return exchange_records(request, response)


def test_archiver_writes_a_full_fetch_as_response_and_request(tmp_path):
    files = WarcFiles(tmp_path, 1 << 30, "host-1")
    files.write(exchange("http://a.test/p?q=1", b"<p>decoded</p>", **{"Content-Encoding": "gzip"}))
    files.close()
    [path] = files.finished
    recs = records(path)
    assert [r["type"] for r in recs] == ["warcinfo", "response", "request"]
    response, request = recs[1], recs[2]
    assert response["body"] == b"<p>decoded</p>" and response["http"]["Content-Length"] == "14"
    assert "Content-Encoding" not in response["http"]
    assert request["status"] == "/p?q=1 HTTP/1.1" and request["http"]["Host"] == "a.test"
    assert request["http"]["User-Agent"] == "WebRACE-test"
    assert request["warc"]["WARC-Concurrent-To"] == response["warc"]["WARC-Record-ID"]


def test_archiver_writes_an_expected_304_as_a_revisit_of_the_stored_version(tmp_path, cache):
    stored = fetch(cache, "http://a.test/", b"<p>v1</p>", T0, etag='"1"').meta
    files = WarcFiles(tmp_path, 1 << 30, "w")
    files.write(exchange("http://a.test/", b"", status=304,
                         meta={CONDITIONAL: {"url": "http://a.test/", "meta": stored}}, ETag='"1"'))
    files.close()
    revisit = records(files.finished[0])[1]
    assert revisit["type"] == "revisit" and revisit["status"] == "200 OK"  # the stored version's, for replay
    assert revisit["warc"][warc.ANSWER_FIELD] == "HTTP/1.1 304 Not Modified"
    assert revisit["http"]["Content-Length"] == str(len(b"<p>v1</p>")) and revisit["http"]["Etag"] == '"1"'
    assert revisit["warc"]["WARC-Profile"].endswith("/revisit/server-not-modified")
    assert revisit["warc"]["WARC-Refers-To-Date"] == warc_date(T0)
    assert revisit["warc"]["WARC-Payload-Digest"] == warc.warc_digest(hashlib.sha256(b"<p>v1</p>").digest())


def test_archive_files_rotate_by_size_and_are_renamed_when_finished(tmp_path):
    files = WarcFiles(tmp_path, 2000, "worker/1")
    for n in range(6):
        files.write(exchange(f"http://a.test/{n}", page(text=base64.b64encode(os.urandom(2000)).decode())))
        assert len(list(tmp_path.glob("*.open"))) == 1  # the file being written is never a finished name
    files.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 6 and not any(n.endswith(".open") for n in names)
    assert all(n.startswith("WEBRACE-") and n.endswith("-worker_1.warc.gz") for n in names)
    assert [n.split("-")[2] for n in names] == [f"{i:05d}" for i in range(1, 7)]
    for path in tmp_path.iterdir():
        assert [r["type"] for r in records(path)] == ["warcinfo", "response", "request"]


def test_a_failed_archive_write_keeps_only_whole_records(tmp_path):
    """A file-size limit (RLIMIT_FSIZE) makes the disk "full" for a subprocess: the write that
    fails leaves the file cut back to its last whole record, closed under its final name."""
    script = textwrap.dedent(f"""
        import resource, signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_warc import exchange, page
        from webrace.archive import WarcFiles
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
        files, n = WarcFiles(Path({str(tmp_path)!r}), 1 << 30, "w"), 0
        try:
            while n < 1000:
                files.write(exchange(f"http://a.test/{{n}}", page(text=str(n) * 900)))
                n += 1
        except OSError as exc:
            print(n, exc.errno)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    written, errno_name = done.stdout.split()
    assert done.returncode == 0 and int(errno_name) == errno.EFBIG, done.stderr
    [path] = list(tmp_path.iterdir())
    assert path.suffix == ".gz" and 0 < path.stat().st_size <= 20_000
    assert [r["type"] for r in records(path)] == ["warcinfo"] + ["response", "request"] * int(written)
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", str(path)], capture_output=True, timeout=60)
    assert check.returncode == 0


# -- with other tools: wget's archives in, pywb's replay out ------------------------------


@pytest.mark.skipif(shutil.which("wget") is None, reason="wget not installed (apt-get install wget; .ci/run does)")
def test_wget_archive_import_then_recrawl_sends_only_conditional_requests_archived_as_revisits(
        site, project, tmp_path):
    site.validators = True
    site.html("/", ["/a.html", "/b.html"])
    site.html("/a.html", ["/c.html", "/"])
    site.html("/b.html", ["/d/"])
    site.html("/c.html")
    site.html("/d/", ["../a.html"])
    warc_base = tmp_path / "site"
    got = subprocess.run(["wget", "--quiet", "--recursive", "--level=5", "--no-parent", f"--warc-file={warc_base}",
                          "--directory-prefix", str(tmp_path / "mirror"), site.url("/")],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    imported = project.scrapy("store", "import", "--warc", f"{warc_base}.warc.gz")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith("Imported 5 response(s) from 1 file(s): 5 new version(s)")
    site.clear_hits()
    project.add_urds(urd("w", "alice", site.url("/"), depth=5))
    archive = tmp_path / "crawl-warcs"
    run = project.crawl(WEBRACE_STORE_WARC=archive)
    assert run.returncode == 0, run.stderr[-3000:]
    pages_hit = [h for h in site.hits if h.path != "/robots.txt"]
    assert sorted(h.path for h in pages_hit) == ["/", "/a.html", "/b.html", "/c.html", "/d/"]
    assert all(h.headers.get("If-None-Match") or h.headers.get("If-Modified-Since") for h in pages_hit)
    assert set(site.statuses().values()) == {304}
    assert run.stat("recrawl/first_fetch") == 0 and run.stat("recrawl/not_modified") == 5
    # the crawl's own archive (WEBRACE_STORE_WARC): a revisit of each stored version, with the request sent
    [written] = list(archive.iterdir())
    assert written.name.startswith("WEBRACE-") and written.name.endswith(".warc.gz")
    recs = records(written)
    revisits = {r["warc"]["WARC-Target-URI"]: r for r in recs if r["type"] == "revisit"}
    assert sorted(revisits) == sorted(site.url(p) for p in ("/", "/a.html", "/b.html", "/c.html", "/d/"))
    with open_object_cache(make_settings(project.data)) as stored:
        for url, rec in revisits.items():
            version = stored.versions(url)[-1]
            assert rec["warc"]["WARC-Refers-To-Date"] == warc_date(version.fetched)
            assert rec["warc"]["WARC-Payload-Digest"] == warc.warc_digest(bytes.fromhex(version.digest))
    requests = [r for r in recs if r["type"] == "request" and r["warc"]["WARC-Target-URI"] in revisits]
    assert len(requests) == 5 and all("If-None-Match" in r["http"] for r in requests)
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", str(written)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout


def pywb_bin() -> Path | None:
    """Where pywb's commands are: WEBRACE_PYWB (a directory), else PATH. pywb pins redis 2.x
    and so lives in a virtualenv of its own (.ci/run makes one)."""
    if os.environ.get("WEBRACE_PYWB"):
        return Path(os.environ["WEBRACE_PYWB"])
    found = shutil.which("wayback")
    return Path(found).parent if found and shutil.which("wb-manager") else None


needs_pywb = pytest.mark.skipif(
    pywb_bin() is None, reason="pywb not found: it pins redis 2.x, so it needs a virtualenv of its own: "
    "python -m venv V && V/bin/pip install pywb && export WEBRACE_PYWB=V/bin (.ci/run does)")


@contextlib.contextmanager
def pywb(root: Path, collections: dict[str, list[Path]]) -> Iterator[str]:
    """pywb's own `wayback` serving these WARCs, one collection each (``wb-manager init/add``),
    on 127.0.0.1: yields its base URL; killed at the end."""
    bin_dir = pywb_bin()
    root.mkdir()
    for name, paths in collections.items():
        for args in (["init", name], ["add", name, *map(str, paths)]):
            made = subprocess.run([str(bin_dir / "wb-manager"), *args], cwd=root, capture_output=True, text=True,
                                  timeout=120)
            assert made.returncode == 0, made.stderr
    port = _free_port()
    server = subprocess.Popen([str(bin_dir / "wayback"), "-p", str(port), "-b", "127.0.0.1", "-d", str(root)],
                              cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, server)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait(timeout=30)


def replayed(base: str, collection: str, url: str, stamp: str = "") -> tuple[int, bytes]:
    """What pywb serves for ``url`` at capture ``stamp`` (14 digits; empty: the newest),
    unrewritten (``id_``), redirects to the capture's own time followed."""
    try:
        with urllib.request.urlopen(f"{base}/{collection}/{stamp}id_/{url}", timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wayback_stamp(ms: int) -> str:
    return warc_date(ms).replace("-", "").replace("T", "").replace(":", "")[:14]


@needs_pywb
def test_exported_warc_replays_in_pywb(cache, tmp_path):
    url = "http://a.test/page.html"
    first = fetch(cache, url, page(["/other.html"], text="first édition"), T0, etag='"1"',
                  header=HTML + "\nContent-Encoding: gzip\nTransfer-Encoding: chunked")
    cache.record_not_modified(first.meta, T0 + 60_000, None, None, 'HTTP/1.1 304 Not Modified\nEtag: "1"')
    fetch(cache, url, page(text="second"), T0 + 120_000)
    out = tmp_path / "out.warc.gz"
    export(cache, out)
    with pywb(tmp_path / "pywb", {"webrace": [out]}) as base:
        for version in cache.versions(url):
            assert replayed(base, "webrace", url, wayback_stamp(version.fetched)) == (
                200, cache.get(url, version.number)[1])


@needs_pywb
def test_a_crawl_with_unchanged_recrawls_browses_in_pywb_at_every_capture_the_newest_included(
        project, tmp_path, nginx):
    """Issue 47: users browse an archive by URL, and its newest capture of an unchanged page is a
    revisit of a 304. pywb serves a revisit's own status and headers over the original's payload
    (a 3xx, 304 included, with no body): the revisit must carry the confirmed response's."""
    server = nginx
    server.extra = GZIP_CONF
    pages = gzip_site(server.root)
    (server.root / "plain.txt").write_bytes(b"not gzipped\n" * 3)
    pages["/plain.txt"] = (server.root / "plain.txt").read_bytes()
    (server.root / "index.html").write_text(page(["/a.html", "/static/s.html", "/plain.txt"], "index").decode())
    pages["/index.html"] = (server.root / "index.html").read_bytes()
    server.start()
    project.add_urds(urd("g", "alice", server.url("/index.html"), depth=2))
    archive = tmp_path / "crawl-warcs"
    for _ in range(2):  # a first crawl, then a re-crawl answered 304 throughout
        run = project.crawl(WEBRACE_STORE_WARC=archive)
        assert run.returncode == 0, run.stderr[-3000:]
        project.make_due()
    assert run.stat("recrawl/not_modified") == len(pages)
    out = tmp_path / "export.warc.gz"
    exported = project.scrapy("store", "export", "--warc", str(out))
    assert exported.returncode == 0, exported.stderr
    collections = {"export": [out], "crawl": sorted(archive.iterdir())}
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *map(str, [p for ps in collections.values()
                                                                                   for p in ps])],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout
    with pywb(tmp_path / "pywb", collections) as base:
        for name, paths in collections.items():
            captures = [(r["warc"]["WARC-Target-URI"], r["warc"]["WARC-Date"], r["type"])
                        for path in paths for r in records(path) if r["type"] in ("response", "revisit")
                        and urlsplit(r["warc"]["WARC-Target-URI"]).path in pages]
            assert sorted(kind for _, _, kind in captures) == ["response"] * len(pages) + ["revisit"] * len(pages)
            for url in {u for u, _, _ in captures}:  # browsed by URL: the newest capture, a revisit
                assert replayed(base, name, url) == (200, pages[urlsplit(url).path]), (name, url)
            for url, date, _ in captures:  # and at every capture
                stamp = date.replace("-", "").replace("T", "").replace(":", "")[:14]
                assert replayed(base, name, url, stamp) == (200, pages[urlsplit(url).path]), (name, url, date)


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    """Until the server accepts connections (or has died, or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"pywb exited: {process.stderr.read().decode(errors='replace')[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("pywb did not start listening")



# -- a gzip-serving server: the wire's encoding and length recorded --------------------


def gzip_site(docroot: Path) -> dict[str, bytes]:
    """Pages nginx gzips as it sends them (chunked, no Content-Length) and one it sends
    pre-compressed (gzip_static: Content-Length of the .gz file): path -> the page's bytes."""
    words = " ".join(f"word{n}" for n in range(400))  # long enough for gzip to matter
    pages = {"/index.html": page(["/a.html", "/static/s.html"], words).decode(),
             "/a.html": page(["/index.html"], "a " + words).decode(),
             "/static/s.html": page([], "static " + words).decode()}
    found = {}
    for path, text in pages.items():
        target = docroot / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        found[path] = target.read_bytes()
    static = docroot / "static" / "s.html"
    (static.parent / "s.html.gz").write_bytes(gzip.compress(static.read_bytes()))
    return found


GZIP_CONF = "gzip on;\ngzip_min_length 1;\nlocation /static/ { gzip_static on; gzip off; }\n"


def test_every_record_of_a_gzip_served_page_names_the_wire_encoding_and_length(project, tmp_path, nginx):
    server = nginx
    server.extra = GZIP_CONF
    pages = gzip_site(server.root)
    static_size = (server.root / "static" / "s.html.gz").stat().st_size
    server.start()
    project.add_urds(urd("g", "alice", server.url("/index.html"), depth=2))
    archive = tmp_path / "crawl-warcs"
    run = project.crawl(WEBRACE_STORE_WARC=archive)
    assert run.returncode == 0, run.stderr[-3000:]
    answered = {hit.uri: hit for hit in server.hits() if hit.uri in pages}
    project.make_due()
    again = project.crawl(WEBRACE_STORE_WARC=archive)
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(answered) == sorted(pages) and {h.encoding for h in answered.values()} == {"gzip"}
    assert again.stat("recrawl/not_modified") == len(pages)
    out = tmp_path / "export.warc.gz"
    exported = project.scrapy("store", "export", "--warc", str(out))
    assert exported.returncode == 0, exported.stderr
    crawl_warcs = sorted(archive.iterdir())
    assert len(crawl_warcs) == 2  # one a crawl
    for paths in ([out], crawl_warcs):  # the export, and the crawl's own WARC files
        recs = [r for path in paths for r in records(path)
                if r["warc"].get("WARC-Target-URI") in {server.url(p) for p in pages}]
        responses = [r for r in recs if r["type"] == "response"]
        assert len(responses) == len(pages), paths
        for rec in responses:
            page_path = urlsplit(rec["warc"]["WARC-Target-URI"]).path
            assert rec["body"] == pages[page_path]
            assert rec["http"]["Content-Length"] == str(len(rec["body"]))
            assert rec["http"]["X-WebRACE-Orig-Content-Encoding"] == "gzip"
            assert not {"Content-Encoding", "Transfer-Encoding"} & set(rec["http"])
            wire = int(rec["http"]["X-WebRACE-Orig-Content-Length"])
            if page_path == "/static/s.html":  # sent with a Content-Length: the .gz file's
                assert wire == static_size
            else:  # chunked: the gzip bytes received (nginx's count adds the chunks' framing)
                assert 0 < wire <= answered[page_path].sent and wire < len(rec["body"])
        revisits = [r for r in recs if r["type"] == "revisit"]
        assert len(revisits) == len(pages), paths
        for rec in revisits:  # the confirmed response's headers (never Scrapy's "Content-Length: 0" of the 304)
            page_path = urlsplit(rec["warc"]["WARC-Target-URI"]).path
            assert rec["status"] == "200 OK" and rec["warc"][warc.ANSWER_FIELD] == "HTTP/1.1 304 Not Modified"
            assert rec["http"]["Content-Length"] == str(len(pages[page_path]))
            assert rec["http"]["X-WebRACE-Orig-Content-Encoding"] == "gzip"
        check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *map(str, paths)],
                               capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stdout
