"""``scrapy store versions URL | get URL [--version N] | query URL XPATH [--version N] [--count]
[--ns P=URI] | gc [--keep N]``: the object cache."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.backends import open_aci_store, open_object_cache
from webrace.commands import ends_quietly_on_closed_pipe
from webrace.store.cache import ObjectCache
from webrace.store.objects import ObjectCorrupt, ObjectMissing
from webrace.urls import BadURL, normalize
from webrace.xpack import PackedDocument, XPackError, pack
from webrace.xpack.cli import parse_prefixes, result_lines
from webrace.xpack.query import namespace_hint


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("versions URL | get URL [--version N] | query URL XPATH [--version N] [--count] [--ns P=URI] "
                "| gc [--keep N]")

    def short_desc(self) -> str:
        return "Read the object cache: versions of a URL, a stored body; drop old versions"

    def long_desc(self) -> str:
        return (
            "versions URL: every stored version of URL (number, fetch time, size, status, digest). "
            "get URL [--version N]: the body of version N (default: the newest) to stdout. "
            "query URL XPATH [--version N] [--count] [--ns PREFIX=URI]: XPath (XPack's subset) over a stored XML "
            "version, one result per line; answered without unpacking when it is stored XPack-encoded "
            "(WEBRACE_STORE_XPACK), else after decompressing it. "
            "gc [--keep N]: keep the newest N versions of each URL (default WEBRACE_KEEP_VERSIONS), "
            "and older ones an undelivered ACI points to, and delete every object no version points to."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--version", type=int, metavar="N", help="with `get`: version number")
        parser.add_argument("--keep", type=int, metavar="N", help="with `gc`: versions kept per URL")
        parser.add_argument("--count", action="store_true", help="with `query`: print only the number of results")
        parser.add_argument("--ns", action="append", default=[], metavar="PREFIX=URI",
                            help="with `query`: a namespace prefix (e.g. for XHTML's default namespace)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("missing subcommand: versions, get, query or gc")
        action, rest = args[0], args[1:]
        with open_object_cache(self.settings) as cache:
            if action == "versions":
                self.versions(cache, _one_url(rest))
            elif action == "get":
                self.get(cache, _one_url(rest), opts.version)
            elif action == "query":
                if len(rest) != 2:
                    raise UsageError("`query` takes a URL and an XPath expression")
                self.query(cache, _one_url(rest[:1]), rest[1], opts)
            elif action == "gc":
                if rest:
                    raise UsageError("`gc` takes no arguments")
                keep = opts.keep if opts.keep is not None else self.settings.getint("WEBRACE_KEEP_VERSIONS")
                if keep < 1:
                    raise UsageError("--keep must be at least 1")
                self.gc(cache, keep)
            else:
                raise UsageError(f"unknown subcommand {action!r}: expected versions, get, query or gc")

    def versions(self, cache: ObjectCache, url: str) -> None:
        versions = cache.versions(url)
        if not versions:
            print(f"error: no stored version of {url}", file=sys.stderr)
            self.exitcode = 1
            return
        print(f"{'VERSION':<8} {'FETCHED':<24} {'SIZE':>9} {'STATUS':<6} DIGEST")
        for v in versions:
            fetched = datetime.fromtimestamp(v.fetched / 1000, UTC).isoformat(timespec="milliseconds")
            print(f"{v.number:<8} {fetched.replace('+00:00', 'Z'):<24} {v.size:>9} {v.status:<6} {v.digest}")

    def get(self, cache: ObjectCache, url: str, number: int | None) -> None:
        try:
            _, body = cache.get(url, number)
        except (LookupError, ObjectMissing, ObjectCorrupt) as exc:
            kind = "stored body is damaged" if isinstance(exc, ObjectCorrupt) else "not found"
            print(f"error: {kind}: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        sys.stdout.buffer.write(body)
        sys.stdout.flush()

    def query(self, cache: ObjectCache, url: str, xpath: str, opts: argparse.Namespace) -> None:
        try:
            version, doc = cache.packed(url, opts.version)
            if doc is None:  # stored zlib-compressed: packed here, in memory
                _, body = cache.get(url, version.number)
                doc = PackedDocument(pack(body))
                print(f"note: version {version.number} is not stored XPack-encoded: decompressed to answer",
                      file=sys.stderr)
            prefixes = parse_prefixes(opts.ns)
            results = doc.query(xpath, prefixes)
            lines = list(result_lines(doc, results, opts.count))
            hint = None if results else namespace_hint(xpath, doc.declared_namespaces(), prefixes)
        except (LookupError, ObjectMissing, ObjectCorrupt, XPackError) as exc:
            kind = ("stored body is damaged" if isinstance(exc, ObjectCorrupt) else
                    "cannot answer" if isinstance(exc, XPackError) else "not found")
            print(f"error: {kind}: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        for line in lines:
            print(line)
        if hint:
            print(f"hint: {hint}", file=sys.stderr)

    def gc(self, cache: ObjectCache, keep: int) -> None:
        with open_aci_store(self.settings) as acis:
            protected = acis.undelivered_digests()  # an owner has not been told about these yet
        report = cache.gc(keep, protected)
        print(
            f"Kept the newest {keep} version(s) of each URL: dropped {report.versions_dropped} version(s), "
            f"deleted {report.objects_deleted} object(s) ({report.bytes_freed} bytes), "
            f"removed {report.temporary_files} temporary file(s)"
        )


def _one_url(args: list[str]) -> str:
    if len(args) != 1:
        raise UsageError("expected exactly one URL")
    try:
        return normalize(args[0])
    except BadURL as exc:
        raise UsageError(f"not a URL WebRACE can store: {exc}") from None
