"""DynaBot's end-of-run statistics, as the seed's Tables 2-5 present them (pure)."""

from __future__ import annotations

from collections import Counter
from typing import Any

PROBE_BINS = ((0, 0), (1, 10), (11, 20), (21, 30), (31, 40), (41, 50), (51, 60), (61, None))
TIME_BINS = ((0, 0.5), (0.5, 1), (1, 5), (5, 10), (10, 50), (50, 100), (100, 500), (500, None))


def _label(low: float, high: float | None, unit: str = "") -> str:
    if high is None:  # time bins are open at their low end, probe counts closed
        return f">{low:g}{unit}" if unit else f">{low - 1:g}"
    if low == high:
        return f"{low:g}{unit}"
    return f"<{high:g}{unit}" if low == 0 and unit else f"{low:g}-{high:g}{unit}"


def report(traces: list[dict[str, Any]], pages: int = 0, statuses: Counter | None = None,
           types: Counter | None = None, frontier: str = "trace") -> dict[str, Any]:
    """Figures of a run from its trace items."""
    forms = [form for trace in traces for form in trace.get("forms") or []]
    submissions = [form.get("submissions", 0) for form in forms]
    outcomes = Counter(trace["outcome"] for trace in traces)
    analysed = [t for t in traces if t.get("forms")]  # sources with forms (the seed's post-FormFilter figures)
    match_times = [t["seconds"] for t in traces if t["outcome"] == "match"]
    fail_times = [t["seconds"] for t in analysed if t["outcome"] != "match"]
    probes = Counter()
    for trace in traces:
        for low, high in PROBE_BINS:
            if trace["probes"] >= low and (high is None or trace["probes"] <= high):
                probes[_label(low, high)] += 1
                break
    times = Counter()
    for trace in analysed:
        for low, high in TIME_BINS:
            if trace["seconds"] >= low and (high is None or trace["seconds"] < high):
                times[_label(low, high, " s")] += 1
                break

    def stats(values: list[float]) -> dict[str, float | None]:
        if not values:
            return {"min": None, "max": None, "avg": None}
        return {"min": min(values), "max": max(values), "avg": round(sum(values) / len(values), 3)}

    return {
        "frontier": frontier,
        "sources": len(traces),
        "sources_with_forms": len(analysed),
        "forms": len(forms),
        "form_parameters": sum(t.get("parameters") or 0 for t in traces),
        "forms_submitted": sum(submissions),
        "max_submissions_per_form": max(submissions, default=0),
        "avg_submissions_per_form": round(sum(submissions) / len(forms), 2) if forms else 0.0,
        "probes": sum(t["probes"] for t in traces),
        "matched": outcomes.get("match", 0),
        "success_rate": round(outcomes.get("match", 0) / len(traces), 4) if traces else 0.0,
        "outcomes": dict(sorted(outcomes.items())),
        "match_seconds": stats(match_times),
        "fail_seconds": stats(fail_times),
        "probes_histogram": {_label(lo, hi): probes.get(_label(lo, hi), 0) for lo, hi in PROBE_BINS},
        "seconds_histogram": {_label(lo, hi, " s"): times.get(_label(lo, hi, " s"), 0) for lo, hi in TIME_BINS},
        "pages": pages,
        "statuses": {str(k): v for k, v in sorted((statuses or {}).items(), key=lambda kv: str(kv[0]))},
        "content_types": dict(sorted((types or {}).items())),
    }


def format_report(figures: dict[str, Any]) -> str:
    """The figures as the seed's tables: crawl statistics, probe times, histograms."""

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f} s"

    rows = [
        ("Number of sources analysed", figures["sources"]),
        ("Sources with forms", figures["sources_with_forms"]),
        ("Total number of forms", figures["forms"]),
        ("Total number of form parameters", figures["form_parameters"]),
        ("Total of forms submitted", figures["forms_submitted"]),
        ("Maximum submissions per form", figures["max_submissions_per_form"]),
        ("Average submissions per form", figures["avg_submissions_per_form"]),
        ("Number of matched sources", figures["matched"]),
        ("Success rate", f"{figures['success_rate']:.2%}"),
        ("Outcomes", ", ".join(f"{k} {v}" for k, v in figures["outcomes"].items()) or "-"),
        ("Minimum / average / maximum match time", " / ".join(
            seconds(figures["match_seconds"][k]) for k in ("min", "avg", "max"))),
        ("Minimum / average / maximum fail time (post FormFilter)", " / ".join(
            seconds(figures["fail_seconds"][k]) for k in ("min", "avg", "max"))),
    ]
    if figures["frontier"] != "trace":
        rows[:0] = [("Number of URLs crawled", figures["pages"])]
    width = max(len(name) for name, _ in rows)
    lines = [f"DynaBot ({figures['frontier']} frontier)"]
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    lines.append("  Number of probes: " + ", ".join(f"{k}: {v}" for k, v in figures["probes_histogram"].items()))
    lines.append("  Probe time: " + ", ".join(f"{k}: {v}" for k, v in figures["seconds_histogram"].items()))
    if figures["frontier"] != "trace":
        lines.append("  Response codes: " + ", ".join(f"{k}: {v}" for k, v in figures["statuses"].items()))
        lines.append("  Content types: " + ", ".join(f"{k}: {v}" for k, v in figures["content_types"].items()))
    return "\n".join(lines)
