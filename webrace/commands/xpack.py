"""``scrapy xpack pack IN OUT | unpack IN OUT | stat IN [--json] | query IN XPATH [--count]``."""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand

from webrace.commands import ends_quietly_on_closed_pipe


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: done; 1: an input that cannot be read or is no XPack or XML, an output that cannot be "
        "written, a query it cannot answer"
    )
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "pack IN OUT | unpack IN OUT | stat IN [--json] | query IN XPATH [--count] [--ns P=URI]"

    def short_desc(self) -> str:
        return "XPack: pack XML into queryable compressed form, unpack it, describe it, query it"

    def long_desc(self) -> str:
        return ("pack/unpack: files (- for stdin/stdout); unpack gives the document equal under C14N. stat: node "
                "count, tags, per-container sizes (--json: keys nodes, tags, containers). query: one result per "
                "line, --count prints only the number. The same as the `xpack` console script.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="with `stat`: JSON")
        parser.add_argument("--count", action="store_true", help="with `query`: only the number of results")
        parser.add_argument("--ns", action="append", default=[], metavar="PREFIX=URI",
                            help="with `query`: a namespace prefix (e.g. for XHTML's default namespace)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from webrace.xpack.cli import run

        argv = list(args)
        if opts.json:
            argv.append("--json")
        if opts.count:
            argv.append("--count")
        for item in opts.ns:
            argv += ["--ns", item]
        sys.stdout.flush()
        self.exitcode = run(argv)
