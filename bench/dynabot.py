"""Benchmark: DynaBot over three sets of local services, baseline and candidate in one run.

Sets (each started on 127.0.0.1, each with its members and look-alikes per service class):

- ``test``: the project's own test services (``webrace/demo/services.py``);
- ``holdout``: services written by someone who did not read the prober, in the styles real
  BLAST sites have (``bench/holdout_services.py``, ground truth in ``holdout_services.md``);
- ``holdout2``: imitations of named public BLAST servers, written independently of both
  (``bench/holdout2_services.py``), when present.

For each set and shipped service class, the real ``scrapy crawl dynabot`` with the trace
frontier analyses every listed service, three ways:

- ``baseline``: the code and service classes of ``--baseline REV`` (default 05d7203, before
  DynaBot read its answers), as shipped then;
- ``plain``: today's code without the probing heuristics (the seed's Algorithm 2:
  ``WEBRACE_DYNABOT_USE_HINTS=False``);
- ``shipped``: today's code and service classes, as shipped.

Printed: members found, false claims, probes per member found and per source; the hostile
services' outcomes; the seed's Tables 2 and 3 for the shipped run over the test set.

    pip install -e '.[bench]' && python bench/dynabot.py [--baseline REV] [--sets test,holdout,holdout2]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from webrace.demo.services import CLASSES  # noqa: E402
from webrace.dynabot.stats import format_report  # noqa: E402
from webrace.urls import normalize  # noqa: E402

SETS = {"test": ("webrace.demo.services", "Services"), "holdout": ("holdout_services", "HoldoutServices"),
        "holdout2": ("holdout2_services", "Holdout2Services")}
VARIANTS = ("baseline", "plain", "shipped")


def baseline_code(tmp: Path, rev: str) -> Path:
    """Revision ``rev``'s packages and service classes, extracted under ``tmp``."""
    target = tmp / f"baseline-{rev}"
    if not target.exists():
        target.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "webrace", "rules", "scd", "serviceclasses"],
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def run(seeds: list[str], service_class: str, variant: str, workdir: Path, code: Path) -> dict:
    (workdir / "seeds.txt").write_text("\n".join(seeds) + "\n")
    out = workdir / "items.jsonl"
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(workdir / "data"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "dynabot", "-a", f"scd={code / 'serviceclasses' / service_class}.xml",
         "-a", f"seeds={workdir / 'seeds.txt'}", "-O", str(out), "-s", "DOWNLOAD_DELAY=0",
         "-s", "WEBRACE_DELAY_FACTOR=0", "-s", f"WEBRACE_DYNABOT_USE_HINTS={variant != 'plain'}",
         # one server stands in for every site of these sets: the per-site POST cap is a site's
         "-s", "WEBRACE_DYNABOT_MAX_POSTS_PER_SITE=1000", "-s", "LOG_LEVEL=WARNING"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"dynabot ({variant}) failed:\n{done.stderr[-3000:]}")
    traces = [item for line in out.read_text().splitlines() if (item := json.loads(line))["kind"] == "trace"]
    figures = workdir / "data" / "last-dynabot.json"
    return {"traces": traces, "wall": time.monotonic() - started,
            "figures": json.loads(figures.read_text()) if figures.exists() else None}


def score(result: dict, members: list[str], others: list[str]) -> dict:
    # sources are named as the crawl names them: normalised (query arguments sorted, ...)
    members, others = [normalize(u) for u in members], [normalize(u) for u in others]
    traces = {t["source"]: t for t in result["traces"]}
    matched = {url for url, t in traces.items() if t["outcome"] == "match"}
    found = matched & set(members)
    counted = [t for url, t in traces.items() if url in set(members) | set(others)]
    return {"members": len(members), "found": len(found), "false": len(matched & set(others)),
            "missed": sorted(urlsplit(url).path.strip("/").split("/")[0] for url in set(members) - found),
            "probes_per_found": sum(traces[u]["probes"] for u in members if u in traces) / max(1, len(found)),
            "probes_per_source": sum(t["probes"] for t in counted) / max(1, len(counted))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="05d7203", help="git revision of the baseline (default %(default)s)")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: test, holdout, holdout2")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: baseline, plain, shipped")
    args = parser.parse_args(argv)
    variants = [v for v in VARIANTS if v in args.variants.split(",")]
    rows, hostile_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"baseline": baseline_code(Path(tmp), args.baseline), "plain": ROOT, "shipped": ROOT}
        for name in args.sets.split(","):
            module_name, class_name = SETS[name]
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                print(f"{name}: not run ({exc})")
                continue
            starter = getattr(module, class_name)
            with starter() as services:
                hostile = list(getattr(services, "hostile", []) or [])
                for service_class in CLASSES:
                    members = services.members.get(service_class, [])
                    others = services.non_members.get(service_class, [])
                    if not members:
                        continue
                    for variant in variants:
                        workdir = Path(tmp) / f"{name}-{service_class}-{variant}"
                        workdir.mkdir()
                        seeds = members + others + (hostile if service_class == "nucleotide_blast" else [])
                        result = run(seeds, service_class, variant, workdir, codes[variant])
                        rows.append((name, service_class, variant, score(result, members, others)))
                        print(f"{name} {service_class} {variant}: {rows[-1][3]['found']}/{len(members)} found, "
                              f"{rows[-1][3]['false']} false, {result['wall']:.0f} s", flush=True)
                        if service_class == "nucleotide_blast":
                            by_source = {t["source"]: t for t in result["traces"]}
                            hostile_rows += [(name, variant, url.rstrip("/").rsplit("/", 1)[-1],
                                              by_source[normalize(url)]) for url in hostile
                                             if normalize(url) in by_source]
                        if name == "test" and variant == "shipped" and result["figures"]:
                            print(f"\n{service_class}, shipped: the seed's Tables 2 and 3")
                            print(format_report(result["figures"]))
    print("\n| set | class | variant | members found | false claims | probes per member found | probes per source "
          "| members missed |")
    print("|---|---|---|---|---|---|---|---|")
    for name, service_class, variant, r in rows:
        print(f"| {name} | {service_class} | {variant} | {r['found']}/{r['members']} ({r['found'] / r['members']:.0%}) "
              f"| {r['false']} | {r['probes_per_found']:.1f} | {r['probes_per_source']:.1f} | "
              f"{', '.join(r['missed']) or '-'} |")
    if hostile_rows:
        print("\n| set | variant | hostile service | outcome | probes | reason |")
        print("|---|---|---|---|---|---|")
        for name, variant, service, trace in hostile_rows:
            print(f"| {name} | {variant} | {service} | {trace['outcome']} | {trace['probes']} | "
                  f"{(trace.get('reason') or '-')[:90]} |")
    for name in dict.fromkeys(row[0] for row in rows):
        totals = []
        for variant in variants:
            mine = [r for n, _, v, r in rows if n == name and v == variant]
            totals.append(f"{variant} {sum(r['found'] for r in mine)}/{sum(r['members'] for r in mine)} found, "
                          f"{sum(r['false'] for r in mine)} false")
        print(f"{name}: " + "; ".join(totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
