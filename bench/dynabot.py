"""Benchmark: DynaBot over three sets of local services, baseline and candidate in one run.

Sets (each started on 127.0.0.1, each with its members and look-alikes per service class):

- ``test``: the project's own test services (``webrace/demo/services.py``);
- ``holdout``: services written by someone who did not read the prober, in the styles real
  BLAST sites have (``holdout/holdout_services.py``, ground truth in ``holdout_services.md``);
- ``holdout2``: imitations of named public BLAST servers, written independently of both
  (``holdout/holdout2_services.py``), when present;
- ``real``: real open-source web applications installed by ``holdout/realapps/install.py``
  (ground truth in ``holdout/realapps/truth.toml``), with the keyword search class, one crawl per
  application; POSTs are counted from each server's own access log. Its variant ``given`` is
  ``shipped`` told the keyword each application's data holds (``-a keywords=...``, from the
  ground truth), as a user who knows the site would.

For each set and shipped service class, the real ``scrapy crawl dynabot`` with the trace
frontier analyses every listed service, three ways:

- ``baseline``: the code and service classes of ``--baseline REV`` (default 05d7203, before
  DynaBot read its answers), as shipped then;
- ``plain``: today's code without the probing heuristics (the seed's Algorithm 2:
  ``WEBRACE_DYNABOT_USE_HINTS=False``);
- ``shipped``: today's code and service classes, as shipped.

Printed: members found, false claims, probes per member found and per source; the hostile
services' outcomes; the seed's Tables 2 and 3 for the shipped run over the test set.

    pip install -e '.[bench]' && python bench/dynabot.py [--baseline REV] [--sets test,holdout,holdout2,real]
        [--variants baseline,plain,shipped,given] [--apps datasette,omega,...]
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
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "holdout"))  # the hold-out sets: holdout_services, holdout2_services, realapps

from webrace.demo.services import CLASSES  # noqa: E402
from webrace.dynabot.stats import format_report  # noqa: E402
from webrace.urls import normalize  # noqa: E402

SETS = {"test": ("webrace.demo.services", "Services"), "holdout": ("holdout_services", "HoldoutServices"),
        "holdout2": ("holdout2_services", "Holdout2Services")}
REAL = "real"
VARIANTS = ("baseline", "plain", "shipped", "given")  # "given": the real set only
# one server stands in for every site of the imitation sets: the per-site POST cap is a site's
ONE_SERVER = ("-s", "WEBRACE_DYNABOT_MAX_POSTS_PER_SITE=1000")


def baseline_code(tmp: Path, rev: str) -> Path:
    """Revision ``rev``'s packages and service classes, extracted under ``tmp``."""
    target = tmp / f"baseline-{rev}"
    if not target.exists():
        target.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "webrace", "rules", "scd", "serviceclasses"],
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def run(seeds: list[str], service_class: str, variant: str, workdir: Path, code: Path,
        extra: tuple[str, ...] = ONE_SERVER) -> dict:
    (workdir / "seeds.txt").write_text("\n".join(seeds) + "\n")
    out = workdir / "items.jsonl"
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(workdir / "data"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "dynabot", "-a", f"scd={code / 'serviceclasses' / service_class}.xml",
         "-a", f"seeds={workdir / 'seeds.txt'}", "-O", str(out), "-s", "DOWNLOAD_DELAY=0",
         "-s", "WEBRACE_DELAY_FACTOR=0", "-s", f"WEBRACE_DYNABOT_USE_HINTS={variant != 'plain'}",
         "-s", "LOG_LEVEL=WARNING", *extra],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"dynabot ({variant}) failed:\n{done.stderr[-3000:]}")
    items = [json.loads(line) for line in out.read_text().splitlines()]
    traces = [item for item in items if item["kind"] == "trace"]
    figures = workdir / "data" / "last-dynabot.json"
    return {"traces": traces, "profiles": [i for i in items if i["kind"] == "profile"],
            "wall": time.monotonic() - started,
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
    parser.add_argument("--sets", default=",".join([*SETS, REAL]), help="comma-separated: test, holdout, holdout2, "
                                                                         "real")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: baseline, plain, shipped, "
                                                                       "given (the real set only)")
    parser.add_argument("--apps", default="", help="comma-separated: only these applications of the real set "
                                                   "(default: every one installed)")
    args = parser.parse_args(argv)
    variants = [v for v in VARIANTS if v in args.variants.split(",") and v != "given"]
    rows, hostile_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"plain": ROOT, "shipped": ROOT, "given": ROOT}
        if "baseline" in args.variants.split(","):  # extracted only when it runs
            codes["baseline"] = baseline_code(Path(tmp), args.baseline)
        for name in args.sets.split(","):
            if name == REAL:
                real_set([v for v in VARIANTS if v in args.variants.split(",")], codes, Path(tmp),
                         [a.strip() for a in args.apps.split(",") if a.strip()])
                continue
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


# -- the real applications ----------------------------------------------------------------------------


def _form_of(truth: str) -> tuple[str, str]:
    """(METHOD, path) of a ground truth's ``form = "GET /search q"``."""
    method, path, *_ = (truth or "- -").split()
    return method.upper(), path


