"""IPMicra's input files (webrace.delegation.tables): every bad input a one-line InputError
naming the file and line, or a counted skip; the latency table keeps only the rows a run reads."""

from __future__ import annotations

import csv
import ipaddress
import json
import math

import pytest

from webrace.delegation.tables import InputError, read_crawlers, read_latency, read_urls, unreachable, url_ip

IP = ipaddress.ip_address


def latency_file(tmp_path, *rows: str, raw: bytes = b""):
    path = tmp_path / "latency.csv"
    path.write_bytes(("crawler,ip,ms\n" + "".join(row + "\n" for row in rows)).encode() + raw)
    return str(path)


@pytest.mark.parametrize("ip", ["999.1.1.1", "not-an-ip", "[2001:db8::2]", "023.066.190.033"])
def test_a_latency_row_with_a_malformed_ip_is_an_error_naming_its_line(tmp_path, ip):
    path = latency_file(tmp_path, "a,10.0.0.5,10", f"b,{ip},5")
    with pytest.raises(InputError, match=r"latency.csv:3: ip .* is not an IP address") as error:
        read_latency(path)
    assert ip in str(error.value) and "\n" not in str(error.value)


def test_a_latency_table_that_is_not_utf8_is_an_error_naming_its_line(tmp_path):
    path = latency_file(tmp_path, "a,10.0.0.5,10", raw="b,10.0.0.5,5 caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latency.csv:3: not UTF-8 \(byte 0xe9\)"):
        read_latency(path)


def test_a_latency_field_over_the_csv_limit_is_an_error_naming_its_line(tmp_path):
    path = latency_file(tmp_path, "a,10.0.0.5,10", f'b,"{"1" * (csv.field_size_limit() + 1)}",5')
    with pytest.raises(InputError, match=r"latency.csv:3: field larger than field limit"):
        read_latency(path)


@pytest.mark.parametrize("ms", ["600001", "1e308", "1e400"])
def test_a_latency_over_ten_minutes_is_an_error(tmp_path, ms):
    with pytest.raises(InputError, match=r"latency.csv:2: ms .* is over 600000"):
        read_latency(latency_file(tmp_path, f"a,10.0.0.5,{ms}"))


def test_a_latency_of_inf_stays_allowed_as_unreachable_and_ten_minutes_is_allowed(tmp_path):
    rows = read_latency(latency_file(tmp_path, "a,10.0.0.5,inf", "b,10.0.0.5,600000"))
    assert rows == [("a", IP("10.0.0.5"), math.inf), ("b", IP("10.0.0.5"), 600000.0)]


def test_a_pair_given_twice_with_two_values_is_an_error_naming_both_lines_and_the_same_value_twice_is_fine(tmp_path):
    path = latency_file(tmp_path, "a,10.0.0.5,10", "b,10.0.0.5,100", "a,10.0.0.5,1000")
    with pytest.raises(InputError, match=r"latency.csv:4: crawler 'a' to 10.0.0.5 is 1000 ms here and 10 ms at line 2"):
        read_latency(path)
    rows = read_latency(latency_file(tmp_path, "a,10.0.0.5,10", "a, 10.0.0.5 ,10.0"))
    assert rows == [("a", IP("10.0.0.5"), 10.0)]


def test_the_latency_table_keeps_only_rows_to_the_urls_addresses_from_registered_crawlers(tmp_path):
    # the rows nobody reads are still checked, but not kept: memory goes by the rows a run needs
    many = [f"a,10.{i >> 8}.{i & 255}.1,{i % 300}" for i in range(5000)]
    path = latency_file(tmp_path, *many, "a,192.0.2.1,7", "b,192.0.2.1,8", "zz,192.0.2.1,1")
    assert read_latency(path, ips={IP("192.0.2.1")}, crawlers={"a", "b"}) == [
        ("a", IP("192.0.2.1"), 7.0), ("b", IP("192.0.2.1"), 8.0)]
    bad = latency_file(tmp_path, *many, "a,192.0.2.1,7", "a,1.2.3.999,1")
    with pytest.raises(InputError, match="1.2.3.999"):
        read_latency(bad, ips={IP("192.0.2.1")}, crawlers={"a"})


