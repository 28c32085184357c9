"""Benchmark: IPMicra with probes kept as knowledge (issue 20; ``strategy="knowledge"``, the
default) against the seed's procedure as it was (the baseline: ``strategy="search"``, probing
threshold 50 ms, one more level looked at), in one run, over a sweep of simulated worlds
(``webrace.delegation.simulator.World``), each with the same URLs, crawlers and latency table
for both.

Per world: the share of URLs given to a nearest crawler (the smallest latency in the table),
probes per URL overall and for the last 10% of the URLs, and the total latency against the
best assignment within capacity (a min-cost assignment over capacity slots,
``webrace.delegation.optimum.best_assignment``), baseline and candidate side by side; and the
best assignment's own nearest share, since with capacities that bind nobody reaches 100%.
Goals, on every world with 100 organisations or more: at most 2.0 probes per URL, at most 1.0
for the last 10%, latency within 1.05x the best, and to a nearest crawler at least 85% of the
URLs or, where the best assignment within capacity itself sends fewer than 90% there, within
5 points of its share (no assignment that respects the capacities can do better than it).

The sweep has three parts. The range (organisations 20 to 500, nesting depth 1 to 4, CIDR
blocks or not, the registries' blocks in the files or not, many URLs per organisation and few,
crowded regions, noisy routes, capacities that bind and that do not); the method was developed
on the first seven. Worlds drawn at random over the same ranges from a seed the method was
never run on before these numbers were taken (``--held-out N``, seed ``--draw``). And harder
worlds the simulator's defaults do not produce (``HARD``, and ``--hard-draws N`` drawn at random
over wider ranges, seed ``--hard-draw``): a crawler in every country and no two in one, 24 to
32 crawlers, capacities at 1.1x the fair share, depth 5, one or two URLs an organisation, and
latency that is not geography's alone (routes asymmetric between countries, slow links inside
a region, noisy routes, noisy probes).

Prints the table and writes ``bench/ipmicra.png`` (probes per URL along the run).

    pip install -e '.[bench]' && nice python bench/ipmicra.py [--quick] [--held-out 8] [--draw 90211] \
        [--hard-draws 2] [--hard-draw 31337] [--jobs 2] [--worlds SUBSTRING] [--explore 1]
        nice python bench/ipmicra.py --capacity-draws 8080,6502 [--explore 1] [--jobs 2]
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webrace.delegation import Delegator, World, run_simulation, simulate  # noqa: E402
from webrace.delegation.choice import MAX_EXPLORE  # noqa: E402

DEFAULT_EXPLORE = inspect.signature(Delegator).parameters["explore"].default

URLS = 1000
GOAL_PROBES, GOAL_TAIL, GOAL_RATIO, GOAL_NEAREST, GOAL_ORGS = 2.0, 1.0, 1.05, 0.85, 100
GOAL_NEAREST_GAP = 0.05  # where the best within capacity is itself short of 85% + this: within this of it
BASELINE = {"strategy": "search", "threshold_ms": 50.0, "lookahead": 1}
CANDIDATE = {"strategy": "knowledge"}


@dataclass(frozen=True)
class Case:
    name: str
    world: World
    crawlers: int = 12
    capacity: float | None = None  # times the fair share of pages (URLs / crawlers); None: no limit
    seed: int = 1
    held_out: bool = False
    part: str = "range"  # range, drawn, hard

    def pages(self) -> int | None:
        return None if self.capacity is None else math.ceil(self.capacity * URLS / self.crawlers)


RANGE = [
    Case("the seed's world (4 registries, 160 orgs)", World()),
    Case("5 regions, 200 orgs, nested non-CIDR, 12x167", World(regions=5, orgs=200, depth=3, children=(2, 3)),
         capacity=2.0),
    Case("5 regions, 200 orgs, nested non-CIDR", World(regions=5, orgs=200, depth=3, children=(2, 3)), seed=2),
    Case("500 orgs, about 2 URLs each", World(regions=5, orgs=500, zipf=0.0)),
    Case("no registry blocks in the files, 12x167", World(regions=5, orgs=200, top_blocks=False), capacity=2.0),
    Case("20 orgs", World(orgs=20)),
    Case("the seed's world, 4 crawlers", World(), crawlers=4, seed=3),
    Case("60 orgs, many URLs each, 3 pages a host", World(orgs=60, zipf=1.3, pages_per_host=3.0), seed=4),
    Case("CIDR blocks only, depth 1, 150 orgs", World(orgs=150, depth=1, non_cidr=False), seed=5),
    Case("depth 4, 6 regions, 300 orgs, 12x167", World(regions=6, orgs=300, depth=4, children=(2, 3)),
         capacity=2.0, seed=6),
    Case("crowded: half of 16 crawlers in one region", World(orgs=250, crowded=0.5), crawlers=16, seed=7),
    Case("tight capacity, 1.25x the fair share", World(regions=5, orgs=200), capacity=1.25, seed=8),
    Case("noisy routes (0.3), 10% misplaced orgs", World(orgs=200, path_noise=0.3, anomalous=0.1), seed=9),
    Case("8 regions x 2 countries, 400 orgs, 20 crawlers", World(regions=8, countries=2, orgs=400, zipf=0.7),
         crawlers=20, capacity=2.0, seed=10),
]
QUICK = RANGE[:4]
PARTS = ("range", "drawn", "hard")
HARD = [
    Case("24 crawlers, one a country, 443 orgs, 2 URLs each",
         World(regions=4, countries=6, orgs=443, depth=1, zipf=0.0, spread=True, path_noise=0.19),
         crawlers=24, capacity=2.0, seed=11, part="hard"),
    Case("asymmetric routes, slow links in regions, 16x",
         World(regions=5, orgs=300, asymmetry=0.3, slow_links=0.3, spread=True), crawlers=16, capacity=2.0, seed=12,
         part="hard"),
    Case("capacity 1.1x, half of the crawlers in one region", World(regions=5, orgs=250, crowded=0.5),
         capacity=1.1, seed=13, part="hard"),
    Case("500 orgs, 2 URLs each, depth 5, 20 one a country",
         World(regions=5, countries=4, orgs=500, zipf=0.0, depth=5, children=(2, 3), spread=True), crawlers=20,
         seed=14, part="hard"),
    Case("noisy routes 0.4, noisy probes 0.15, 16x",
         World(regions=5, orgs=300, path_noise=0.4, probe_noise=0.15, spread=True), crawlers=16, capacity=2.0,
         seed=15, part="hard"),
    Case("the issue's world, asymmetric, no registry blocks",
         World(regions=5, orgs=200, depth=3, children=(2, 3), top_blocks=False, asymmetry=0.25, slow_links=0.2),
         capacity=2.0, seed=16, part="hard"),
    Case("8 regions x 4 countries, 32 one a country, 1.25x",
         World(regions=8, countries=4, orgs=500, zipf=0.5, spread=True), crawlers=32, capacity=1.25, seed=17,
         part="hard"),
]


def held_out(count: int, draw: int) -> list[Case]:
    """Worlds drawn at random over the sweep's ranges."""
    rng = random.Random(draw)
    cases = []
    for n in range(count):
        depth = rng.randint(1, 4)
        world = World(regions=rng.randint(3, 7), countries=rng.randint(2, 6), orgs=rng.randint(20, 500), depth=depth,
                      children=(2, 3) if depth >= 3 else (2, 4), non_cidr=rng.random() < 0.7,
                      top_blocks=rng.random() < 0.6, second_block=rng.uniform(0, 0.5),
                      anomalous=rng.uniform(0, 0.12), zipf=rng.choice([0.0, 0.5, 0.8, 1.0, 1.3]),
                      pages_per_host=rng.choice([1.0, 1.0, 2.0, 4.0]), path_noise=rng.uniform(0.08, 0.3),
                      crowded=rng.choice([0.0, 0.0, 0.3, 0.5]))
        cases.append(Case(f"drawn #{n + 1}", world, crawlers=rng.choice([4, 8, 12, 16, 24]),
                          capacity=rng.choice([None, None, 2.0, 1.5, 1.25]), seed=rng.randint(1000, 9999),
                          held_out=True, part="drawn"))
    return cases


