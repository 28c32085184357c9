"""The URDs that want a page although the round that fetched it is not theirs.

A page's meta-info keeps the reach keys of the URDs whose rounds reached it
(``MetaInfo.wanted``, see :func:`webrace.rounds.groups.reach_key`). When another round
fetches a new version of it, those URDs are not in that round; without them the version
would be judged only for the round's owners, its body dropped as irrelevant to them, and the
next round of the URDs that wanted it would get a ``304`` for a change nobody showed them.
:class:`WantedUrds` finds them: every URD, grouped by reach key, read from the URD store and
read again when a round names a URD it has not seen, or after ``REFRESH_S``.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webrace.rounds.groups import SENTINEL_PREFIX, urd_reach_key
from webrace.urd import Urd

REFRESH_S = 60.0  # URDs read again at least this often (a removed URD stops being judged for)
ROUNDS_KEPT = 64  # rounds whose URDs were checked against what was read


class WantedUrds:
    def __init__(self, open_store: Callable[[], Any]) -> None:
        self.open_store = open_store  # a context manager giving the URD store
        self.generation = 0  # bumped at each read: indexes built over ``urds`` are keyed by it
        self.urds: dict[str, Urd] = {}
        self._by_key: dict[str, list[Urd]] = {}
        self._read_at = float("-inf")
        self._rounds: dict[str, bool] = {}
        self._lock = threading.Lock()

    def absent(self, keys: Iterable[str], round_id: str, round_urds: Mapping[str, Urd]) -> list[Urd]:
        """The URDs whose reach key is in ``keys`` and that are not in the round."""
        with self._lock:
            self._refresh(round_id, round_urds)
            by_key = self._by_key
        return [u for key in keys for u in by_key.get(key, ()) if u.id not in round_urds]

    def _refresh(self, round_id: str, round_urds: Mapping[str, Urd]) -> None:
        stale = time.monotonic() - self._read_at > REFRESH_S
        if not stale and round_id not in self._rounds:  # a URD added since the last read?
            stale = any(i not in self.urds for i in round_urds if not i.startswith(SENTINEL_PREFIX))
            if len(self._rounds) >= ROUNDS_KEPT:
                self._rounds.clear()
            self._rounds[round_id] = True
        if not stale:
            return
        with self.open_store() as store:
            urds = store.all()
        by_key: dict[str, list[Urd]] = defaultdict(list)
        for urd in urds:
            by_key[urd_reach_key(urd)].append(urd)
        self.urds, self._by_key = {u.id: u for u in urds}, dict(by_key)
        self._read_at = time.monotonic()
        self._rounds = {round_id: True}
        self.generation += 1


__all__ = ["WantedUrds"]
