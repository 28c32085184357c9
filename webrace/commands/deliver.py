"""``scrapy deliver [--loop [--interval S]]`` and ``scrapy deliver channel add | list | remove``:
push new ACIs and notifications to each owner's channels (the seed's Content-Distribution
Agents), and manage the channels."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from datetime import UTC, datetime
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.commands import ends_quietly_on_closed_pipe, redis_away
from webrace.commands.aci import parse_since

MAX_INTERVAL_S = 86_400 * 366  # a loop that waits longer is no loop


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: every message due was delivered (a channel waiting out its backoff is not due); with --loop, "
        "stopped by Ctrl-C or SIGTERM (Redis going away is waited out, in one line); 1: a message could "
        "not be delivered or a channel cannot be decrypted with this process's key (one pass), a channel "
        "URL refused, an unknown channel id"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("[--loop [--interval S]] | channel add OWNER URL [--events aci,notification] [--since T] | "
                "channel list [--owner NAME] [--errors] [--format table|jsonl] | channel remove OWNER ID")

    def short_desc(self) -> str:
        return "Push new ACIs and notifications to the owners' channels (mail, webhooks, ntfy, chat)"

    def long_desc(self) -> str:
        from webrace.records.channel import EVENTS

        return (
            "Without arguments: one delivery pass (every due channel gets one message with what it was not sent "
            "yet; ACIs every ACI channel of their owner took are acknowledged). --loop: a pass every "
            "--interval seconds (default WEBRACE_DELIVERY_INTERVAL) until interrupted. "
            "channel add OWNER URL: an Apprise URL of a scheme WEBRACE_DELIVERY_SCHEMES allows (mailto://, mailtos://, "
            "json://, jsons://, ...) to a public host or one WEBRACE_DELIVERY_ALLOW_HOSTS allows; "
            f"--events: which of {', '.join(EVENTS)} (default both); --since T: deliver items "
            "from T on (default now; 24h, 7d, an ISO date or epoch ms); prints the channel id. "
            "channel list: passwords masked, with each channel's status (--errors: and its last error, which "
            "owners are never shown). channel remove OWNER ID."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        from webrace.records.channel import EVENTS

        super().add_options(parser)
        parser.add_argument("--loop", action="store_true", help="keep delivering until interrupted")
        parser.add_argument("--interval", type=float, metavar="S", help="with --loop: seconds between passes")
        parser.add_argument("--events", default=",".join(EVENTS), metavar="E,...",
                            help=f"with `channel add`: {', '.join(EVENTS)} (default both)")
        parser.add_argument("--since", metavar="T", help="with `channel add`: deliver items from T on (default now)")
        parser.add_argument("--owner", metavar="NAME", help="with `channel list`: this owner's channels only")
        parser.add_argument("--errors", action="store_true",
                            help="with `channel list`: each channel's last error too (the admin's view)")
        parser.add_argument("--format", choices=("table", "jsonl"), default="table")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from webrace.backends.sealing import ChannelKeyError
        from webrace.records.channel import ChannelError

        if args and args[0] != "channel":
            raise UsageError(f"unknown subcommand {args[0]!r}: expected `channel` or nothing (one pass)")
        if args and (len(args) < 2 or args[1] not in ("add", "list", "remove", "rm")):
            raise UsageError("expected `channel add`, `channel list` or `channel remove`")
        try:
            if not args:
                self.deliver(opts.loop, opts.interval)
                return
            {"add": self.add, "list": self.list, "remove": self.remove, "rm": self.remove}[args[1]](args[2:], opts)
        except (ChannelError, ChannelKeyError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1

    def deliver(self, loop: bool, interval: float | None) -> None:
        interval = self.settings.getfloat("WEBRACE_DELIVERY_INTERVAL") if interval is None else interval
        if loop and not 0 < interval <= MAX_INTERVAL_S:  # (nan and inf too: a busy loop, a wait time_t cannot hold)
            raise UsageError(f"--interval must be more than 0 and at most {MAX_INTERVAL_S:,} seconds")
        # imported here, not at the top: Scrapy imports every command module to list them
        from webrace.delivery.agent import DeliveryAgent
        from webrace.outage import Outage, keep_going

        agent, stop = DeliveryAgent(self.settings), threading.Event()
        if not loop:
            failure = _say(agent.run_pass())
            if failure:
                print(f"error: {failure}", file=sys.stderr)
                self.exitcode = 1
            return
        signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a supervisor's stop: the pass in hand ends first
        outage = Outage(lambda line: print(line, file=sys.stderr, flush=True))
        try:
            keep_going(lambda: _say(agent.run_pass()), interval, outage, stop.wait, redis_away())
        except KeyboardInterrupt:
            print("Stopped.")

    def add(self, args: list[str], opts: argparse.Namespace) -> None:
        from webrace.urd import now_millis

        if len(args) != 2:
            raise UsageError("`channel add` takes OWNER URL")
        since = parse_since(opts.since, now_millis()) if opts.since else None
        from webrace.delivery.channels import open_channels

        with open_channels(self.settings) as channels:
            print(channels.add(args[0], args[1], opts.events, since))

    def list(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError("`channel list` takes no arguments (--owner NAME for one owner's)")
        from webrace.delivery.channels import open_channels

        with open_channels(self.settings) as channels:
            rows = channels.list(opts.owner, errors=opts.errors)
        if opts.format == "jsonl":
            for row in rows:
                print(json.dumps(row, ensure_ascii=False))
            return
        if not rows:
            print("No channel" + (f" for {opts.owner}" if opts.owner else ""), file=sys.stderr)
            return
        print(f"{'ID':<10} {'OWNER':<16} {'EVENTS':<18} {'LAST SENT':<20} URL / STATUS")
        for r in rows:
            last = _iso(r["last_sent"]) if r["last_sent"] else "-"
            print(f"{r['id']:<10} {r['owner']:<16} {','.join(r['events']):<18} {last:<20} {r['shown']}")
            print(f"{'':<10} {r['status']}" + (f", last error: {r['last_error']}" if r.get("last_error") else ""))

    def remove(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 2:
            raise UsageError("`channel remove` takes OWNER ID")
        from webrace.delivery.channels import open_channels

        with open_channels(self.settings) as channels:
            if channels.remove(args[0], args[1]):
                print(f"Removed channel {args[1]} of {args[0]}")
                return
        print(f"error: {args[0]} has no channel {args[1]} (see `scrapy deliver channel list`)", file=sys.stderr)
        self.exitcode = 1


def _say(report: Any) -> str | None:
    """Print a pass's report; why it failed (None: it did its job)."""
    print(report.line(), flush=True)
    for line in report.failing + report.warnings:
        print(f"warning: {line}", file=sys.stderr, flush=True)
    return report.failure()


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