def hard_draws(count: int, draw: int) -> list[Case]:
    """Worlds drawn at random over wider ranges than the simulator's defaults reach: 100 to
    500 organisations, depth up to 5, crawlers one a country or crowded, 12 to 32 of them,
    capacities down to 1.1x the fair share, asymmetric and slow routes, noisy probes."""
    rng = random.Random(draw)
    cases = []
    for n in range(count):
        depth = rng.randint(1, 5)
        spread = rng.random() < 0.6
        world = World(regions=rng.randint(3, 8), countries=rng.randint(2, 6), orgs=rng.randint(100, 500),
                      depth=depth, children=(2, 3) if depth >= 3 else (2, 4), non_cidr=rng.random() < 0.8,
                      top_blocks=rng.random() < 0.5, second_block=rng.uniform(0, 0.5),
                      anomalous=rng.uniform(0, 0.12), zipf=rng.choice([0.0, 0.0, 0.5, 1.0]),
                      pages_per_host=rng.choice([1.0, 1.0, 2.0]), path_noise=rng.uniform(0.1, 0.4),
                      crowded=0.0 if spread else rng.choice([0.0, 0.3, 0.5]), spread=spread,
                      asymmetry=rng.choice([0.0, 0.15, 0.3]), slow_links=rng.choice([0.0, 0.1, 0.3]),
                      probe_noise=rng.choice([0.0, 0.0, 0.1]))
        cases.append(Case(f"hard drawn #{n + 1}", world, crawlers=rng.choice([12, 16, 24, 32]),
                          capacity=rng.choice([None, 2.0, 1.5, 1.25, 1.1]), seed=rng.randint(1000, 9999),
                          held_out=True, part="hard"))
    return cases


