"""``scrapy results show | export``: read Scout's results table."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.backends import open_results_store
from webrace.commands import ends_quietly_on_closed_pipe


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: shown or exported; 1: no results for --rule, an output that cannot be written"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "show [--rule NAME] | export -o FILE.jsonl [--rule NAME]"

    def short_desc(self) -> str:
        return "Read the rules' results table: show it, or export it as JSON lines"

    def long_desc(self) -> str:
        return (
            "show: every recorded result, one line each, as Scout printed them: Rule[seq,i]: value "
            "(the session's results, from a rule's close(), have seq 0). "
            "export -o FILE.jsonl: one JSON object per rule and document, {\"rule\", \"url\", \"seq\", "
            "\"results\": [...]}, empty results included; -o - writes to stdout."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--rule", metavar="NAME", help="only this rule's results")
        parser.add_argument("-o", "--output", metavar="FILE", help="with `export`: the JSON lines file (- = stdout)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1 or args[0] not in ("show", "export"):
            raise UsageError("expected `show` or `export`")
        with open_results_store(self.settings) as store:
            if opts.rule and opts.rule not in store.rules():
                known = ", ".join(store.rules()) or "none yet"
                print(f"error: no results for rule {opts.rule!r} (rules with results: {known})", file=sys.stderr)
                self.exitcode = 1
                return
            rows = store.rows(opts.rule)
            if args[0] == "show":
                self.show(rows)
            else:
                if not opts.output:
                    raise UsageError("`export` needs -o FILE.jsonl (or -o - for stdout)")
                self.export(rows, opts.output)

    def show(self, rows: Any) -> None:
        from webrace.backends.base import SESSION

        documents, shown = set(), 0
        for rule, url, seq, results in rows:
            documents.add(url)
            for i, value in enumerate(results):
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                where = "(session)" if url == SESSION else url
                print(f"{rule}[{seq},{i}]: {text}\t{where}")
                shown += 1
        print(f"{shown} result(s) over {len(documents)} document(s)", file=sys.stderr)

    def export(self, rows: Any, output: str) -> None:
        out = sys.stdout if output == "-" else None
        path = None if out else Path(output)
        tmp = path.with_name(path.name + ".part") if path else None
        count = 0
        try:
            handle = out or tmp.open("w", encoding="utf-8")
            try:
                for rule, url, seq, results in rows:
                    handle.write(json.dumps({"rule": rule, "url": url, "seq": seq, "results": results},
                                            ensure_ascii=False) + "\n")
                    count += 1
            finally:
                if handle is not sys.stdout:
                    handle.close()
            if tmp is not None:
                tmp.replace(path)  # a complete file or none
        except OSError as exc:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            print(f"error: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
            self.exitcode = 1
            return
        print(f"Exported {count} line(s) (one per rule and document)" + (f" to {output}" if path else ""),
              file=sys.stderr)
