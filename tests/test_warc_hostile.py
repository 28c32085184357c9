"""WARC import (webrace/store/warc.py, `scrapy store import --warc`) against hostile or broken
files (issue 42): URLs with credentials, records that would drive the terminal, cut gzip
trailers, and inputs that never end or never end a line."""

from __future__ import annotations

import gzip
import os
import tracemalloc

import pytest
from test_warc import T0, do_import, make_settings, page, raw_response, three_pages, write_raw_warc

from webrace.backends import open_object_cache
from webrace.store.warc import MAX_BAD_PLACES, RECORD_HEADER_LIMIT, START_BYTES

ESC = "\x1b"


@pytest.fixture
def other(tmp_path):
    with open_object_cache(make_settings(tmp_path / "other")) as c:
        yield c


def html(text: str = "") -> bytes:
    return raw_response(page(text=text), "Content-Type: text/html")


def record(warc_type: str, date: str = "2024-01-01T00:00:00Z", uri: str = "http://a.test/", body: bytes = b"") -> bytes:
    head = (f"WARC/1.0\r\nWARC-Type: {warc_type}\r\nWARC-Target-URI: {uri}\r\nWARC-Date: {date}\r\n"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode("utf-8", "surrogateescape") + body + b"\r\n\r\n"


# -- credentials -----------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://user:s3cret@a.test/", "http://s3cret@a.test/", "https://u:s3cret@a.test:8443/",
                                 "http://u:s3cret\t@a.test/"])
def test_a_record_whose_url_has_credentials_is_skipped_and_counted_as_a_urd_is_refused(other, tmp_path, url):
    write_raw_warc(tmp_path / "in.warc.gz", [(url, T0, html("secret")), ("http://b.test/", T0, html("fine"))])
    report = do_import(other, tmp_path / "in.warc.gz")
    assert report.skipped == {"URL with credentials": 1} and report.bad == []
    assert other.index.urls() == ["http://b.test/"]
    assert "s3cret" not in repr(report)


# -- what is quoted from a record is printable ----------------------------------------------


def test_no_message_echoes_a_records_control_characters(project, tmp_path):
    path = tmp_path / "evil.warc"
    path.write_bytes(record(f"{ESC}]0;owned{ESC}\\{ESC}[2J") + record("response", date=f"{ESC}[31m2024", body=html())
                     + f"{ESC}[2J{ESC}[31mgarbage\r\n\r\n".encode() + record("response", body=html("fine")))
    done = project.scrapy("store", "import", "--warc", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert ESC not in done.stdout + done.stderr
    bad = [line.split(": ", 2)[2] for line in done.stderr.splitlines()]
    assert bad == [r"bad WARC-Date '\x1b[31m2024'",
                   r"ArchiveLoadFailed: Invalid WARC record, first line: \x1b[2J\x1b[31mgarbage"]
    assert "skipped: unknown record type 1; bad: 2" in done.stdout and done.stdout.startswith("Imported 1 response(s)")


def test_a_skip_reason_from_a_record_is_printable_and_short(other, tmp_path):
    encoding = f"x{ESC}[2J" + "y" * 500
    raw = raw_response(b"zzz", "Content-Type: text/html", f"Content-Encoding: {encoding}")
    write_raw_warc(tmp_path / "in.warc.gz", [("http://a.test/", T0, raw)])
    (reason,) = do_import(other, tmp_path / "in.warc.gz").skipped
    assert reason.isprintable() and len(reason) < 100 and reason.startswith(r"content-encoding x\x1b[2j")


# -- cut gzip members ------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [8, 4], ids=["CRC-32 and length", "length"])
def test_a_last_gzip_member_cut_before_its_trailer_is_kept_and_named_damaged(other, tmp_path, cut):
    path = tmp_path / "in.warc.gz"
    offsets = three_pages(path)
    path.write_bytes(path.read_bytes()[:-cut])
    report = do_import(other, path)
    assert report.bad == [] and report.new_versions == 3
    assert [(d.offset, "CRC-32" in d.reason) for d in report.damaged] == [(offsets[2], True)]


def test_a_gzip_member_with_a_wrong_crc_is_named_bad_in_plain_words_and_the_rest_imported(other, tmp_path):
    path = tmp_path / "in.warc.gz"
    offsets = three_pages(path)
    data = bytearray(path.read_bytes())
    data[offsets[2] - 8] ^= 0xFF  # the second member's CRC-32
    path.write_bytes(bytes(data))
    report = do_import(other, path)
    assert sorted(other.index.urls()) == ["http://a.test/0", "http://a.test/2"]
    assert [(b.offset, b.reason) for b in report.bad] == [
        (offsets[1], "its gzip member's CRC-32 or length does not match its data: the member is damaged")]


def test_the_import_command_reports_a_cut_trailer_in_one_line_and_exits_1(project, tmp_path):
    path = tmp_path / "in.warc.gz"
    offsets = three_pages(path)
    path.write_bytes(path.read_bytes()[:-8])
    done = project.scrapy("store", "import", "--warc", str(path))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"damaged: {path}:{offsets[2]}: its gzip member ends before the CRC-32 and "
                                        "length that close it (the file is cut short there): the record was read whole "
                                        "and is kept"]
    assert done.stdout.startswith("Imported 3 response(s)") and "damaged (kept): 1" in done.stdout