def measure(case: Case, candidate: dict = CANDIDATE, repeats: int = 1) -> dict:
    """The baseline and the candidate on the case's world; with ``repeats`` > 1, the candidate
    again ``repeats - 1`` times with its clock jittered (``run_simulation(jitter=k)``): the
    figures of those runs, without the per-URL probes, in ``runs["repeats"]``."""
    sim = simulate(case.crawlers, URLS, case.seed, capacity=case.pages(), world=case.world)
    sim.best()  # the reference, computed once
    runs = {}
    for name, options in (("baseline", BASELINE), ("candidate", candidate)):
        start = time.perf_counter()
        runs[name] = run_simulation(sim, **options)
        runs[name]["seconds"] = time.perf_counter() - start
    runs["binding"] = runs["candidate"]["optimum_nearest_share"] < 1.0
    runs["repeats"] = [runs["candidate"]] + [
        {k: v for k, v in run_simulation(sim, jitter=k, **candidate).items() if k not in ("probes", "assignment")}
        for k in range(1, repeats)]
    return runs


def spread(results: list[tuple[Case, dict]]) -> None:
    """``--repeats``: per world of 100 organisations or more, the candidate's figures over its
    runs (the first exact, the others with the clock jittered), and in how many it met every goal."""
    count = len(results[0][1]["repeats"]) if results else 0
    if count < 2:
        return
    print(f"\nthe candidate over {count} runs a world (one exact, {count - 1} with the clock jittered by up to 1 ms: "
          "near-ties turn), min - max:")
    met_all = 0
    for case, runs in results:
        if case.world.orgs < GOAL_ORGS:
            continue
        rs = runs["repeats"]
        met = sum(not goals(case, r) for r in rs)
        met_all += met == count

        def span(key: str, form: str, rs: list[dict] = rs) -> str:
            values = [r[key] for r in rs]
            return f"{format(min(values), form)} - {format(max(values), form)}"

        name = f"[{case.part}] " + case.name if case.part != "range" else case.name
        print(f"  {name[:52]:<52} latency {span('latency_ratio', '.3f')} | probes/URL {span('probes_per_url', '.2f')}"
              f" | last 10% {span('probes_last_10pct', '.2f')} | nearest {span('nearest_share', '.1%')} "
              f"(goal {nearest_goal(rs[0]['optimum_nearest_share']):.1%}) | every goal met in {met} of {count}")
    print(f"  worlds of {GOAL_ORGS} orgs or more meeting every goal in every run: {met_all}")


