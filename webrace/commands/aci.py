"""``scrapy aci list | feed | ack --owner NAME``: read an owner's ACIs, mark them delivered."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.backends import open_aci_store
from webrace.backends.errors import RedisUnavailable
from webrace.commands import ends_quietly_on_closed_pipe
from webrace.urd import MAX_TIME_MS

if TYPE_CHECKING:
    from webrace.records.aci import Aci

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_since(text: str, now_ms: int) -> int:
    """Epoch ms from ``--since``: a duration back from now (``90m``, ``24h``, ``7d``), an
    ISO 8601 date or time (UTC unless it says otherwise), or epoch milliseconds."""
    text = text.strip()
    if len(text) > 40:  # no date, duration or epoch ms is longer; int() of 5,000 digits raises
        raise UsageError(f"--since {text[:40]!r}...: expected a duration (24h, 7d), an ISO 8601 date/time "
                         "or epoch milliseconds")
    if m := _DURATION.fullmatch(text):
        return max(now_ms - int(min(float(m.group(1)) * _UNIT_MS[m.group(2)], now_ms)), 0)
    if text.isdigit():
        return min(int(text), MAX_TIME_MS)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {text!r}: expected a duration (24h, 7d), an ISO 8601 date/time "
                         "or epoch milliseconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def as_dict(aci: Aci) -> dict[str, Any]:
    return dataclasses.asdict(aci)


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: listed, printed or acknowledged (an owner without ACIs included); 1: `ack` of an id the owner "
        "has no ACI with (the others are acknowledged)"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("list --owner NAME [--since T] [--min-relevance R] [--format table|jsonl|xml] | "
                "feed --owner NAME [--since T] | ack --owner NAME (--all | ID...)")

    def short_desc(self) -> str:
        return "An owner's ACIs: list them, print them as an Atom feed, acknowledge them"

    def long_desc(self) -> str:
        return (
            "list: the owner's ACIs, newest first (table; jsonl: one JSON object per ACI with its fields; "
            "xml: an <acis> document valid against webrace/schemas/aci.xsd). "
            "feed: the same as an Atom 1.0 feed on stdout. "
            "ack: mark ACIs delivered (by id, or --all); `scrapy store gc` may then drop the versions they "
            "point to. --since T: a duration back from now (24h, 7d), an ISO 8601 date/time or epoch ms."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--owner", metavar="NAME", help="whose ACIs (required)")
        parser.add_argument("--since", metavar="T", help="only ACIs updated at or after T")
        parser.add_argument("--min-relevance", type=float, default=0.0, metavar="R",
                            help="only ACIs at least this relevant")
        parser.add_argument("--format", choices=("table", "jsonl", "xml"), default="table",
                            help="output of `list` (default: table)")
        parser.add_argument("--all", action="store_true", help="with `ack`: every ACI of the owner")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from lxml import etree

        from webrace.annotation.feed import atom_feed
        from webrace.names import canonical_owner
        from webrace.urd import now_millis

        if not args:
            raise UsageError("missing subcommand: list, feed or ack")
        action, rest = args[0], args[1:]
        if action not in ("list", "feed", "ack"):
            raise UsageError(f"unknown subcommand {action!r}: expected list, feed or ack")
        if not opts.owner:
            raise UsageError(f"`{action}` needs --owner NAME")
        opts.owner = canonical_owner(opts.owner) or opts.owner  # as the stores hold it: Alice's are alice's
        now = now_millis()
        since = parse_since(opts.since, now) if opts.since else 0
        try:
            store = open_aci_store(self.settings)
        except RedisUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        with store:
            if action == "ack":
                if opts.all == bool(rest):
                    raise UsageError("`ack` takes ACI ids or --all (not both)")
                known = {aci.id for aci in store.list(opts.owner)}
                done = store.ack(opts.owner, None if opts.all else rest)
                print(f"Acknowledged {done} ACI(s) of {opts.owner}")
                unknown = [i for i in rest if i not in known]
                if unknown:
                    print(f"error: {opts.owner} has no ACI with id {', '.join(unknown)} (see `scrapy aci list`)",
                          file=sys.stderr)
                    self.exitcode = 1
                return
            if rest:
                raise UsageError(f"`{action}` takes no arguments")
            acis = store.list(opts.owner, since, opts.min_relevance)
        if action == "feed":
            sys.stdout.buffer.write(atom_feed(opts.owner, acis, now_ms=now))
            sys.stdout.flush()
        elif opts.format == "jsonl":
            for aci in acis:
                print(json.dumps(as_dict(aci), ensure_ascii=False))
        elif opts.format == "xml":
            root = etree.Element("acis")
            for aci in acis:
                root.append(etree.fromstring(aci.to_xml()))
            print(etree.tostring(root, encoding="unicode", pretty_print=True), end="")
        else:
            self.table(opts.owner, acis)

    def table(self, owner: str, acis: list[Aci]) -> None:
        from webrace.annotation.feed import rfc3339

        if not acis:
            print(f"No ACI for {owner}", file=sys.stderr)
            return
        print(f"{'UPDATED':<20} {'RELEVANCE':>9} {'URGENT':<6} {'VERSION':>7} {'ID':<28} URL")
        for a in acis:
            print(f"{rfc3339(a.updatetime):<20} {a.relevance:>9g} {'yes' if a.urgent else '':<6} {a.version:>7} "
                  f"{a.id:<28} {a.uri}")
            if a.summary:
                print(f"{'':<20} {a.summary[:160]}")
