"""``scrapy store versions URL | get URL [--version N] | query URL XPATH [--version N] [--count]
[--ns P=URI] | gc [--keep N] | export --warc OUT [--urd ID] [--since T] | import --warc FILE...``:
the object cache, and WARC files out of it and into it (:mod:`webrace.store.warc`)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.backends import open_aci_store, open_object_cache, open_urd_store
from webrace.commands import ends_quietly_on_closed_pipe
from webrace.outputs import output_problem, write_output
from webrace.safetext import printable

if TYPE_CHECKING:
    from webrace.store import warc as warcfile
    from webrace.store.cache import ObjectCache


MAX_KEEP = 1_000_000  # versions kept per URL by `gc --keep`


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: done; 1: no stored version (of the URL, or version N), a stored body damaged, a query it "
        "cannot answer, `gc` refusing an empty index without --force, an output that cannot be written, "
        "an unknown --urd, records skipped by `export`, bad or damaged records in `import`"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("versions URL | get URL [--version N] | query URL XPATH [--version N] [--count] [--ns P=URI] "
                "| gc [--keep N] [--force] | export --warc OUT.warc.gz [--urd ID] [--since T] | import --warc FILE... "
                "| migrate")

    def short_desc(self) -> str:
        return "Read the object cache: versions of a URL, a stored body; drop old versions; WARC out and in"

    def long_desc(self) -> str:
        return (
            "versions URL: every stored version of URL (number, fetch time, size, status, digest). "
            "get URL [--version N]: the body of version N (default: the newest) to stdout. "
            "query URL XPATH [--version N] [--count] [--ns PREFIX=URI]: XPath (XPack's subset) over a stored XML "
            "version, one result per line; answered without unpacking when it is stored XPack-encoded "
            "(WEBRACE_STORE_XPACK), else after decompressing it. "
            "gc [--keep N]: keep the newest N versions of each URL (default WEBRACE_KEEP_VERSIONS), "
            "and older ones an undelivered ACI points to, and delete every object no version points to. "
            "export --warc OUT [--urd ID] [--since T]: every stored version as a WARC/1.1 response record (with "
            "a request record as the crawl sends it) and every recorded 304 answer as a revisit record, to OUT "
            "(written to a temporary file and renamed; `-`: stdout; gzip unless OUT ends in .warc); --urd: the "
            "pages a crawl of that URD reaches through the stored links (its start page, then links within its "
            "scope, up to its depth); --since: fetched at or after T (ISO 8601 date/time, epoch ms or a duration "
            "back from now such as 7d). "
            "import --warc FILE...: the response records of WARC files (ours or any crawler's) into the object "
            "cache, links extracted as the crawl does, in WARC-Date order; a capture not newer than the stored "
            "one, or of a URL with credentials, is skipped; bad records are named (file:offset: reason), never "
            "stored, and make the exit status 1, as does a record kept whole from a damaged place (a gzip member "
            "cut before its CRC-32 trailer: damaged: file:offset: reason); a file that is not a regular file or "
            "does not start with a WARC record is one bad line. "
            "migrate: distributed mode, move meta-info and bodies Redis holds in the layout before bodies left "
            "Redis (P meta, P versions:URL, P object:SHA256) into the current one (bodies to the shared body store); "
            "run again after an interruption."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--version", type=int, metavar="N", help="with `get`: version number")
        parser.add_argument("--keep", type=int, metavar="N", help="with `gc`: versions kept per URL")
        parser.add_argument("--force", action="store_true",
                            help="with `gc`: delete even when the meta-info index is empty (every body unreferenced)")
        parser.add_argument("--count", action="store_true", help="with `query`: print only the number of results")
        parser.add_argument("--ns", action="append", default=[], metavar="PREFIX=URI",
                            help="with `query`: a namespace prefix (e.g. for XHTML's default namespace)")
        parser.add_argument("--warc", nargs="+", metavar="FILE",
                            help="with `export`: the WARC file to write (`-`: stdout); with `import`: WARC files")
        parser.add_argument("--urd", metavar="ID", help="with `export`: only the pages a crawl of this URD reaches")
        parser.add_argument("--since", metavar="T", help="with `export`: only what was fetched at or after T")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("missing subcommand: versions, get, query, gc, export, import or migrate")
        action, rest = args[0], args[1:]
        if action in ("export", "import"):
            self.warc(action, rest, opts)
            return
        with open_object_cache(self.settings) as cache:
            if action == "versions":
                self.versions(cache, _one_url(rest))
            elif action == "get":
                self.get(cache, _one_url(rest), opts.version)
            elif action == "query":
                if len(rest) != 2:
                    raise UsageError("`query` takes a URL and an XPath expression")
                self.query(cache, _one_url(rest[:1]), rest[1], opts)
            elif action == "migrate":
                self.migrate(cache, rest)
            elif action == "gc":
                if rest:
                    raise UsageError("`gc` takes no arguments")
                keep = opts.keep if opts.keep is not None else self.settings.getint("WEBRACE_KEEP_VERSIONS")
                if not 1 <= keep <= MAX_KEEP:  # (beyond it: an int SQLite cannot hold)
                    raise UsageError(f"--keep must be from 1 to {MAX_KEEP:,}")
                self.force = opts.force
                self.gc(cache, keep)
            else:
                raise UsageError(f"unknown subcommand {action!r}: expected versions, get, query, gc, export, import "
                                 "or migrate")

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
        from webrace.store.objects import ObjectCorrupt, ObjectMissing

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
        from webrace.store.objects import ObjectCorrupt, ObjectMissing
        from webrace.xpack import PackedDocument, XPackError, pack
        from webrace.xpack.cli import parse_prefixes, result_lines
        from webrace.xpack.query import namespace_hint

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

    def migrate(self, cache: ObjectCache, rest: list[str]) -> None:
        from webrace.backends.redis import RedisMetaInfoStore, legacy_layout, migrate_legacy

        if rest:
            raise UsageError("`migrate` takes no arguments")
        index = cache.index
        if not isinstance(index, RedisMetaInfoStore) or not legacy_layout(index.client, index.prefix):
            print("Nothing to migrate: no meta-info in the earlier Redis layout")
            return
        urls, versions, bodies = migrate_legacy(index.client, index.prefix, index, cache.objects)
        print(f"Migrated {urls} URL(s), {versions} version(s), {bodies} body/bodies to {cache.objects!r}")

    def gc(self, cache: ObjectCache, keep: int) -> None:
        from webrace.store.cache import IndexLost

        with open_aci_store(self.settings) as acis:
            protected = acis.undelivered_digests()  # an owner has not been told about these yet
        try:
            report = cache.gc(keep, protected, grace=self.settings.getfloat("WEBRACE_STORE_GC_GRACE"),
                              force=self.force)
        except IndexLost as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        print(
            f"Kept the newest {keep} version(s) of each URL: dropped {report.versions_dropped} version(s), "
            f"deleted {report.objects_deleted} object(s) ({report.bytes_freed} bytes), "
            f"removed {report.temporary_files} temporary file(s)"
            + (f"; spared {report.objects_young} unreferenced object(s) younger than the grace period"
               if report.objects_young else "")
        )
        if report.links:
            shown = ", ".join(printable(link, 80) for link in report.links[:5])
            print(f"warning: skipped {len(report.links)} symbolic link(s) in the object store {cache.objects.root}, "
                  f"not followed: {shown}{', ...' if len(report.links) > 5 else ''}", file=sys.stderr)


    # -- WARC ------------------------------------------------------------------------------

    def warc(self, action: str, rest: list[str], opts: argparse.Namespace) -> None:
        from webrace.commands.aci import parse_since
        from webrace.urd import now_millis

        if rest:
            raise UsageError(f"`{action}` takes no arguments: name the files with --warc")
        if not opts.warc:
            raise UsageError(f"`{action}` needs --warc FILE (WARC is the format it writes and reads)")
        if action == "import":
            if opts.urd or opts.since:
                raise UsageError("--urd and --since are options of `export`")
            self.import_warc(opts.warc)
            return
        if len(opts.warc) != 1:
            raise UsageError("`export` writes one file: --warc OUT.warc.gz")
        try:
            since = parse_since(opts.since, now_millis()) if opts.since else 0
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        self.export_warc(opts.warc[0], opts.urd, since)

    def export_warc(self, out: str, urd_id: str | None, since: int) -> None:
        from webrace.store import warc as warcfile

        urd = None
        if urd_id:
            with open_urd_store(self.settings) as urds:
                urd = urds.get(urd_id)
            if urd is None:
                print(f"error: no URD with id {urd_id} (see `scrapy urd list`)", file=sys.stderr)
                self.exitcode = 1
                return
        target = None if out == "-" else Path(out)
        problem = output_problem(target) if target is not None else None
        if problem:
            print(f"error: cannot write {out}: {problem}", file=sys.stderr)
            self.exitcode = 1
            return
        with open_object_cache(self.settings) as cache:
            urls = warcfile.urd_urls(cache, urd) if urd is not None else sorted(cache.index.urls())

            headers = warcfile.request_headers(self.settings)

            def write(stream: BinaryIO) -> warcfile.Exported:
                return warcfile.export_warc(cache, stream, urls, since=since, headers=headers,
                                            gzip=not out.endswith(".warc"),
                                            filename="" if target is None else target.name)

            try:
                report = write(sys.stdout.buffer) if target is None else write_output(target, write)
            except OSError as exc:
                print(f"error: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
                self.exitcode = 1
                return
        if target is None:
            sys.stdout.flush()
        for problem in report.problems:
            print(f"skipped: {problem}", file=sys.stderr)
        print(f"Wrote {report.responses} response, {report.requests} request and {report.revisits} revisit "
              f"record(s) of {report.urls} URL(s) to {out}"
              + (f"; {len(report.problems)} skipped (above)" if report.problems else ""), file=sys.stderr)
        if report.problems:
            self.exitcode = 1

    def import_warc(self, paths: list[str]) -> None:
        from webrace.archive import CrawlView
        from webrace.store import warc as warcfile

        pages = CrawlView.from_settings(self.settings)
        with open_object_cache(self.settings) as cache:
            report = warcfile.import_warcs(cache, paths, pages, max_body=self.settings.getint("DOWNLOAD_MAXSIZE"))
        for bad in report.bad:
            print(f"bad: {bad}", file=sys.stderr)
        for damaged in report.damaged:
            print(f"damaged: {damaged}", file=sys.stderr)
        skipped = ", ".join(f"{reason} {n}" for reason, n in sorted(report.skipped.items()))
        bodiless = report.responses - report.new_versions - report.unchanged
        print(f"Imported {report.responses} response(s) from {report.files} file(s): {report.new_versions} new "
              f"version(s), {report.unchanged} unchanged, {bodiless} error status(es) recorded without a body; "
              f"skipped: {skipped or 'none'}; bad: {len(report.bad)}"
              + (f"; damaged (kept): {len(report.damaged)}" if report.damaged else ""))
        if report.bad or report.damaged:
            self.exitcode = 1


def _one_url(args: list[str]) -> str:
    from webrace.urls import BadURL, normalize

    if len(args) != 1:
        raise UsageError("expected exactly one URL")
    try:
        return normalize(args[0])
    except BadURL as exc:
        raise UsageError(f"not a URL WebRACE can store: {exc}") from None
