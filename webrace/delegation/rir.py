"""Regional Internet Registry "delegated-extended" files (seed 002, section III.B/D).

One record a line, ``registry|cc|type|start|value|date|status|opaque-id[|extensions]``:

- the version line (``2|ripencc|20240101|...``), comment lines (``#``) and summary lines
  (``ripencc|*|ipv4|*|123|summary``) carry no allocation and are skipped;
- ``asn`` records are skipped (the hierarchy is of addresses), and so are ``available`` and
  ``reserved`` records: they are free space, not a subnet some organisation holds;
- an IPv4 ``value`` is an address *count*, not necessarily a power of two, so one record can
  be several CIDR blocks (768 addresses from 10.0.0.0 are 10.0.0.0/23 and 10.0.2.0/24);
- an IPv6 ``value`` is a prefix length;
- records sharing an opaque-id in one file belong to one organisation. The organisation key
  is ``registry:opaque-id``; plain (non-extended) files have no opaque-id and give ``None``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from webrace.userfiles import UserFileTooLarge, open_bounded_text

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SKIPPED_STATUSES = frozenset({"available", "reserved"})
EXCERPT = 200  # characters of a bad line or field an error message quotes


class RirError(ValueError):
    """A delegated file that cannot be read or a record that is not in the format."""


@dataclass(frozen=True)
class Allocation:
    """One address record: the CIDR blocks it covers and the organisation holding them."""

    registry: str
    cc: str
    networks: tuple[IPNetwork, ...]
    org: str | None
    status: str
    date: str


def parse_rir(source: str | os.PathLike | Iterable[str]) -> list[Allocation]:
    """The address allocations of a delegated(-extended) file: a path (``str`` or
    ``PathLike``) or an iterable of its lines (``text.splitlines()``)."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            with open_bounded_text(path, encoding="utf-8", errors="replace") as lines:
                return list(_allocations(lines, str(path)))
        except OSError as exc:
            raise RirError(f"cannot read RIR file {path}: {exc.strerror or exc}") from None
        except UserFileTooLarge as exc:
            raise RirError(f"cannot read RIR file {exc}") from None
    return list(_allocations(source, "<lines>"))


def _allocations(lines: Iterable[str], name: str) -> Iterator[Allocation]:
    seen_header = False
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split("|")
        if not seen_header and _is_version_line(fields):
            seen_header = True
            continue
        seen_header = True
        if len(fields) >= 6 and fields[5] == "summary":
            continue
        if len(fields) < 7:
            raise RirError(f"{name}:{number}: expected registry|cc|type|start|value|date|status[|opaque-id], "
                           f"got {excerpt(line)}")
        registry, cc, kind, start, value, date, status = fields[:7]
        if kind == "asn" or status in SKIPPED_STATUSES:
            continue
        if kind not in ("ipv4", "ipv6"):
            raise RirError(f"{name}:{number}: record type {excerpt(kind)} is none of ipv4, ipv6, asn")
        opaque = fields[7] if len(fields) > 7 else ""
        yield Allocation(registry=registry, cc=cc, networks=_networks(kind, start, value, f"{name}:{number}"),
                         org=f"{registry}:{opaque}" if opaque else None, status=status, date=date)


def _is_version_line(fields: list[str]) -> bool:
    """``version|registry|serial|records|startdate|enddate|UTCoffset``: a numeric version
    (``2`` or ``2.3``) in the first field, where a record has its registry name."""
    return len(fields) >= 4 and fields[0].replace(".", "", 1).isdigit()


def _networks(kind: str, start: str, value: str, where: str) -> tuple[IPNetwork, ...]:
    try:
        if kind == "ipv4":
            first = ipaddress.IPv4Address(start)
            count = int(value)
            if count < 1 or int(first) + count - 1 > int(ipaddress.IPv4Address("255.255.255.255")):
                raise ValueError(f"{count} addresses from {first} is not a range of IPv4 addresses")
            return tuple(ipaddress.summarize_address_range(first, first + (count - 1)))
        return (ipaddress.IPv6Network(f"{start}/{int(value)}"),)
    except ValueError as exc:
        raise RirError(f"{where}: bad {kind} record start={excerpt(start)} value={excerpt(value)}: "
                       f"{str(exc)[:EXCERPT]}") from None


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """``text`` quoted, cut to ``limit`` characters: a huge bad line is not echoed whole."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text):,} characters)"
