"""``scrapy urd add FILE... | list | remove ID...``: manage the URD-DB."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.backends import distributed, open_round_engine, open_urd_store
from webrace.commands import ends_quietly_on_closed_pipe, redis_away
from webrace.commands.deliver import MAX_INTERVAL_S

if TYPE_CHECKING:
    from webrace.urd import Urd


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: done; `schedule --loop` stopped by Ctrl-C or SIGTERM (Redis going away is waited out, in one "
        "line); 1: `add` of an invalid file (nothing stored), `remove` or `due` of an unknown id (the "
        "known ones are done)"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("add FILE... | list [--format table|jsonl|xml] | remove ID... | due (--all | ID...) | "
                "schedule [--loop [--interval S]]")

    def short_desc(self) -> str:
        return "Manage URDs: add (validated) files, list them, remove them, make them due"

    def long_desc(self) -> str:
        return (
            "add FILE...: validate every file against webrace/schemas/urd.xsd and store all their "
            "URDs, replacing URDs with the same id; if any file is invalid nothing is stored. "
            "list: one line per URD (id, owner, url, depth, timing, last check, next due). "
            "remove ID...: remove URDs by id. "
            "due --all | due ID...: make URDs due now (their last check is kept). "
            "schedule: distributed mode (REDIS_URL): close finished rounds (their URDs get their last "
            "check) and open a round for the due URDs and sentinels, whose pages workers then lease (the worker "
            "fetching a page evaluates its sentinels); --loop keeps doing it."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--format", choices=("table", "jsonl", "xml"), default="table", help="output of `list` (default: table)"
        )
        parser.add_argument("--all", action="store_true", help="with `due`: every URD")
        parser.add_argument("--loop", action="store_true", help="with `schedule`: keep scheduling until stopped")
        parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                            help="with `schedule --loop`: seconds between passes (default 1)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("missing subcommand: add, list or remove")
        action, rest = args[0], args[1:]
        if action == "add":
            self.add(rest)
        elif action == "list":
            if rest:
                raise UsageError("`list` takes no arguments")
            self.list(opts.format)
        elif action in ("remove", "rm"):
            self.remove(rest)
        elif action == "due":
            self.due(rest, opts.all)
        elif action == "schedule":
            if rest:
                raise UsageError("`schedule` takes no arguments")
            if opts.loop and not 0 < opts.interval <= MAX_INTERVAL_S:  # nan: a busy loop; inf: sleep() overflows
                raise UsageError(f"--interval must be more than 0 and at most {MAX_INTERVAL_S:,} seconds")
            self.schedule(opts.loop, opts.interval)
        else:
            raise UsageError(f"unknown subcommand {action!r}: expected add, list, remove or due")

    def add(self, files: list[str]) -> None:
        from webrace.urd import UrdError, iter_files

        if not files:
            raise UsageError("`add` needs at least one URD file")
        urds = iter_files(files, self.settings.getint("WEBRACE_MAX_XML_BYTES"))
        try:
            with open_urd_store(self.settings) as store:
                tally = Tally(store)
                store.put_many(tally.counted(urds))  # as they are read: the files never sit in memory whole
        except UrdError as exc:
            for problem in exc.problems:
                print(f"error: {problem}", file=sys.stderr)
            print("Nothing was stored.", file=sys.stderr)
            self.exitcode = 1
            return
        print(f"Added {tally.added} URD(s) from {len(files)} file(s){tally.note()}")

    def list(self, fmt: str) -> None:
        from webrace.urd import hide_credentials, now_millis, to_document

        with open_urd_store(self.settings) as store:
            urds = [replace(u, url=hide_credentials(u.url)) for u in store.all()]  # stored before they were refused
        now = now_millis()
        if fmt == "jsonl":
            for urd in urds:
                print(json.dumps(_as_dict(urd, now)))
        elif fmt == "xml":
            print(to_document(urds), end="")
        else:
            print(format_table(urds, now))

    def remove(self, ids: list[str]) -> None:
        if not ids:
            raise UsageError("`remove` needs at least one URD id")
        with open_urd_store(self.settings) as store:
            removed = store.remove(ids)
        if removed:
            print(f"Removed {len(removed)} URD(s): {', '.join(removed)}")
        missing = [i for i in ids if i not in removed]
        if missing:
            print(f"error: no URD with id {', '.join(missing)}", file=sys.stderr)
            self.exitcode = 1


    def due(self, ids: list[str], everything: bool) -> None:
        from webrace.urd import now_millis

        if everything == bool(ids):
            raise UsageError("`due` takes either --all or URD ids")
        with open_urd_store(self.settings) as store:
            made = store.make_due(None if everything else ids, now_millis())
        print(f"{len(made)} URD(s) due now" + (f": {', '.join(made)}" if made else ""))
        missing = [i for i in ids if i not in made]
        if missing:
            print(f"error: no URD with id {', '.join(missing)}", file=sys.stderr)
            self.exitcode = 1


    def schedule(self, loop: bool, interval: float) -> None:
        from webrace.sentinels.due import StoredSentinels

        if not distributed(self.settings):
            raise UsageError("`schedule` is for the distributed mode: set REDIS_URL")
        from webrace.backends.errors import RedisUnavailable, RedisUnreachable

        def opened() -> Any:
            engine = open_round_engine(self.settings, sentinels=StoredSentinels(self.settings), worker=False)
            engine.say = lambda line: print(line, file=sys.stderr, flush=True)  # a clock step, as outages are said
            return engine

        engines: list[Any] = []
        try:
            engines.append(opened())
        except RedisUnreachable:
            if not loop:
                raise
        except RedisUnavailable as exc:  # not a Redis URL, a wrong password: waiting would not help
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        if not loop:
            schedule_pass(engines[0])
            return
        from webrace.outage import Outage, keep_going

        def one_pass() -> None:  # started while Redis was away: its engine once Redis answers
            if not engines:
                engines.append(opened())
            schedule_pass(engines[0])

        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a supervisor's stop: the pass in hand ends first
        outage = Outage(lambda line: print(line, file=sys.stderr, flush=True))
        try:
            keep_going(one_pass, interval, outage, stop.wait, redis_away())
        except KeyboardInterrupt:
            print("Stopped.")


def schedule_pass(engine: Any) -> None:
    """Close the rounds nothing is left of (their URDs get their last check: the time the
    round opened), then open one for the due URDs that no open round is crawling."""
    from webrace.urd import now_millis

    lost = engine.lost_rounds()
    if lost is not None:
        print(f"Redis came back empty: {', '.join(lost) or 'no round'} lost; opening a round again for the "
              "URDs not checked", flush=True)
    for rnd in engine.close_finished():
        print(f"Round {rnd.id} done: {len(rnd.real_urds)} URD(s) checked", flush=True)
    rnd = engine.open_due(now_millis())
    if rnd is not None:
        print(f"Round {rnd.id} opened: {len(rnd.urds)} URD(s): {', '.join(rnd.urds)}", flush=True)


class Tally:
    """What an ``add`` stores: how many URDs, and which replace a stored one (the first
    ``SHOWN`` named, the others counted)."""

    SHOWN = 10

    def __init__(self, store: Any) -> None:
        self.store = store
        self.added = 0
        self.replaced: list[str] = []
        self.more = 0

    def counted(self, urds: Iterable[Urd]) -> Iterator[Urd]:
        for urd in urds:
            self.added += 1
            if self.store.get(urd.id) is not None:
                if len(self.replaced) < self.SHOWN:
                    self.replaced.append(urd.id)
                else:
                    self.more += 1
            yield urd

    def note(self) -> str:
        if not self.replaced:
            return ""
        return f"; replaced: {', '.join(self.replaced)}" + (f" and {self.more} more" if self.more else "")


def _as_dict(urd: Urd, now: int) -> dict[str, Any]:
    return {
        "id": urd.id,
        "owner": urd.owner,
        "url": urd.url,
        "depth": urd.depth,
        "scope": urd.scope,
        "timing": urd.timing,
        "lastcheck": urd.lastcheck,
        "next_due": urd.next_due,
        "due": urd.is_due(now),
        "urgent": urd.urgent,
        "keywords": {k.key: float(k.weight) for k in urd.keywords},
    }


def format_table(urds: list[Urd], now: int) -> str:
    header = ("ID", "OWNER", "URL", "DEPTH", "TIMING", "LAST CHECK", "NEXT DUE")
    rows = [
        (
            u.id,
            u.owner,
            u.url,
            str(u.depth),
            format_interval(u.timing),
            format_time(u.lastcheck) if u.lastcheck is not None else "never",
            "now" if u.is_due(now) else format_time(u.next_due),
        )
        for u in urds
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip() for row in [header, *rows]]
    if not rows:
        lines.append("(no URDs: add some with `scrapy urd add FILE`)")
    return "\n".join(lines)


def format_interval(ms: int) -> str:
    """600000 -> 10m, 5400000 -> 1h30m, 1500 -> 1.5s."""
    if ms % 1000:
        return f"{ms / 1000:g}s" if ms >= 1000 else f"{ms}ms"
    seconds = ms // 1000
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def format_time(ms: int) -> str:
    """Epoch ms as ISO 8601 UTC; a time past the year 9999 (stored before URDs were bounded)
    shows as the last second of 9999."""
    from webrace.urd import MAX_TIME_MS

    return datetime.fromtimestamp(min(ms, MAX_TIME_MS) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
