"""``scrapy ipmicra delegate ...`` and ``scrapy ipmicra simulate ...``: IPMicra (seed 002) from
the command line.

    scrapy ipmicra delegate --rir FILE [--rir FILE...] [--subnets FILE] --crawlers CRAWLERS.json
        --latency LATENCY.csv --urls URLS.txt [--strategy knowledge|search] [--threshold-ms 50] -o OUT.jsonl
    scrapy ipmicra simulate --crawlers N --urls M [--seed S] [--threshold-ms 50]
    scrapy ipmicra samples DIR

``delegate`` builds the hierarchy from RIR delegated-extended files (and finer subnets, one
CIDR per line), registers the crawlers (a JSON list of ``{"id", "ip", "capacity"}``), and
delegates every URL (one per line, host an IP literal) in order, probing through the
latency table (CSV ``crawler,ip,ms``: probing crawler c for a URL costs one probe and reads
the row of c and the URL's IP). ``--strategy knowledge`` (the default) keeps every probe as
knowledge and probes only where it cannot decide (``--regret``: the share of a page's latency
a choice may lose rather than probe; ``--probe-budget``: the probes a URL it aims to spend,
after ``--probe-credit`` probes a crawler, beyond which a probe must be worth more; ``-1``: no
budget); ``--strategy search`` is the seed's bottom-up search
(``--threshold-ms``, ``--lookahead``). ``OUT.jsonl`` gets one line per URL, ``{"url", "ip",
"crawler", "probes"}``, in input order; a line that is not such a URL is skipped and
counted; a summary goes to stderr. Any error in the inputs: a message naming the file and
line, exit 1, and no output file. ``samples DIR`` copies small inputs of every kind, shipped in
the package (``webrace/demo/ipmicra/``), into ``DIR`` and prints the ``delegate`` command that
runs on them: the tutorial's, and a model for one's own files.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import Counter
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.commands import ends_quietly_on_closed_pipe
from webrace.outputs import output_problem, write_output

PROGRESS_S = 10.0  # seconds between two progress lines of `delegate` on stderr
# A simulated world `simulate` builds at most (its time grows with crawlers x URLs: 100 x 1,000
# takes about 40 s; 99999999999 of either never ended)
MAX_SIM_CRAWLERS = 1_000
MAX_SIM_URLS = 100_000

if TYPE_CHECKING:
    from webrace.delegation import Hierarchy

# `samples DIR`: the shipped inputs (made up, in the real formats), with what each one is
SAMPLES = {
    "delegated-ripencc-extended-sample": "RIR records (registry|cc|type|start|value|date|status|org): the IP hierarchy",
    "crawlers.json": "the crawlers: id, address, capacity (null: no limit)",
    "latency.csv": "crawler,ip,ms: what a probe of a URL's address by a crawler measures",
    "urls.txt": "the URLs to delegate, one a line, their hosts IP literals",
}
# Where real RIR files come from (each RIR publishes one a day; --rir takes several)
RIR_SOURCES = ("the five RIRs' delegated-extended statistics files, e.g. "
               "https://ftp.ripe.net/pub/stats/ripencc/delegated-ripencc-extended-latest, and alike "
               "ftp.arin.net/pub/stats/arin/, ftp.apnic.net/stats/apnic/, ftp.lacnic.net/pub/stats/lacnic/, "
               "ftp.afrinic.net/pub/stats/afrinic/")


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: every URL delegated, or skipped as named on stderr (a line that is no URL, an address no "
        "crawler reaches); the simulation printed; 1: an input file that cannot be used, an output that "
        "cannot be written"
    )
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("delegate --rir FILE [--rir FILE...] [--subnets FILE] --crawlers CRAWLERS.json --latency LATENCY.csv "
                "--urls URLS.txt [--strategy knowledge|search] [--threshold-ms 50] -o OUT.jsonl | "
                "simulate --crawlers N --urls M [--seed S] | samples DIR")

    def short_desc(self) -> str:
        return "IPMicra: delegate URLs to the nearest crawler through an IP hierarchy; simulate it"

    def long_desc(self) -> str:
        return (f"{self.short_desc()}. delegate: one JSON line per URL in -o, a summary on stderr. --rir: "
                f"{RIR_SOURCES}. samples DIR: small made-up inputs of every kind copied into DIR, and the "
                "delegate command that runs on them. simulate: the methods compared on a simulated Internet.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--rir", action="append", default=[], metavar="FILE",
                            help="RIR delegated-extended file (repeatable): the RIRs publish them, see above")
        parser.add_argument("--subnets", metavar="FILE", help="finer subnets, one CIDR per line (optional)")
        parser.add_argument("--crawlers", metavar="CRAWLERS.json|N",
                            help="delegate: JSON list of crawlers; simulate: how many")
        parser.add_argument("--latency", metavar="LATENCY.csv", help="crawler,ip,ms rows the probes read")
        parser.add_argument("--urls", metavar="URLS.txt|M", help="delegate: URLs, one per line; simulate: how many")
        parser.add_argument("--strategy", choices=("knowledge", "search"), default="knowledge",
                            help="knowledge: probes kept, a probe only where they cannot decide (default); "
                                 "search: the seed's bottom-up search")
        parser.add_argument("--regret", type=float, default=0.003,
                            help="knowledge: share of a page's latency a choice may lose rather than probe "
                                 "(default 0.003)")
        parser.add_argument("--probe-budget", type=float, default=0.7,
                            help="knowledge: probes a URL the run aims to spend, beyond which a probe must be "
                                 "worth more (default 0.7; -1: no budget)")
        parser.add_argument("--probe-credit", type=float, default=20.0,
                            help="knowledge: probes a crawler for learning where the crawlers are, before the "
                                 "budget counts (default 20)")
        parser.add_argument("--explore", type=float, default=1.0,
                            help="knowledge: while crawlers are full, probes a URL that may look among the pages "
                                 "they hold for one cheap to send away, while all probes stay under 0.9 a URL "
                                 "(default 1; 0: none; at most 4)")
        parser.add_argument("--threshold-ms", type=float, default=50.0, help="search: probing threshold (default 50)")
        parser.add_argument("--lookahead", type=int, default=1,
                            help="search: levels looked at past the first probe under the threshold "
                                 "(-1: the paper's stop)")
        parser.add_argument("-o", "--output", metavar="OUT.jsonl", help="delegate: where the decisions go")
        parser.add_argument("--seed", type=int, default=1, help="simulate: the world's seed")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from webrace.delegation.choice import MAX_EXPLORE
        from webrace.delegation.tables import InputError

        if not args or args[0] not in ("delegate", "simulate", "samples"):
            raise UsageError("expected `delegate`, `simulate` or `samples DIR`")
        if len(args) != (2 if args[0] == "samples" else 1):
            raise UsageError("`samples` takes one directory" if args[0] == "samples"
                             else f"`{args[0]}` takes options only, not {shlex.join(args[1:])}")
        lookahead = None if opts.lookahead < 0 else opts.lookahead
        if not (opts.regret >= 0 and opts.probe_credit >= 0 and (opts.probe_budget >= 0 or opts.probe_budget == -1)):
            raise UsageError("--regret and --probe-credit must be 0 or more, --probe-budget 0 or more (-1: no budget)")
        if not opts.threshold_ms >= 0:  # NaN too: every comparison with it is false
            raise UsageError(f"--threshold-ms {opts.threshold_ms:g}: must be 0 or more")
        if not 0 <= opts.explore <= MAX_EXPLORE:
            raise UsageError(f"--explore {opts.explore:g}: 0 to {MAX_EXPLORE} probes a URL")
        self.budget = {"regret": opts.regret, "probe_budget": None if opts.probe_budget == -1 else opts.probe_budget,
                       "probe_credit": opts.probe_credit, "explore": opts.explore}
        try:
            if args[0] == "delegate":
                self.delegate(opts, lookahead)
            elif args[0] == "samples":
                self.samples(args[1])
            else:
                self.simulate(opts, lookahead)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1

    def delegate(self, opts: argparse.Namespace, lookahead: int | None) -> None:
        from webrace.delegation import DelegationError, Delegator, TableProber, UnknownProbe
        from webrace.delegation.tables import InputError, read_crawlers, read_latency, read_urls, unreachable

        missing = [flag for flag, value in (("--rir", opts.rir), ("--crawlers", opts.crawlers),
                                            ("--latency", opts.latency), ("--urls", opts.urls),
                                            ("-o", opts.output)) if not value]
        if missing:
            raise UsageError(f"`delegate` needs {', '.join(missing)}")
        problem = output_problem(opts.output)
        if problem:
            raise InputError(f"{opts.output}: cannot write: {problem}")
        hierarchy = self._hierarchy(opts)
        crawlers = read_crawlers(opts.crawlers)
        urls, skipped = read_urls(opts.urls)
        ids = {crawler.id for crawler in crawlers}
        # only the rows a probe can read: a probe is of a URL's address, by a registered crawler
        rows = read_latency(opts.latency, ips={ip for _, _, ip in urls}, crawlers=ids)
        dead = unreachable(rows, ids)
        skipped += [(number, f"{opts.urls}:{number}: skipped: no crawler can reach {ip} (every latency to it is inf)")
                    for number, _, ip in urls if ip in dead]
        urls = [(number, url, ip) for number, url, ip in urls if ip not in dead]
        # the URLs are a batch: the delegator knows how many are left (its horizon); the table is
        # one moment's measurements, so the clock stands still: read as it runs, its drift terms
        # moved variances by 1e-12, which turned near-ties, and the same files gave different outputs;
        # and a whole second: a sum of n fractional times over n is not always the time again, so the
        # same files gave outputs that depended on the instant they were read (issue 48)
        start = float(int(time.time()))
        delegator = Delegator(hierarchy, TableProber(rows), threshold_ms=opts.threshold_ms,
                              lookahead=lookahead, strategy=opts.strategy, horizon=len(urls), clock=lambda: start,
                              **self.budget)
        for crawler in crawlers:
            delegator.register(crawler)
        decided, reasons, probes = [], Counter(), 0
        shown = time.monotonic()
        for done, (number, url, ip) in enumerate(urls):
            if time.monotonic() - shown >= PROGRESS_S:  # a long batch says how far it is
                shown = time.monotonic()
                print(f"delegated {done:,} of {len(urls):,} URL(s), {probes:,} probe(s) "
                      f"({probes / max(1, done):.2f} per URL)", file=sys.stderr, flush=True)
            try:
                decision = delegator.delegate(url)
            except UnknownProbe as exc:
                raise InputError(f"{opts.latency}: {exc} (needed by {opts.urls}:{number})") from None
            except DelegationError as exc:
                raise InputError(f"{opts.urls}:{number}: {exc}") from None
            probes += decision.probes
            reasons[decision.reason] += 1
            decided.append((url, ip, decision.probes))
        # where each URL ended up: making room on a full crawler moves pages decided earlier
        lines = [json.dumps({"url": url, "ip": str(ip), "crawler": delegator.assigned(url), "probes": n})
                 for url, ip, n in decided]
        for _, message in sorted(skipped):
            print(message, file=sys.stderr)
        try:
            write_output(opts.output, lambda handle: handle.writelines(f"{line}\n".encode() for line in lines))
        except OSError as exc:
            raise InputError(f"{opts.output}: cannot write: {exc.strerror or exc}") from None
        loads = ", ".join(f"{c} {delegator.load(c)}" for c in delegator.crawlers)
        print(f"Delegated {len(lines)} URL(s) with {probes} probe(s) ({probes / max(1, len(lines)):.2f} per URL); "
              f"skipped {len(skipped)}; by reason: {', '.join(f'{k} {v}' for k, v in sorted(reasons.items()))}; "
              f"pages per crawler: {loads}", file=sys.stderr)

    @staticmethod
    def samples(directory: str) -> None:
        """The shipped inputs copied into ``directory`` (made if missing; a file of theirs already
        there is an error, and nothing is copied), and the ``delegate`` command for them."""
        from webrace.delegation.tables import InputError

        target = Path(directory)
        there = [name for name in SAMPLES if (target / name).exists() or (target / name).is_symlink()]
        if there:
            raise InputError(f"{target / there[0]} exists: give a new or empty directory")
        try:
            target.mkdir(parents=True, exist_ok=True)
            for name in SAMPLES:
                (target / name).write_bytes(files("webrace.demo").joinpath("ipmicra", name).read_bytes())
        except OSError as exc:
            raise InputError(f"{exc.filename or target}: cannot write: {exc.strerror or exc}") from None
        width = max(map(len, SAMPLES))
        print(f"Sample IPMicra inputs (made up, in the real formats) in {directory}:")
        for name, what in SAMPLES.items():
            print(f"  {name:<{width}}  {what}")
        rir, crawlers, latency, urls = (shlex.quote(str(target / name)) for name in SAMPLES)
        print("Delegate their URLs:")
        print(f"  scrapy ipmicra delegate --rir {rir} --crawlers {crawlers} --latency {latency} --urls {urls} "
              f"-o {shlex.quote(str(target / 'out.jsonl'))}")

    @staticmethod
    def _hierarchy(opts: argparse.Namespace) -> Hierarchy:
        from webrace.delegation import Hierarchy, RirError
        from webrace.delegation.tables import InputError, read_lines

        hierarchy = Hierarchy()
        for path in opts.rir:
            try:
                hierarchy.add_rir(path)
            except RirError as exc:  # its message names the file (and line) already
                raise InputError(str(exc)) from None
        for number, line in enumerate(read_lines(opts.subnets) if opts.subnets else (), 1):
            cidr = line.split("#", 1)[0].strip()
            if cidr:
                try:
                    hierarchy.add_subnet(cidr)
                except ValueError as exc:
                    raise InputError(f"{opts.subnets}:{number}: {exc}") from None
        return hierarchy

    def simulate(self, opts: argparse.Namespace, lookahead: int | None) -> None:
        from webrace.delegation import run_probe_all, run_random, run_simulation, simulate

        try:
            crawlers, urls = int(opts.crawlers or 4), int(opts.urls or 1000)
        except ValueError:
            raise UsageError("`simulate` takes --crawlers N and --urls M (numbers)") from None
        if not (1 <= crawlers <= MAX_SIM_CRAWLERS and 1 <= urls <= MAX_SIM_URLS):
            raise UsageError(f"`simulate` takes --crawlers 1 to {MAX_SIM_CRAWLERS:,} and --urls 1 to {MAX_SIM_URLS:,}")
        sim = simulate(crawlers, urls, opts.seed)
        rows = {"random": run_random(sim, opts.seed), "probe every crawler": run_probe_all(sim),
                f"IPMicra {opts.threshold_ms:g} ms, the seed's search": run_simulation(
                    sim, threshold_ms=opts.threshold_ms, lookahead=lookahead, strategy="search"),
                "IPMicra, kept knowledge": run_simulation(sim, **self.budget)}
        base, downloads = rows["random"]["crawl_time_ms"], rows["random"]["download_ms"]
        print(f"{crawlers} crawlers, {urls} URLs, world seed {opts.seed}")
        print(f"  {'method':<36} {'nearest':>8} {'probes/URL':>10} {'last 10%':>8} {'crawl s':>9} {'/random':>8} "
              f"{'/best':>7} {'download s':>10} {'/random':>8}")
        for name, r in rows.items():
            print(f"  {name:<36} {r['nearest_share']:>8.1%} {r['probes_per_url']:>10.2f} "
                  f"{r['probes_last_10pct']:>8.2f} {r['crawl_time_ms'] / 1000:>9.1f} {r['crawl_time_ms'] / base:>8.3f} "
                  f"{r['latency_ratio']:>7.3f} {r['download_ms'] / 1000:>10.1f} {r['download_ms'] / downloads:>8.3f}")
        print("  crawl s: round trips summed; /best: against the best assignment within capacity; download s: "
              "32 KB pages over TCP (see webrace.delegation.simulator)")