def goals(case: Case, r: dict) -> list[str]:
    """The goals the candidate misses on this world (none when it has under 100 organisations)."""
    if case.world.orgs < GOAL_ORGS:
        return []
    nearest = nearest_goal(r["optimum_nearest_share"])
    checks = [(r["probes_per_url"] <= GOAL_PROBES, f"probes {r['probes_per_url']:.2f} > {GOAL_PROBES}"),
              (r["probes_last_10pct"] <= GOAL_TAIL, f"last 10% {r['probes_last_10pct']:.2f} > {GOAL_TAIL}"),
              (r["latency_ratio"] <= GOAL_RATIO, f"latency {r['latency_ratio']:.3f}x > {GOAL_RATIO}x"),
              (r["nearest_share"] >= nearest - 1e-9, f"nearest {r['nearest_share']:.1%} < {nearest:.1%}")]
    return [text for ok, text in checks if not ok]


def nearest_goal(optimum_share: float) -> float:
    """The share to a nearest crawler a world asks for: 85%, or, where the best assignment
    within capacity itself sends fewer than 90% to a nearest crawler, its share less 5 points."""
    return min(GOAL_NEAREST, optimum_share - GOAL_NEAREST_GAP)


def table(results: list[tuple[Case, dict]]) -> bool:
    print(f"\n{URLS} URLs a world; baseline = the seed's search (50 ms, lookahead 1), candidate = kept knowledge; "
          f"each cell baseline -> candidate")
    print(f"{'world':<52} {'orgs':>4} {'crawl.':>6} {'capacity':>8} | {'nearest':>15} {'optimum':>7} | "
          f"{'probes/URL':>12} | {'last 10%':>12} | {'latency/best':>13} | goals (>= 100 orgs)")
    passed = True
    for part in PARTS:
        for case, runs in results:
            if case.part != part:
                continue
            b, c = runs["baseline"], runs["candidate"]
            missed = goals(case, c)
            passed &= not missed
            verdict = "-" if case.world.orgs < GOAL_ORGS else ("met" if not missed else "MISSED: " + "; ".join(missed))
            capacity = "none" if case.capacity is None else f"{case.pages()}{'*' if runs['binding'] else ''}"
            name = f"[{part}] " + case.name if part != "range" else case.name
            print(f"{name[:52]:<52} {case.world.orgs:>4} {case.crawlers:>6} {capacity:>8} | "
                  f"{b['nearest_share']:>6.1%} -> {c['nearest_share']:>5.1%} {c['optimum_nearest_share']:>7.1%} | "
                  f"{b['probes_per_url']:>4.2f} -> {c['probes_per_url']:>4.2f} | "
                  f"{b['probes_last_10pct']:>4.2f} -> {c['probes_last_10pct']:>4.2f} | "
                  f"{b['latency_ratio']:>5.3f} -> {c['latency_ratio']:>5.3f} | {verdict}")
    print("capacity: pages a crawler may take, * where it binds (the best assignment cannot give every URL its "
          "nearest);\noptimum: the best assignment within capacity's own share to a nearest crawler; the nearest goal "
          f"is {GOAL_NEAREST:.0%}, or that share less {GOAL_NEAREST_GAP * 100:.0f} points where it is under "
          f"{GOAL_NEAREST + GOAL_NEAREST_GAP:.0%}")
    for case, _ in results:
        if case.held_out:
            print(f"  {case.name}: {case.world.describe()}, {case.crawlers} crawlers, seed {case.seed}")
    return passed


def summary(results: list[tuple[Case, dict]]) -> None:
    for part in PARTS:
        chosen = [(case, runs) for case, runs in results if case.part == part and case.world.orgs >= GOAL_ORGS]
        if not chosen:
            continue
        for name in ("baseline", "candidate"):
            rs = [runs[name] for _, runs in chosen]
            print(f"  {part:<6} {name:<9} worlds >= {GOAL_ORGS} orgs: {len(rs)}, probes/URL at most "
                  f"{max(r['probes_per_url'] for r in rs):.2f}, last 10% at most "
                  f"{max(r['probes_last_10pct'] for r in rs):.2f}, latency/best at most "
                  f"{max(r['latency_ratio'] for r in rs):.3f}, nearest at least "
                  f"{min(r['nearest_share'] - r['optimum_nearest_share'] for r in rs) * 100:+.1f} points "
                  "from the optimum's")


