"""Python's cyclic garbage collector and a round's long-lived structures.

A round of 10,000 URDs builds, once, structures of a few hundred thousand objects (the URDs,
their groups, the keyword index) that live as long as the round. Left to the collector,
every full collection walks them all again, and building them triggers several: at 10,000
owners that was a fifth of the crawl's time. So once a round's structures are built they
are moved out of the collector's sight (:func:`gc.freeze`), and when a round closes back
into it (:func:`gc.unfreeze`), so that what the round left behind, cycles included, is
collected as usual: nothing frozen outlives the next round's end.

Freezing moves every object alive at that moment, not only the round's: a page in flight
then stays uncollected until the round closes. That is bounded by what is in flight.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()


def keep_built() -> None:
    """Structures that live as long as a round were just built: out of the collector's sight."""
    with _lock:
        gc.freeze()


def release_built() -> None:
    """A round closed: everything frozen is collectable again (collected as usual, later)."""
    with _lock:
        gc.unfreeze()


__all__ = ["keep_built", "release_built"]
