"""Python's cyclic garbage collector and a round's long-lived structures.

A round of 10,000 URDs builds, once, structures of a few hundred thousand objects (the URDs,
their groups, the keyword index) that live as long as the round. Left to the collector,
every full collection walks them all again, and building them triggers several: at 10,000
owners that was a fifth of the crawl's time. So once a round's structures are built they
are moved out of the collector's sight (:func:`gc.freeze`), and when a round closes back
into it (:func:`gc.unfreeze`) and collected at once (:func:`gc.collect`): nothing frozen
outlives the next round's end.

Collected at once, not left to the collector's schedule: a freeze moves every object alive,
garbage cycles not collected yet included, and starts the collector's counts again, so a
continuous crawl opening a round every second never reached a full collection; every round's
cycles were frozen with the next round's structures, then the next, and stayed (issue 44:
3.4 GB an hour). One full collection per round walks the round's structures once.

While a round's structures are built (its URDs read, the keyword index made), the collector
waits (:func:`building`): a collection then would walk what is being built to find nothing.

Freezing moves every object alive at that moment, not only the round's: a page in flight
then stays uncollected until the round closes. That is bounded by what is in flight.

What the collection frees goes back to the C allocator, which keeps it: glibc's malloc gives
a freed block back to the system only from the top of its heap, and each thread that
allocates gets an arena of its own (a worker has several: the reactor, the store, Redis and
lease threads, the middlewares' pools), so a process that frees as much as it allocates still
grows, block by block, in the gaps. After each round's collection the free memory of every
arena is given back (glibc's ``malloc_trim``; elsewhere nothing is done).
``WEBRACE_MALLOC_TRIM=0`` in the environment leaves it out (``bench/soak.py --ab-trim``
compares the two).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_building = 0  # threads inside building()
_was_enabled = True


def keep_built() -> None:
    """Structures that live as long as a round were just built: out of the collector's sight."""
    with _lock:
        gc.freeze()


@contextmanager
def building() -> Iterator[None]:
    """Long-lived structures are being built: no collection meanwhile (each would walk all
    that is built so far, to find nothing), then they are kept out of sight (:func:`keep_built`)."""
    global _building, _was_enabled
    with _lock:
        _building += 1
        if _building == 1:
            _was_enabled = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _lock:
            _building -= 1
            if _building == 0:
                gc.freeze()
                if _was_enabled:
                    gc.enable()


def release_built() -> None:
    """A round closed: everything frozen is collectable again, what is garbage is collected
    now, and the allocator gives back what that freed."""
    with _lock:
        gc.unfreeze()
    gc.collect()
    give_back()


def _malloc_trim() -> Callable[[int], int] | None:
    if os.environ.get("WEBRACE_MALLOC_TRIM", "1") == "0":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim  # glibc only (musl, macOS: no such function)
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_trim = _malloc_trim()


def give_back() -> bool:
    """The C allocator's free memory given back to the system (glibc); whether it was asked."""
    if _trim is None:
        return False
    _trim(0)
    return True


__all__ = ["building", "give_back", "keep_built", "release_built"]
