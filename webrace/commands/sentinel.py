"""``scrapy sentinel add | list | remove | due | notifications``: change monitors on pages."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace import digest as D
from webrace.backends import open_object_cache, open_sentinel_store
from webrace.commands import ends_quietly_on_closed_pipe
from webrace.userfiles import UserFileTooLarge, read_bounded

if TYPE_CHECKING:
    from webrace.sentinels.baseline import Stored

_WARNINGS_SHOWN = 10  # a --urls FILE of thousands gets the first warnings and a count
_NO_BASELINE = {"no body": "has no body (dropped as relevant to no owner)", "unreadable": "cannot be read"}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: done (nothing listed included); 1: `add` with any problem (nothing added), `remove` or `due` "
        "of an unknown id"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("add --owner O (--url U | --urls FILE) --type T [--where css:SEL|xpath:EXPR] [--pattern P] "
                "[--every DURATION] [--on added|removed] [--ignore X]... | list [--owner O] [--format table|jsonl] | "
                "remove ID... | due (--all | ID...) | notifications --owner O [--since T] [--format table|jsonl]")

    def short_desc(self) -> str:
        return "Watch pages for changes (Page Digest sentinels) and read the notifications"

    def long_desc(self) -> str:
        from webrace.records.sentinel import TYPES

        return (
            f"add: one sentinel per URL (--url, or --urls FILE with one URL per line); types: {', '.join(TYPES)}; "
            "prints the new ids. --where restricts it to a region, --ignore (repeatable) to leave out a region "
            "(css:/xpath:) or text matching a regular expression, --on fires only when text/links/images/matches "
            "are added or removed; --every rounds up to a multiple of WEBRACE_SENTINEL_TICK. `scrapy crawl urd` "
            "fetches the URLs of due sentinels and evaluates them on every new version (with REDIS_URL the sentinels "
            "are in Redis, `scrapy urd schedule` adds the due ones to its rounds and the worker fetching a page "
            "evaluates them). "
            "list, remove ID..., due --all|ID... (due now). notifications --owner O: newest first; jsonl: one "
            "JSON object per notification (sentinel, owner, url, type, changes, before, after, at, version)."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        from webrace.records.sentinel import TYPES

        super().add_options(parser)
        parser.add_argument("--owner", metavar="O")
        parser.add_argument("--url", metavar="U")
        parser.add_argument("--urls", metavar="FILE", help="one URL per line (# comments)")
        parser.add_argument("--type", default="any", metavar="T", help=f"one of {', '.join(TYPES)} (default any)")
        parser.add_argument("--where", metavar="LOCATION", help="css:SELECTOR or xpath:EXPRESSION")
        parser.add_argument("--pattern", metavar="P", help="keyword (keyword type) or regular expression (regex)")
        parser.add_argument("--every", metavar="DURATION", help="how often: 90s, 15m, 1h, 1d (default: the tick)")
        parser.add_argument("--on", default="any", choices=("any", "added", "removed"))
        parser.add_argument("--ignore", action="append", default=[], metavar="X",
                            help="css:/xpath: region or regular expression to ignore (repeatable)")
        parser.add_argument("--all", action="store_true", help="with `due`: every sentinel")
        parser.add_argument("--since", metavar="T", help="with `notifications`: 24h, 7d, an ISO date or epoch ms")
        parser.add_argument("--format", choices=("table", "jsonl"), default="table")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("missing subcommand: add, list, remove, due or notifications")
        action, rest = args[0], args[1:]
        if opts.owner:
            from webrace.names import canonical_owner

            opts.owner = canonical_owner(opts.owner) or opts.owner  # as the stores hold it: Alice's are alice's
        handler = {"add": self.add, "list": self.list, "remove": self.remove, "rm": self.remove, "due": self.due,
                   "notifications": self.notifications}.get(action)
        if handler is None:
            raise UsageError(f"unknown subcommand {action!r}: expected add, list, remove, due or notifications")
        with open_sentinel_store(self.settings) as store:
            handler(store, rest, opts)

    def add(self, store: Any, rest: list[str], opts: argparse.Namespace) -> None:
        from webrace.records.sentinel import SentinelError, make, parse_duration
        from webrace.urd import now_millis
        from webrace.urls import BadURL, normalize

        if rest:
            raise UsageError("`add` takes options only")
        if not opts.owner:
            raise UsageError("`add` needs --owner")
        if bool(opts.url) == bool(opts.urls):
            raise UsageError("`add` needs --url URL or --urls FILE (one of them)")
        raw = [(1, opts.url)] if opts.url else _read_urls(opts.urls)
        problems, sentinels = [], []
        tick = max(int(self.settings.getfloat("WEBRACE_SENTINEL_TICK") * 1000), 1)
        try:
            every = parse_duration(opts.every) if opts.every else None
        except SentinelError as exc:
            raise UsageError(f"--every: {exc}") from None
        now = now_millis()
        for n, url in raw:
            try:
                canonical = normalize(url)
            except BadURL as exc:
                problems.append(f"{opts.urls or '--url'}:{n}: not a URL WebRACE can fetch: {exc}")
                continue
            try:
                sentinels.append(make(opts.owner, canonical, opts.type, opts.where, opts.pattern, opts.on,
                                      tuple(opts.ignore), every, tick, now))
            except SentinelError as exc:
                problems.append(f"error: {exc}")
                break  # the same options fail for every URL
        if problems:
            for problem in problems:
                print(problem if problem.startswith("error:") else f"error: {problem}", file=sys.stderr)
            print("No sentinel was added.", file=sys.stderr)
            self.exitcode = 1
            return
        ids = store.add(sentinels)
        for sentinel_id in ids:
            print(sentinel_id)
        if every is not None and sentinels and sentinels[0].every != every:
            print(f"note: interval rounded up to {sentinels[0].every / 1000:g} s (a multiple of "
                  f"WEBRACE_SENTINEL_TICK = {tick / 1000:g} s)", file=sys.stderr)
        self._baselines(store, sentinels, now)
        print(f"Added {len(ids)} sentinel(s)", file=sys.stderr)

    def _baselines(self, store: Any, sentinels: list, now: int) -> None:
        """Each new sentinel's baseline is the newest stored version of its page, so the
        first change is reported; say so when there is no body to take it from, or when
        the location matches nothing on it."""
        from webrace.sentinels.baseline import newest_stored

        seen = {s.id: baseline for s, _, baseline in store.all(sentinels[0].owner)} if sentinels else {}
        by_url: dict[str, list] = defaultdict(list)
        for sentinel in sentinels:
            by_url[sentinel.url].append(sentinel)
        warnings = []
        with open_object_cache(self.settings) as cache:
            for url, group in by_url.items():
                stored = newest_stored(cache, url)
                fresh = [s.id for s in group if not seen.get(s.id)]
                if stored.baseline is not None and fresh:
                    store.put_digest(stored.baseline.sha, stored.baseline.data)
                    store.checked(fresh, now, seen=stored.baseline.sha)
                    store.make_due(fresh, now)  # still due now: the next crawl compares against it
                warnings += _region_warnings(url, group[0].where, stored)
        for warning in warnings[:_WARNINGS_SHOWN]:
            print(f"warning: {warning}", file=sys.stderr)
        if len(warnings) > _WARNINGS_SHOWN:
            print(f"warning: and {len(warnings) - _WARNINGS_SHOWN} more like these", file=sys.stderr)

    def list(self, store: Any, rest: list[str], opts: argparse.Namespace) -> None:
        from webrace.urd import now_millis

        if rest:
            raise UsageError("`list` takes no arguments")
        rows = store.all(opts.owner)
        if opts.format == "jsonl":
            for sentinel, due, seen in rows:
                print(json.dumps({**json.loads(sentinel.to_json()), "next_due": due, "seen": seen}))
            return
        if not rows:
            print("No sentinel", file=sys.stderr)
            return
        print(f"{'ID':<12} {'OWNER':<10} {'TYPE':<10} {'EVERY':>7} {'NEXT DUE':<20} URL / WHERE")
        now = now_millis()
        for sentinel, due, _ in rows:
            when = "now" if due <= now else _iso(due)
            detail = " ".join(filter(None, [sentinel.where, sentinel.pattern and f"pattern={sentinel.pattern!r}",
                                            sentinel.on != "any" and f"on={sentinel.on}"]))
            print(f"{sentinel.id:<12} {sentinel.owner:<10} {sentinel.type:<10} {sentinel.every // 1000:>6}s "
                  f"{when:<20} {sentinel.url} {detail}".rstrip())

    def remove(self, store: Any, rest: list[str], opts: argparse.Namespace) -> None:
        if not rest:
            raise UsageError("`remove` needs sentinel ids")
        removed = store.remove(rest)
        missing = [i for i in rest if i not in removed]
        print(f"Removed {len(removed)} sentinel(s)")
        if missing:
            print(f"error: no sentinel with id {', '.join(missing)}", file=sys.stderr)
            self.exitcode = 1

    def due(self, store: Any, rest: list[str], opts: argparse.Namespace) -> None:
        from webrace.urd import now_millis

        if opts.all == bool(rest):
            raise UsageError("`due` takes --all or sentinel ids")
        made = store.make_due(None if opts.all else rest, now_millis())
        print(f"{len(made)} sentinel(s) due now")
        missing = [i for i in rest if i not in made]
        if missing:
            print(f"error: no sentinel with id {', '.join(missing)}", file=sys.stderr)
            self.exitcode = 1

    def notifications(self, store: Any, rest: list[str], opts: argparse.Namespace) -> None:
        from webrace.urd import now_millis

        if rest:
            raise UsageError("`notifications` takes options only")
        if not opts.owner:
            raise UsageError("`notifications` needs --owner")
        from webrace.commands.aci import parse_since

        since = parse_since(opts.since, now_millis()) if opts.since else 0
        notes = store.notifications(opts.owner, since)
        if opts.format == "jsonl":
            for note in notes:
                print(json.dumps(note, ensure_ascii=False))
            return
        if not notes:
            print(f"No notification for {opts.owner}", file=sys.stderr)
            return
        for note in notes:
            where = f" {note['where']}" if note.get("where") else ""
            print(f"{_iso(note['at'])}  {note['type']}{where}  {note['url']}  (sentinel {note['sentinel']})")
            for key in ("removed", "added", "nodes"):
                for value in note["changes"].get(key, [])[:5]:
                    sign = {"removed": "-", "added": "+", "nodes": "~"}[key]
                    print(f"    {sign} {value[:150]}")


def _read_urls(path: str) -> list[tuple[int, str]]:
    """(line number, URL) of every URL line of ``path``."""
    try:
        lines = read_bounded(path).decode("utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {path}: not UTF-8 (byte {exc.object[exc.start]:#04x} at offset "
                         f"{exc.start})") from None
    except UserFileTooLarge as exc:
        raise UsageError(str(exc)) from None
    return [(n, line.strip()) for n, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")]


def _region_warnings(url: str, where: str | None, stored: Stored) -> list[str]:
    """What to tell about a sentinel's page at ``add``: no body to take a baseline from (one
    dropped as relevant to no owner), or a location that matches nothing."""
    if stored.problem in _NO_BASELINE:
        against = f" to check {where} against" if where else ""
        then = f" (and says then if {where} matches nothing)" if where else ""
        return [f"the stored version of {url} {_NO_BASELINE[stored.problem]}{against}: the next crawl fetches "
                f"the page in full and takes the sentinel's baseline from it{then}"]
    if stored.baseline is None or not where:
        return []
    region = D.mask(stored.baseline.digest, where)
    if region is not None and not any(region):
        return [f"{where} matches nothing on the stored version of {url}: the sentinel will fire when that "
                "region appears"]
    return []
