"""``xpack pack IN OUT | unpack IN OUT | stat IN [--json] | query IN XPATH [--count]``: the
same as ``scrapy xpack ...``, for people outside Scrapy. Errors are one line on stderr and
exit status 1; no output file is left behind."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from webrace.outputs import output_problem, write_output
from webrace.pipes import quiet_on_closed_pipe
from webrace.userfiles import UserFileTooLarge, read_bounded, read_stream_bounded
from webrace.xpack.format import CODECS, PackedDocument, pack, unpack
from webrace.xpack.operators import XPackError
from webrace.xpack.query import namespace_hint


def _read(path: str) -> bytes:
    try:
        return read_stream_bounded(sys.stdin.buffer, "standard input") if path == "-" else read_bounded(path)
    except OSError as exc:
        raise XPackError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UserFileTooLarge as exc:
        raise XPackError(str(exc)) from None


def _write(path: str, data: bytes) -> None:
    """All or nothing, or through what the path is (:mod:`webrace.outputs`); ``-``: stdout."""
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    problem = output_problem(path)
    if problem:
        raise XPackError(f"cannot write {path}: {problem}")
    try:
        write_output(path, lambda handle: handle.write(data))
    except OSError as exc:
        raise XPackError(f"cannot write {path}: {exc.strerror or exc}") from None


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="xpack", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    for name in ("pack", "unpack"):
        p = sub.add_parser(name)
        p.add_argument("input")
        p.add_argument("output")
    p = sub.add_parser("stat")
    p.add_argument("input")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("query")
    p.add_argument("input")
    p.add_argument("xpath")
    p.add_argument("--count", action="store_true")
    p.add_argument("--ns", action="append", default=[], metavar="PREFIX=URI",
                   help="a prefix for the query (e.g. h=http://www.w3.org/1999/xhtml for XHTML's default namespace)")
    args = parser.parse_args(argv)
    try:
        data = _read(args.input)
        if args.action == "pack":
            _write(args.output, pack(data))
        elif args.action == "unpack":
            _write(args.output, unpack(data))
        elif args.action == "stat":
            doc = PackedDocument(data)
            info = {"nodes": doc.nodes, "tags": doc.tags(), "containers": doc.sizes()}
            if args.json:
                print(json.dumps(info, indent=2))
            else:
                print(f"nodes: {info['nodes']}\ntags: {' '.join(info['tags'])}")
                for name, c in info["containers"].items():
                    print(f"  {name:<11} {c['raw']:>9} bytes, block {c['block']} ({c['stored']} bytes, {c['codec']})")
                print(f"  {'total':<11} {sum(c['raw'] for c in info['containers'].values()):>9} bytes -> {len(data)} "
                      f"bytes (file, header included); codecs: {', '.join(CODECS.values())}")
        else:
            doc, prefixes = PackedDocument(data), parse_prefixes(args.ns)
            results = doc.query(args.xpath, prefixes)
            for line in result_lines(doc, results, args.count):
                print(line)
            hint = None if results else namespace_hint(args.xpath, doc.declared_namespaces(), prefixes)
            if hint:
                print(f"hint: {hint}", file=sys.stderr)
    except XPackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def parse_prefixes(items: list[str]) -> dict[str, str]:
    """``PREFIX=URI`` options -> a prefix map (XPackError for a malformed one)."""
    found = {}
    for item in items:
        prefix, sep, uri = item.partition("=")
        if not sep or not prefix or not uri:
            raise XPackError(f"--ns {item!r}: expected PREFIX=URI")
        found[prefix] = uri
    return found


def query_lines(doc: PackedDocument, xpath: str, namespaces: dict[str, str], count: bool) -> list[str]:
    """A query's answer as printed: one line per result (text and attribute values as they
    are, with newlines escaped; an element as ``<name> (node N)``), or only the number."""
    return result_lines(doc, doc.query(xpath, namespaces), count)


def result_lines(doc: PackedDocument, results: list[tuple[str, Any]], count: bool) -> list[str]:
    if count:
        return [str(len(results))]
    return [f"<{doc.name(value)}> (node {value})" if kind == "element"
            else value.replace("\\", "\\\\").replace("\n", "\\n") for kind, value in results]


def main() -> None:
    with quiet_on_closed_pipe():  # `xpack query ... | head` ends quietly, as `scrapy xpack` does
        status = run(sys.argv[1:])
    raise SystemExit(status)


if __name__ == "__main__":
    main()
