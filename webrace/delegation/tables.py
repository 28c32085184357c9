"""IPMicra's input files: the crawlers (JSON), the latency table (CSV ``crawler,ip,ms``) and the
URLs (one a line), read with a message naming the file and line for any error (pure, no Scrapy)."""

from __future__ import annotations

import csv
import json
import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from typing import IO, Any
from urllib.parse import urlsplit

from webrace.delegation.delegator import Crawler, DelegationError
from webrace.delegation.hierarchy import IPAddress, target_ip
from webrace.delegation.rir import EXCERPT, excerpt
from webrace.userfiles import UserFileTooLarge, open_bounded, open_bounded_text, read_bounded

# the longest round trip the table may hold: ten minutes; more is a typo or a wrong unit, not a
# measurement (``inf``, spelt so, is "unreachable")
MAX_MS = 600_000.0
# characters no URL holds, among them the line ends str.splitlines() knows beyond "\n" and "\r"
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class InputError(ValueError):
    """A problem with one of the command's input files."""


def read_crawlers(path: str) -> list[Any]:
    try:
        data = json.loads(read_bounded(path).decode("utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UserFileTooLarge as exc:
        raise InputError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 (byte {exc.object[exc.start]:#04x} at offset {exc.start})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply for a list of crawlers") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: expected a non-empty JSON list of {{\"id\", \"ip\", \"capacity\"}}")
    crawlers, seen = [], set()
    for n, entry in enumerate(data):
        if not isinstance(entry, dict) or not {"id", "ip"} <= set(entry):
            raise InputError(f"{path}: crawler #{n + 1}: needs \"id\" and \"ip\"")
        capacity = entry.get("capacity")
        if capacity is not None and (not isinstance(capacity, int) or isinstance(capacity, bool)):
            raise InputError(f"{path}: crawler {entry['id']!r}: capacity must be an integer or null")
        if str(entry["id"]) in seen:
            raise InputError(f"{path}: crawler {entry['id']!r} is listed twice")
        seen.add(str(entry["id"]))
        try:
            crawler = Crawler(str(entry["id"]), entry["ip"], capacity)
        except DelegationError as exc:
            raise InputError(f"{path}: {exc}") from None
        if getattr(crawler.ip, "scope_id", None):  # a link-local zone: no subnet holds it
            raise InputError(f"{path}: crawler {crawler.id!r}: {crawler.ip} has a scope id: give a global address")
        crawlers.append(crawler)
    return crawlers


def read_urls(path: str) -> tuple[list[tuple[int, str, IPAddress]], list[tuple[int, str]]]:
    """The URLs of ``path`` as (line number, URL, IP), and (line number, message) for each line
    skipped: one that is not an http(s) URL with an IP literal host and a valid port. Blank
    lines and ``#`` comments are passed over."""
    urls, skipped = [], []
    for number, line in enumerate(read_lines(path), 1):
        url = line.strip(" \t")
        if not line.strip() or url.startswith("#"):
            continue
        try:
            urls.append((number, url, url_ip(url)))
        except ValueError as exc:
            message = str(exc)
            cut = message if len(message) <= 2 * EXCERPT else f"{message[:2 * EXCERPT]}..."
            skipped.append((number, f"{path}:{number}: skipped: {cut}"))
    return urls, skipped


def url_ip(url: str) -> IPAddress:
    """The IP of a URL a crawler can fetch: http or https, its port (if any) 1 to 65535, its
    host an IP literal with no scope id. ``ValueError`` saying why otherwise."""
    control = _CONTROL.search(url)
    if control:
        raise ValueError(f"{excerpt(url)} holds the control character {control.group()!r}")
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError out of 0-65535
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535"...
        raise ValueError(f"{excerpt(url)}: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"{excerpt(url)} is not an http or https URL")
    if port == 0:
        raise ValueError(f"{excerpt(url)}: port 0 is no port to fetch from")
    ip = target_ip(url)
    if getattr(ip, "scope_id", None):
        raise ValueError(f"{excerpt(url)}: {ip} has a scope id (a link-local zone), not a global address")
    return ip


def read_lines(path: str) -> list[str]:
    """The lines of a UTF-8 file, ended by "\\n" or "\\r\\n" only (str.splitlines() also ends one
    at U+2028, \\x0b, \\x1c, \\x85...: a URL holding one would be cut in two)."""
    try:
        with open_bounded_text(path, encoding="utf-8", newline="") as handle:
            text = handle.read()
    except UserFileTooLarge as exc:
        raise InputError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return [line.removesuffix("\r") for line in text.split("\n")]


def read_latency(path: str, ips: Collection[IPAddress] | None = None,
                 crawlers: Collection[str] | None = None) -> list[tuple[str, IPAddress, float]]:
    """The rows (crawler, ip, ms) of a latency table, each pair once. With ``ips`` and
    ``crawlers``, only the rows to those addresses from those crawlers are kept (every row is
    still checked): the table costs memory by the rows a run can read, not by its size. A pair
    kept twice with two values is an error naming both lines (the same value twice is fine)."""
    kept: dict[tuple[str, IPAddress], tuple[float, int]] = {}
    for number, crawler, ip, ms in _latency_rows(path):
        if (ips is not None and ip not in ips) or (crawlers is not None and crawler not in crawlers):
            continue
        first_ms, first_line = kept.setdefault((crawler, ip), (ms, number))
        if first_ms != ms:
            raise InputError(f"{path}:{number}: crawler {crawler!r} to {ip} is {ms:g} ms here and {first_ms:g} ms "
                             f"at line {first_line}: keep one")
    return [(crawler, ip, ms) for (crawler, ip), (ms, _) in kept.items()]


def unreachable(rows: Iterable[tuple[str, IPAddress, float]], crawlers: Collection[str]) -> set[IPAddress]:
    """The addresses every one of ``crawlers`` has as unreachable (``inf``) in ``rows`` (each
    (crawler, ip) pair once, as :func:`read_latency` gives them)."""
    dead = Counter(ip for crawler, ip, ms in rows if ms == math.inf and crawler in crawlers)
    return {ip for ip, count in dead.items() if count == len(crawlers)}


def _latency_rows(path: str) -> Iterator[tuple[int, str, IPAddress, float]]:
    try:
        handle = open_bounded(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(_utf8_lines(handle, path))
        try:
            header = next(reader, None)
            if [h.strip() for h in header or []] != ["crawler", "ip", "ms"]:
                raise InputError(f"{path}:1: the header must be crawler,ip,ms")
            for row in reader:
                if row and "".join(row).strip():
                    yield (reader.line_num, *_latency_row(row, f"{path}:{reader.line_num}"))
        except csv.Error as exc:  # a field over csv.field_size_limit(), a stray "\r"...
            raise InputError(f"{path}:{reader.line_num}: {exc}") from None
        except UserFileTooLarge as exc:
            raise InputError(str(exc)) from None


def _utf8_lines(handle: IO[bytes], path: str) -> Iterator[str]:
    """The lines of a binary file decoded one by one, so that a byte that is not UTF-8 is
    reported with its line."""
    for number, raw in enumerate(handle, 1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}:{number}: not UTF-8 (byte {raw[exc.start]:#04x})") from None


def _latency_row(row: list[str], where: str) -> tuple[str, IPAddress, float]:
    if len(row) != 3:
        raise InputError(f"{where}: expected 3 fields, got {len(row)}")
    crawler, ip_text, ms_text = (field.strip() for field in row)
    try:
        ip = target_ip(ip_text)
    except ValueError:
        raise InputError(f"{where}: ip {excerpt(ip_text)} is not an IP address") from None
    try:
        ms = float(row[2])
    except ValueError:
        raise InputError(f"{where}: ms {excerpt(row[2])} is not a number") from None
    if ms < 0 or ms != ms:
        raise InputError(f"{where}: ms must be a non-negative number")
    if ms > MAX_MS and ms_text.lower().lstrip("+") not in ("inf", "infinity"):
        raise InputError(f"{where}: ms {excerpt(ms_text)} is over {MAX_MS:.0f} (ten minutes; inf: unreachable)")
    return crawler, ip, ms