def plot(results: list[tuple[Case, dict]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG (pip install -e '.[bench]')")
        return
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), sharey=True)
    window = 100
    for ax, name, title in ((axes[0], "baseline", "baseline: the seed's search"),
                            (axes[1], "candidate", "candidate: probes kept as knowledge")):
        curves = []
        for case, runs in results:
            probes = runs[name]["probes"]
            rolling = [sum(probes[max(0, i - window + 1):i + 1]) / (i - max(0, i - window + 1) + 1)
                       for i in range(len(probes))]
            curves.append(rolling)
            ax.plot(range(1, len(rolling) + 1), rolling, linewidth=0.7, alpha=0.45,
                    linestyle=":" if case.held_out else "-")
        mean = [sum(column) / len(column) for column in zip(*curves, strict=True)]
        ax.plot(range(1, len(mean) + 1), mean, color="black", linewidth=2, label="mean over the worlds")
        ax.axhline(GOAL_PROBES, color="red", linewidth=0.8, linestyle="--", label=f"goal overall {GOAL_PROBES}")
        ax.axhline(GOAL_TAIL, color="red", linewidth=0.8, linestyle=":", label=f"goal last 10% {GOAL_TAIL}")
        ax.set(xlabel="URLs delegated", title=title, ylim=(0, 6))
        ax.legend(fontsize=8)
    axes[0].set_ylabel(f"probes per URL (mean of the last {window})")
    fig.suptitle(f"IPMicra: probes per URL along the run, {len(results)} worlds (dotted: held-out)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    print(f"wrote {path}")


def capacity_draws(seeds: list[int], count: int = 10) -> list[Case]:
    """The hard draws of these seeds (``count`` each) where capacities are set, with 100
    organisations or more: the worlds where exploring, and most misses, happen."""
    return [replace(case, name=f"{case.name} of --hard-draw {seed}") for seed in seeds
            for case in hard_draws(count, seed) if case.capacity is not None and case.world.orgs >= GOAL_ORGS]


def measure_exploring(case: Case, explore: float) -> tuple[Case, dict | str]:
    """The candidate on one world, without exploring and with ``explore``."""
    try:
        sim = simulate(case.crawlers, URLS, case.seed, capacity=case.pages(), world=case.world)
    except ValueError as exc:
        return case, str(exc)
    return case, {name: run_simulation(sim, **{**CANDIDATE, "explore": rate})
                  for name, rate in (("off", 0.0), ("on", explore))}


def compare_exploring(seeds: list[int], explore: float, jobs: int) -> None:
    """``--capacity-draws``: exploring off against on, in the same run, world by world and over all."""
    cases = capacity_draws(seeds)
    if jobs > 1 and len(cases) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(jobs, os.cpu_count() or 1, len(cases))) as pool:
            done = list(pool.map(measure_exploring, cases, [explore] * len(cases)))
    else:
        done = [measure_exploring(case, explore) for case in cases]
    done = [(case, runs) for case, runs in done if not isinstance(runs, str)]
    print(f"candidate without exploring -> with explore={explore:g}, {URLS} URLs a world")
    for case, runs in done:
        off, on = runs["off"], runs["on"]
        print(f"  {case.name}: {case.world.orgs} orgs, {case.crawlers} crawlers, {case.capacity}x | "
              f"probes {off['probes_per_url']:.2f} -> {on['probes_per_url']:.2f} | last 10% "
              f"{off['probes_last_10pct']:.2f} -> {on['probes_last_10pct']:.2f} | latency "
              f"{off['latency_ratio']:.3f} -> {on['latency_ratio']:.3f} | missed {len(goals(case, off))} -> "
              f"{len(goals(case, on))}")
    if not done:
        return
    for name in ("off", "on"):
        rs = [(case, runs[name]) for case, runs in done]
        missed = [goals(case, r) for case, r in rs]
        latency = math.exp(sum(math.log(r["latency_ratio"]) for _, r in rs) / len(rs))
        print(f"  exploring {name:<3}: {len(rs)} worlds, goals missed {sum(map(len, missed))} (last 10%: "
              f"{sum(1 for m in missed for g in m if g.startswith('last'))}, latency: "
              f"{sum(1 for m in missed for g in m if g.startswith('latency'))}), worlds missing one "
              f"{sum(1 for m in missed if m)}, latency {latency:.4f}x (geometric mean), probes/URL "
              f"{sum(r['probes_per_url'] for _, r in rs) / len(rs):.3f}, last 10% "
              f"{sum(r['probes_last_10pct'] for _, r in rs) / len(rs):.3f}")


