"""Benchmark: DynaBot over the local test services (webrace/demo/services.py), in one run.

For each shipped service class (serviceclasses/*.xml), the real `scrapy crawl dynabot` with
the trace frontier analyses every listed service: the class's members and every look-alike.
It runs twice: with the probing templates' hints (DynaBot as shipped) and without them (the
seed's plain Algorithm 2: required arguments into parameters in page order, no optional
arguments, the page's default button: the baseline). Printed: recognition rate, false
positives, probes and time per source, and the seed's Tables 2 and 3 for the shipped run.

    pip install -e '.[bench]' && python bench/dynabot.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from webrace.demo.services import CLASSES, Services
from webrace.dynabot.stats import format_report

ROOT = Path(__file__).resolve().parent.parent


def run(services: Services, service_class: str, hints: bool, workdir: Path) -> dict:
    seeds = services.members[service_class] + services.non_members[service_class]
    (workdir / "seeds.txt").write_text("\n".join(seeds) + "\n")
    out = workdir / "items.jsonl"
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(workdir / "data"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "dynabot", "-a", f"scd={ROOT / 'serviceclasses' / service_class}.xml",
         "-a", f"seeds={workdir / 'seeds.txt'}", "-O", str(out), "-s", "DOWNLOAD_DELAY=0",
         "-s", "WEBRACE_DELAY_FACTOR=0",         "-s", f"WEBRACE_DYNABOT_USE_HINTS={hints}", "-s", "LOG_LEVEL=WARNING"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(f"dynabot failed:\n{done.stderr[-3000:]}")
    traces = [item for line in out.read_text().splitlines() if (item := json.loads(line))["kind"] == "trace"]
    members = set(services.members[service_class])
    matched = {t["source"] for t in traces if t["outcome"] == "match"}
    return {
        "members": len(members), "sources": len(traces),
        "recognised": len(matched & members), "false_positives": len(matched - members),
        "probes": sum(t["probes"] for t in traces), "member_probes": [t["probes"] for t in traces
                                                                   if t["source"] in members],
        "seconds": sum(t["seconds"] for t in traces), "wall": time.monotonic() - started,
        "figures": json.loads((workdir / "data" / "last-dynabot.json").read_text()),
    }


def main() -> int:
    rows = []
    with Services() as services, tempfile.TemporaryDirectory() as tmp:
        for service_class in CLASSES:
            for hints in (False, True):
                workdir = Path(tmp) / f"{service_class}-{hints}"
                workdir.mkdir()
                result = run(services, service_class, hints, workdir)
                rows.append((service_class, hints, result))
                if hints:
                    print(f"\n{service_class}, shipped (hints on): the seed's Tables 2 and 3")
                    print(format_report(result["figures"]))
    print("\n| class | probing | members recognised | false positives | probes per source | "
          "probes per member found | seconds per source |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    for service_class, hints, r in rows:
        per_member = sum(r["member_probes"]) / max(1, r["recognised"])
        print(f"| {service_class} | {'hints' if hints else 'plain (baseline)'} | {r['recognised']}/{r['members']} "
              f"({r['recognised'] / r['members']:.0%}) | {r['false_positives']} | {r['probes'] / r['sources']:.1f} | "
              f"{per_member:.1f} | {r['seconds'] / r['sources']:.3f} |")
        if hints:
            ok &= r["recognised"] == r["members"] and r["false_positives"] == 0
    for service_class in CLASSES:
        plain, shipped = (r for c, _, r in rows if c == service_class)
        print(f"{service_class}: hints recognise {shipped['recognised']} members against {plain['recognised']} "
              f"without, with {shipped['probes']} probes against {plain['probes']} "
              f"({shipped['probes'] / max(1, plain['probes']):.2f}x)")
    print("PASS: every member recognised, no false positive" if ok else "FAIL: see the table")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
