"""The best assignment within capacity (issue 20's reference): every page to a crawler, no
crawler given more pages than its capacity, total latency minimal (the paper's global cost,
section III.F, solved exactly instead of by a heuristic).

It is a min-cost assignment of pages to capacity slots, solved with
``scipy.optimize.linear_sum_assignment``. Crawler j needs no more slots than
``g_j + overflow``, where ``g_j`` counts the pages whose nearest crawler is j and
``overflow`` is how many pages the full crawlers cannot take: in an optimal assignment a
crawler that gives up one of its nearest pages is full (else the page would come back at no
cost), so the pages that leave their nearest crawler are, net, the overflow, and no crawler
receives more of them than that. When nothing overflows, the nearest crawler of every page
is the answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def best_assignment(cost: np.ndarray, capacities: Sequence[int | None]) -> np.ndarray:
    """For a cost matrix (pages x crawlers, e.g. latency in ms) and each crawler's capacity
    (``None``: no limit), the crawler (column) of every page in a cheapest assignment."""
    cost = np.asarray(cost, dtype=float)
    pages, crawlers = cost.shape
    if len(capacities) != crawlers:
        raise ValueError(f"{crawlers} crawlers in the cost matrix, {len(capacities)} capacities")
    limits = np.array([pages if c is None else min(c, pages) for c in capacities], dtype=int)
    if limits.sum() < pages:
        raise ValueError(f"{pages} pages do not fit in capacities totalling {limits.sum()}")
    nearest = cost.argmin(axis=1)
    counts = np.bincount(nearest, minlength=crawlers)
    overflow = int(np.maximum(counts - limits, 0).sum())
    if overflow == 0:
        return nearest
    # scipy.optimize takes over half a second to import: only the simulator and the bench get
    # here, and a crawling worker, which imports this package, should not pay for it
    from scipy.optimize import linear_sum_assignment

    slots = np.repeat(np.arange(crawlers), np.minimum(limits, counts + overflow))
    rows, columns = linear_sum_assignment(cost[:, slots])
    chosen = np.empty(pages, dtype=int)
    chosen[rows] = slots[columns]
    return chosen