def run(case: Case, candidate: dict = CANDIDATE, repeats: int = 1) -> tuple[Case, dict | str, float]:
    """One world, measured (or why the simulator cannot build it), and the seconds it took."""
    start = time.perf_counter()
    try:
        found: dict | str = measure(case, candidate, repeats)
    except ValueError as exc:  # a drawn world the simulator cannot lay out (an address block too full)
        found = str(exc)
    return case, found, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first four worlds of the range only")
    parser.add_argument("--held-out", type=int, default=8, help="worlds drawn at random (default 8)")
    parser.add_argument("--draw", type=int, default=90211, help="the seed they are drawn with")
    parser.add_argument("--hard-draws", type=int, default=2, help="harder worlds drawn at random (default 2)")
    parser.add_argument("--hard-draw", type=int, default=31337, help="the seed they are drawn with")
    parser.add_argument("--worlds", default="", help="only the worlds whose name holds this text")
    parser.add_argument("--jobs", type=int, default=2, help="worlds measured at once, in processes (default 2)")
    parser.add_argument("--explore", type=float, default=DEFAULT_EXPLORE,
                        help=f"the candidate's explore rate (Delegator(explore=...); "
                             f"default {DEFAULT_EXPLORE:g}; 0: off)")
    parser.add_argument("--capacity-draws", metavar="SEEDS", default="",
                        help="instead of the sweep: the candidate without exploring and with --explore, on the "
                             "capacity-bound hard draws (10 a seed, 100 orgs or more) of these seeds, e.g. 8080,6502")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of the candidate a world: the first exact, the others with the clock jittered "
                             "(default 1); prints each world's spread and how many runs met every goal")
    parser.add_argument("--png", type=Path, default=Path(__file__).with_suffix(".png"))
    args = parser.parse_args()
    if not (0 <= args.held_out <= 100 and 0 <= args.hard_draws <= 100 and 1 <= args.jobs <= 64
            and 0 <= args.explore <= MAX_EXPLORE and 1 <= args.repeats <= 20):
        parser.error(f"--held-out and --hard-draws take 0 to 100, --jobs 1 to 64, --explore 0 to {MAX_EXPLORE}, "
                     "--repeats 1 to 20")
    if args.capacity_draws:
        try:
            seeds = [int(seed) for seed in args.capacity_draws.split(",")]
        except ValueError:
            parser.error(f"--capacity-draws {args.capacity_draws}: seeds are integers, comma-separated")
        if len(seeds) > 100:
            parser.error("--capacity-draws: 100 seeds at most")
        compare_exploring(seeds, args.explore, args.jobs)
        return 0
    candidate = {**CANDIDATE, "explore": args.explore}
    cases = QUICK if args.quick else (RANGE + held_out(args.held_out, args.draw) + HARD
                                      + hard_draws(args.hard_draws, args.hard_draw))
    cases = [case for case in cases if args.worlds.lower() in case.name.lower()]
    results, skipped = [], []
    if args.jobs > 1 and len(cases) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(args.jobs, os.cpu_count() or 1, len(cases))) as pool:
            done = list(pool.map(run, cases, [candidate] * len(cases), [args.repeats] * len(cases)))
    else:
        done = [run(case, candidate, args.repeats) for case in cases]
    for case, found, seconds in done:
        if isinstance(found, str):
            skipped.append(f"{case.name}: {found}")
            continue
        results.append((case, found))
        print(f"  {case.name}: {seconds:.1f} s", file=sys.stderr)
    if args.explore != DEFAULT_EXPLORE:
        print(f"candidate: explore={args.explore:g} (probes of pages full crawlers hold, a URL, at most)")
    passed = table(results)
    for line in skipped:
        print(f"skipped, not a world the simulator can build: {line}")
    summary(results)
    spread(results)
    if results:
        plot(results, args.png)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
