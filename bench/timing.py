"""Timing helper shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def best_ms(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs of ``fn``, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def interleaved_best_ms(fns: Sequence[Callable[[], object]], rounds: int = 5,
                        repeat: Sequence[int] | None = None) -> list[float]:
    """The fastest run of each of ``fns``, in milliseconds, run in turn: each round runs each
    ``repeat[n]`` times (default once). A baseline and a candidate timed side by side meet
    the same load, so their ratio does not depend on what else the machine runs; a short
    function gets more runs, for a long one spans the bursts of load that a short one can
    miss."""
    counts = list(repeat) if repeat is not None else [1] * len(fns)
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for n, fn in enumerate(fns):
            for _ in range(counts[n]):
                start = time.perf_counter()
                fn()
                best[n] = min(best[n], time.perf_counter() - start)
    return [b * 1000 for b in best]
