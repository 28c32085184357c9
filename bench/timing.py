"""Timing helper shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_ms(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs of ``fn``, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000