# -- bounded time and memory -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO"])
def test_an_input_that_is_not_a_regular_file_is_one_bad_line(project, tmp_path, kind):
    path = "/dev/zero"
    if kind == "a FIFO":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)  # opened to read, it would wait for a writer forever
    done = project.scrapy("store", "import", "--warc", path, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"bad: {path}:0: not a regular file: a WARC file is read from offsets, twice"]


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
def test_a_file_of_zeros_is_refused_from_its_first_bytes(other, tmp_path, compress):
    path = tmp_path / "zeros.warc"
    if compress:
        path.write_bytes(gzip.compress(bytes(4 << 20)))
    else:
        with open(path, "wb") as fh:
            fh.truncate(256 << 20)  # sparse: costs no disk
    report = do_import(other, path)
    assert [(b.offset, b.reason) for b in report.bad] == [(0, (
        f"not a WARC file: it does not start with a WARC record header (WARC/1.0, WARC/1.1) within "
        f"{START_BYTES // 1024} KiB"))]


@pytest.mark.parametrize("line", [b"X-A: " + b"a" * (16 << 20), b"X-A: b\r\n" * (2 << 20)],
                         ids=["one endless line", "endless lines"])
def test_a_record_header_that_never_ends_is_refused_in_bounded_memory(other, tmp_path, line):
    path = tmp_path / "in.warc"
    path.write_bytes(b"WARC/1.0\r\nWARC-Type: response\r\n" + line)
    tracemalloc.start()
    try:
        report = do_import(other, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(b.offset, b.reason) for b in report.bad] == [
        (0, f"record header over {RECORD_HEADER_LIMIT // 1024} KiB (no blank line ends it)")]
    assert peak < 4 << 20  # the header is 16 MiB; what is held is a bounded part of it


def test_a_file_of_damaged_records_is_given_up_after_a_bounded_number_of_places(other, tmp_path):
    path = tmp_path / "in.warc"
    path.write_bytes(record("response", body=html("first")) + b"\nWARC/ not a record\r\n\r\n" * 100_000)
    report = do_import(other, path)
    assert other.index.urls() == ["http://a.test/"]
    assert report.bad[-1].reason == f"more than {MAX_BAD_PLACES:,} damaged places: the rest of the file is not read"
    assert len(report.bad) <= MAX_BAD_PLACES + 1


def test_a_body_of_many_chunks_is_no_header_however_many_chunk_lines(other, tmp_path):
    body = page(text="chunked " * 20_000)
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 4]), body[i:i + 4]) for i in range(0, len(body), 4))
    raw = raw_response(chunked + b"0\r\n\r\n", "Content-Type: text/html", "Transfer-Encoding: chunked")
    assert len(chunked) > 2 * RECORD_HEADER_LIMIT
    write_raw_warc(tmp_path / "in.warc.gz", [("http://a.test/", T0, raw)])
    report = do_import(other, tmp_path / "in.warc.gz")
    assert report.bad == [] and other.get("http://a.test/")[1] == body
