"""``python -m webrace.demo [--keep DIR]``: WebRACE end to end on a site of its own.

1. serve the example site (``webrace/demo/site``) on 127.0.0.1 on a free port;
2. write the example URDs (``webrace/demo/urds.xml``) with that address into a working
   directory that is a project directory of its own: a ``scrapy.cfg`` selecting
   ``webrace.settings``, and the default data directory ``.webrace``;
3. run what a user would type there: ``scrapy urd add urds.xml``, ``scrapy urd list`` and
   ``scrapy crawl urd -O pages.jsonl``;
4. sum up the crawl from ``.webrace/last-crawl.json`` and ``pages.jsonl``.

The working directory is temporary unless ``--keep DIR`` names one to keep; there, the
commands of the tutorial (docs/tutorial.md) work with the run's address, and the closing tips
say how to serve the site again on the address the URDs name. The exit status is non-zero when a step fails or
the crawl fetched no page.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from webrace.demo import server as demo_server
from webrace.summary import format_summary

URDS_TEMPLATE = Path(__file__).resolve().parent / "urds.xml"
DATA_DIR = ".webrace"  # the default WEBRACE_DATA_DIR: commands run in the directory need no variable
SCRAPY_CFG = """\
# Written by `python -m webrace.demo`: `scrapy` commands run in this directory use
# webrace.settings, and so the data directory .webrace here.
[settings]
default = webrace.settings
"""
STEP_TIMEOUT = 300  # seconds; the crawl takes a few, so more means something is stuck
CRAWL_SETTINGS = {
    # Against our own server the site's robots.txt Crawl-delay (0.2 s) is politeness enough.
    "DOWNLOAD_DELAY": "0",
    "LOG_LEVEL": "INFO",
    # No telnet or remote-control console: the demo opens no other port and leaves no job
    # file outside its working directory.
    "TELNETCONSOLE_ENABLED": "False",
    "REMOTE_CONTROL_ENABLED": "False",
}

# What each counter of the summary means on this site, for readers new to Scout's vocabulary.
REASONS = {
    "robots": "disallowed by robots.txt (the /private/ directory)",
    "type": "extension in ignore.types (the PDF syllabus): never requested",
    "scope": "links to other hosts, outside the URDs' host scope: never requested",
    "depth": "links past the depth of every URD that reached their page",
    "mime": "media type not accepted: stopped after the headers",
    "blocklist": "blocked by WEBRACE_BLOCKLIST",
    "limit": "over WEBRACE_MAX_LINKS_PER_PAGE",
    "scheme": "not http(s), e.g. mailto: links",
    "malformed": "URLs that cannot be parsed",
    "too_long": "URLs over WEBRACE_MAX_URL_LENGTH",
}


class StepFailed(Exception):
    """A ``scrapy`` command of the demo failed; the message says which."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m webrace.demo",
        description="Crawl a small example site on 127.0.0.1 for two users, alice and bob, and sum up the crawl.",
    )
    parser.add_argument(
        "--keep",
        metavar="DIR",
        type=Path,
        help="working directory to create (or reuse) and keep; default: a temporary one, removed at the end",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server, base = demo_server.start()
    print(f"Demo site: {base}/ (serving {demo_server.SITE_DIR})")
    try:
        with working_directory(args.keep) as root:
            return run_demo(root, base, server, kept=args.keep is not None)
    except StepFailed as exc:
        print(f"\nDemo failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    finally:
        demo_server.stop()


@contextmanager
def working_directory(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="webrace-demo-") as tmp:
        yield Path(tmp)


def run_demo(root: Path, base: str, server: demo_server.DemoServer, kept: bool) -> int:
    urds = root / "urds.xml"
    urds.write_text(URDS_TEMPLATE.read_text(encoding="utf-8").replace("{base}", base), encoding="utf-8")
    if not (root / "scrapy.cfg").exists():
        (root / "scrapy.cfg").write_text(SCRAPY_CFG, encoding="utf-8")
    print(f"Working directory: {root}")
    scrapy(root, "urd", "add", urds.name)
    scrapy(root, "urd", "list")
    # Scrapy's log goes to the terminal: its progress, then WebRACE's "URL Stats" summary.
    settings = [arg for name, value in CRAWL_SETTINGS.items() for arg in ("-s", f"{name}={value}")]
    scrapy(root, "crawl", "urd", "-O", "pages.jsonl", *settings)
    summary, items = read_results(root)
    pages = [item for item in items if "owners" in item]
    acis = [item for item in items if "docbase" in item]
    report(summary, pages, base, server)
    print_acis(acis, pages, base, summary.get("stats", {}))
    if acis:
        scrapy(root, "aci", "list", "--owner", acis[0]["owner"])
    print_files(root, kept)
    if kept:
        print_tips(root, base, acis[0]["owner"] if acis else "alice")
    if not pages:
        print("\nDemo failed: the crawl fetched no page.", file=sys.stderr)
        return 1
    return 0


def scrapy(root: Path, *args: str) -> None:
    """Run ``scrapy ARGS`` in ``root`` as a user would, with its output on the terminal."""
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(root / DATA_DIR)}
    command = ["scrapy", *args]
    print(f"\n$ {' '.join(command)}", flush=True)  # flush: the child writes to the same terminal
    try:
        result = subprocess.run([sys.executable, "-m", *command], cwd=root, env=env, timeout=STEP_TIMEOUT)  # noqa: S603 - our own steps
    except subprocess.TimeoutExpired:
        raise StepFailed(f"`{' '.join(command)}` did not finish in {STEP_TIMEOUT} s") from None
    if result.returncode != 0:
        raise StepFailed(f"`{' '.join(command)}` exited with status {result.returncode}")


def read_results(root: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The crawl summary (``.webrace/last-crawl.json``) and the page items (``pages.jsonl``)."""
    try:
        summary = json.loads((root / DATA_DIR / "last-crawl.json").read_text(encoding="utf-8"))
        lines = (root / "pages.jsonl").read_text(encoding="utf-8").splitlines()
        return summary, [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError) as exc:  # the crawl exited 0 but left no usable results
        raise StepFailed(f"cannot read the crawl's results: {exc}") from None


# -- the demo's own summary -------------------------------------------------------------------


def report(summary: dict[str, Any], pages: list[dict[str, Any]], base: str, server: demo_server.DemoServer) -> None:
    print("\n=== The crawl, summed up ===\n")
    print(format_summary(summary))
    for category, title in (("ignored", "Ignored"), ("failed", "Failed"), ("error", "Errors")):
        print_reasons(f"{title}, by reason:", summary.get(f"{category}_by_reason", {}))
    print_pages(pages, base)
    print_coalescing(pages)
    print_server_check(summary.get("stats", {}), server)


def print_reasons(title: str, reasons: dict[str, int]) -> None:
    if not reasons:
        return
    print(f"\n{title}")
    for reason, count in reasons.items():
        print(f"  {reason:<10} {count:>3}  {REASONS.get(reason, '')}".rstrip())


def print_pages(pages: list[dict[str, Any]], base: str) -> None:
    print(f"\nPages fetched: {len(pages)}")
    if not pages:
        return
    rows = [(page_path(p["url"], base), str(p["depth"]), ", ".join(p["owners"])) for p in pages]
    rows.sort()
    header = ("PATH", "DEPTH", "OWNERS")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def print_acis(acis: list[dict[str, Any]], pages: list[dict[str, Any]], base: str, stats: dict[str, Any]) -> None:
    """What each owner is told: the ACIs the filtering processor made from their keywords."""
    print(f"\nACIs (what is relevant to whom): {len(acis)}")
    rows = sorted(((a["owner"], f"{a['relevance']:g}", page_path(a["uri"], base), a.get("title") or "") for a in acis),
                  key=lambda r: (r[0], -float(r[1]), r[2]))
    header = ("OWNER", "RELEVANCE", "PATH", "TITLE")
    if rows:
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    dropped = stats.get("webrace/bodies_dropped", 0)
    kept = sum(1 for p in pages if p.get("kept"))
    print(f"Bodies kept: {kept} of {len(pages)}; {dropped} relevant to no owner were dropped "
          "(their meta-info stays, so the next round is still a conditional GET).")


def page_path(url: str, base: str) -> str:
    """The path of a page on the demo site; any other URL in full (there should be none)."""
    if not url.startswith(base + "/"):
        return url
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def print_coalescing(pages: list[dict[str, Any]]) -> None:
    if not pages:
        return
    owners = sorted({owner for page in pages for owner in page["owners"]})
    shared = [page for page in pages if len(page["owners"]) > 1]
    print(
        f"\nCoalesced: {len(shared)} of {len(pages)} pages were fetched for more than one owner "
        f"({', '.join(owners)}): one download each, one item naming every owner."
    )


def print_server_check(stats: dict[str, Any], server: demo_server.DemoServer) -> None:
    """Cross-check the crawl against what the server saw: no page twice, and every request
    the crawler sent reached 127.0.0.1 (the external links were never requested)."""
    paths = Counter(server.hits)
    robots = paths.pop("/robots.txt", 0)
    twice = sorted(path for path, n in paths.items() if n > 1)
    # Page requests that passed the exclusion checks, plus robots.txt fetches: all HTTP the
    # crawl did (downloader/request_count would also count any local data: request).
    sent = stats.get("webrace/requested", 0) + stats.get("robotstxt/request_count", 0)
    print(
        f"Demo server: {sum(paths.values())} page request(s) and {robots} for robots.txt; "
        + (f"downloaded more than once: {', '.join(twice)}." if twice else "no page was downloaded twice.")
    )
    if sent == len(server.hits):
        print(f"All {sent} requests the crawler sent went to the demo server: nothing left 127.0.0.1.")
    else:
        print(f"Warning: the crawler sent {sent} requests but the demo server saw {len(server.hits)}.")


def print_files(root: Path, kept: bool) -> None:
    print(f"\nFiles, in {root}:")
    for name, what in (
        ("urds.xml", "the URDs added, with this run's address"),
        ("pages.jsonl", "one JSON object per fetched page (url, owners, depth, status, links...) and per ACI"),
        ("scrapy.cfg", "makes this a project directory: `scrapy` commands here use webrace.settings"),
        (f"{DATA_DIR}/urd.sqlite", "the URD-DB (`scrapy urd list`)"),
        (f"{DATA_DIR}/aci.sqlite",
         "the ACIs (`scrapy aci list --owner alice`; on the web: `scrapy user add alice`, `scrapy web serve`)"),
        (f"{DATA_DIR}/objects/", "every version of every page kept (`scrapy store versions URL`)"),
        (f"{DATA_DIR}/last-crawl.json", "the crawl summary, for scripts"),
    ):
        print(f"  {name:<23} {what}")
    if not kept:
        print("This directory is temporary and is removed now: `python -m webrace.demo --keep DIR` keeps one.")


def print_tips(root: Path, base: str, owner: str) -> None:
    """Commands that work as printed in the kept directory (tested in tests/test_demo.py)."""
    port = urlsplit(base).port
    print(f"\nLook around; the commands of the tutorial (docs/tutorial.md) work in this directory, with its address:\n"
          f"  cd {shlex.quote(str(root))}\n"
          f"  scrapy urd list\n"
          f"  scrapy aci list --owner {owner}\n"
          f"  scrapy store versions {base}/\n"
          f"Crawl again (a re-crawl: conditional GETs), with the site served on the address the URDs name:\n"
          f"  python -m webrace.demo.server --port {port} &\n"
          f"  scrapy urd due --all && scrapy crawl urd -O round2.jsonl")
    overridden = [name for name in ("SCRAPY_SETTINGS_MODULE", "WEBRACE_DATA_DIR") if os.environ.get(name)]
    if overridden:
        print(f"Note: your environment sets {' and '.join(overridden)}, which the commands above would follow "
              f"instead of this directory's scrapy.cfg and {DATA_DIR}: `unset {' '.join(overridden)}` first.")


if __name__ == "__main__":
    raise SystemExit(main())