def test_unreachable_gives_the_addresses_every_crawler_has_as_inf():
    rows = [("a", IP("10.0.0.5"), math.inf), ("b", IP("10.0.0.5"), math.inf),
            ("a", IP("10.0.0.6"), math.inf), ("b", IP("10.0.0.6"), 40.0), ("a", IP("10.0.0.7"), math.inf)]
    assert unreachable(rows, {"a", "b"}) == {IP("10.0.0.5")}  # 10.0.0.7: b has no row, so it is not known


@pytest.mark.parametrize("data", [b'[{"id": "caf\xe9", "ip": "10.0.0.1"}]', b"\xff\xfe[]"])
def test_a_crawlers_file_that_is_not_utf8_is_an_error(tmp_path, data):
    (tmp_path / "crawlers.json").write_bytes(data)
    with pytest.raises(InputError, match=r"crawlers.json: not UTF-8 \(byte 0x.. at offset \d+\)"):
        read_crawlers(str(tmp_path / "crawlers.json"))


@pytest.mark.parametrize("text", ["[" * 100_000, '[{"id": "a", "ip": "10.0.0.1", "x": ' + "[" * 100_000 + "]"],
                         ids=["list", "inside-a-crawler"])
def test_a_crawlers_file_nested_too_deeply_is_an_error(tmp_path, text):
    (tmp_path / "crawlers.json").write_text(text)
    with pytest.raises(InputError, match="nested too deeply"):
        read_crawlers(str(tmp_path / "crawlers.json"))


def test_a_crawler_ip_with_an_ipv6_scope_id_is_an_error(tmp_path):
    crawlers = [{"id": "a", "ip": "10.0.0.1"}, {"id": "b", "ip": "fe80::1%eth9"}]
    (tmp_path / "crawlers.json").write_text(json.dumps(crawlers))
    with pytest.raises(InputError, match=r"crawler 'b': fe80::1%eth9 has a scope id"):
        read_crawlers(str(tmp_path / "crawlers.json"))


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\r"])
def test_a_url_line_is_ended_by_newline_only_and_a_url_holding_another_separator_is_skipped(tmp_path, separator):
    (tmp_path / "urls.txt").write_text(f"http://10.0.0.5/a{separator}b\r\nhttp://10.0.0.6/\n", newline="")
    urls, skipped = read_urls(str(tmp_path / "urls.txt"))
    assert urls == [(2, "http://10.0.0.6/", IP("10.0.0.6"))]
    assert [number for number, _ in skipped] == [1] and "control character" in skipped[0][1]


@pytest.mark.parametrize("url", ["http://10.0.0.5:99999/", "http://10.0.0.5:0/", "http://10.0.0.5:x/",
                                 "foo://10.0.0.5/", "ftp://10.0.0.5/", "//10.0.0.5/", "10.0.0.5",
                                 "http://[fe80::1%25eth9]/", "http://[fe80::1%eth9]/"])
def test_a_url_no_crawler_can_fetch_is_skipped_and_counted(tmp_path, url):
    (tmp_path / "urls.txt").write_text(f"{url}\nhttps://10.0.0.6:8443/\n")
    urls, skipped = read_urls(str(tmp_path / "urls.txt"))
    assert urls == [(2, "https://10.0.0.6:8443/", IP("10.0.0.6"))]
    assert len(skipped) == 1 and skipped[0][1].startswith(f"{tmp_path / 'urls.txt'}:1: skipped: ")
    with pytest.raises(ValueError):
        url_ip(url)


def test_a_skipped_url_line_is_not_echoed_whole(tmp_path):
    (tmp_path / "urls.txt").write_text("http://example.org/" + "x" * 1_000_000 + "\n")
    _, [(_, message)] = read_urls(str(tmp_path / "urls.txt"))
    assert len(message) < 1000