def real_set(variants: list[str], codes: dict[str, Path], tmp: Path, only: list[str] | None = None) -> None:
    """The real applications, one crawl per application and variant, each variant on freshly
    started apps (what one variant filed is not seen by the next, and its log lines are its own)."""
    from realapps.serve import RealApps, installed, load_truth

    names = list(dict.fromkeys(s["app"] for s in load_truth() if installed(s["app"])))
    unknown = sorted(set(only or ()) - {s["app"] for s in load_truth()})
    if unknown:
        raise SystemExit(f"--apps: no such application in truth.toml: {', '.join(unknown)}")
    missing = sorted({s["app"] for s in load_truth() if not only or s["app"] in only} - set(names))
    names = [n for n in names if not only or n in only]
    if not names:
        print("real: not run (no app installed: python holdout/realapps/install.py)")
        return
    if missing:
        print(f"real: not installed, left out: {', '.join(missing)}")
    app_rows, source_rows = [], []
    for variant in variants:
        with RealApps(names) as apps:
            sources = apps.sources()
            marks = apps.marks()
            results = {}
            for app in names:
                mine = [s for s in sources if s["app"] == app]
                keyword = next((s["keyword"] for s in mine if s.get("keyword_search")), None)
                extra = ("-a", f"keywords={keyword}") if variant == "given" and keyword else ()
                workdir = tmp / f"real-{app}-{variant}"
                workdir.mkdir()
                results[app] = run([s["url"] for s in mine], "keyword_search", variant, workdir, codes[variant], extra)
            apps.stop()  # every server's log is complete (lighttpd buffers its lines)
            for app in names:
                mine = [s for s in sources if s["app"] == app]
                result = results[app]
                traces = {t["source"]: t for t in result["traces"]}
                profiles = {p["source"]: p for p in result["profiles"]}
                member_forms = {_form_of(s.get("form", "")) for s in mine if s.get("keyword_search")}
                for s in mine:
                    url = normalize(s["url"])
                    trace, profile = traces.get(url, {}), profiles.get(url)
                    form = (profile["form"]["method"], urlsplit(profile["form"]["action"]).path) if profile else None
                    if not profile:
                        verdict = "missed" if s["keyword_search"] else "right"
                    elif s["keyword_search"]:
                        verdict = "found"
                    elif s.get("judgement"):
                        verdict = "judgement claim"
                    elif form in member_forms:
                        verdict = "member form"  # the app's search box, met on another of its pages
                    else:
                        verdict = "FALSE"
                    source_rows.append((variant, app, s["start"], s["keyword_search"], bool(s.get("judgement")),
                                        bool(s.get("browser")), trace.get("outcome", "-"), verdict,
                                        f"{form[0]} {form[1]}" if form else "-", trace.get("probes", 0),
                                        (trace.get("reason") or "")[:110]))
                posts = apps.posts(app, marks[app])
                side = apps.side_effect_posts(app, marks[app])
                app_rows.append((variant, app, len(mine), sum(t["probes"] for t in result["traces"]),
                                 sum(posts.values()), sum(side.values()), result["wall"],
                                 ", ".join(f"{p} {n}" for p, n in sorted(side.items()))))
                print(f"real {variant} {app}: {sum(posts.values())} POSTs, {sum(side.values())} to side-effect forms, "
                      f"{result['wall']:.0f} s", flush=True)
    print("\n| variant | source | member | outcome | verdict | form claimed | probes | reason |")
    print("|---|---|---|---|---|---|---|---|")
    for variant, app, start, member, judgement, scripted, outcome, verdict, form, probes, reason in source_rows:
        kind = ("yes" if member else "no") + (" (judgement)" if judgement else "") + (" (scripts)" if scripted else "")
        print(f"| {variant} | {app} {start} | {kind} | {outcome} | {verdict} | {form} | {probes} | {reason or '-'} |")
    print("\n| variant | application | sources | probes | POSTs | side-effect POSTs | seconds | side-effect paths |")
    print("|---|---|---|---|---|---|---|---|")
    for variant, app, count, probes, posts, side, wall, paths in app_rows:
        print(f"| {variant} | {app} | {count} | {probes} | {posts} | {side} | {wall:.0f} | {paths or '-'} |")
    print("\n| variant | members found | of which scripts-built | false claims | member's form on another page "
          "| judgement calls claimed | POSTs | side-effect submissions |")
    print("|---|---|---|---|---|---|---|---|")
    for variant in variants:
        mine = [r for r in source_rows if r[0] == variant]
        members = [r for r in mine if r[3]]
        found = [r for r in members if r[7] == "found"]
        counts = Counter(r[7] for r in mine)
        posts = [r for r in app_rows if r[0] == variant]
        print(f"| {variant} | {len(found)}/{len(members)} | {sum(r[5] for r in found)}/{sum(r[5] for r in members)} "
              f"| {counts['FALSE']} | {counts['member form']} | {counts['judgement claim']} "
              f"| {sum(r[4] for r in posts)} | {sum(r[5] for r in posts)} |")


if __name__ == "__main__":
    sys.exit(main())
