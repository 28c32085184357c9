"""IPMicra's input tables: the crawlers (JSON) and the latency table (CSV ``crawler,ip,ms``),
read with a message naming the file and line for any error (pure, no Scrapy)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from webrace.delegation.delegator import Crawler, DelegationError


class InputError(ValueError):
    """A problem with one of the command's input files."""


def read_crawlers(path: str) -> list[Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
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
            crawlers.append(Crawler(str(entry["id"]), entry["ip"], capacity))
        except DelegationError as exc:
            raise InputError(f"{path}: {exc}") from None
    return crawlers


def read_latency(path: str) -> list[tuple[str, str, float]]:
    try:
        handle = open(path, encoding="utf-8", newline="")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    rows = []
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if [h.strip() for h in header or []] != ["crawler", "ip", "ms"]:
            raise InputError(f"{path}:1: the header must be crawler,ip,ms")
        for row in reader:
            if not row or not "".join(row).strip():
                continue
            if len(row) != 3:
                raise InputError(f"{path}:{reader.line_num}: expected 3 fields, got {len(row)}")
            try:
                ms = float(row[2])
            except ValueError:
                raise InputError(f"{path}:{reader.line_num}: ms {row[2]!r} is not a number") from None
            if ms < 0 or ms != ms:
                raise InputError(f"{path}:{reader.line_num}: ms must be a non-negative number")
            rows.append((row[0].strip(), row[1].strip(), ms))
    return rows
