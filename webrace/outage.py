"""Redis going away and coming back, as every long-running process meets it (issue 44).

A Redis restarted, failed over or cut off by the network is no reason for a process meant to
run for months to end, nor for a traceback: it is said in one line when it starts and in one
when it ends, the process waits with a backoff (``FIRST_WAIT_S`` doubling to ``MOST_WAIT_S``)
and goes on. redis-py reconnects by itself on the next command, so going on is trying again.

:class:`Outage` keeps that state for one process; :func:`keep_going` is the loop of
``scrapy urd schedule --loop`` and ``scrapy deliver --loop``. ``scrapy web serve`` answers
503 during an outage, trying Redis again only when the wait is over (:meth:`Outage.due`,
:mod:`webrace.web.app`); a worker's lease scheduler asks for leases again after each wait
and its pages, renewals and acks only tell the same :class:`Outage` (the spider's: one line
each way for the whole worker, :mod:`webrace.distributed.scheduler`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import redis

T = TypeVar("T")

# What Redis being away looks like to a client: refused, reset, timed out, still loading its
# data after a restart (BusyLoadingError is a ConnectionError). A store that cannot be opened
# says so with webrace.backends.RedisUnavailable, which the commands and the web app add
# (this module is below the stores: the worker's runtime uses it too).
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
FIRST_WAIT_S, MOST_WAIT_S = 1.0, 30.0


def reason(exc: BaseException) -> str:
    """``exc`` in one line (redis-py's messages name host and port, never a password;
    ``RedisUnavailable``'s hide it)."""
    return " ".join(str(exc).split()).rstrip(".") or type(exc).__name__


class Outage:
    """Whether Redis is away for this process, since when, and how long to wait before the
    next try: ``first`` seconds after the first failure, twice as long after each further
    one, never more than ``most``. ``say`` gets one line when an outage starts and one when
    it ends."""

    def __init__(self, say: Callable[[str], None], first: float = FIRST_WAIT_S, most: float = MOST_WAIT_S,
                 clock: Callable[[], float] = time.monotonic, away: str = "Redis unreachable",
                 back: str = "Redis reachable again") -> None:
        self.say, self.first, self.most, self.clock = say, first, most, clock
        self.away, self.back = away, back  # how the lines name what went away, and its return
        self.since: float | None = None
        self.wait = first
        self.failures = 0  # in this outage
        self.last_failure = 0.0

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException) -> float:
        """A call to Redis failed with ``exc``: the seconds to wait before trying again."""
        if self.since is None:
            self.since, self.wait, self.failures = self.clock(), self.first, 0
            self.say(f"{self.away} ({reason(exc)}): trying again in {self.first:g} s, "
                     f"then less and less often (at most every {self.most:g} s)")
        else:
            self.wait = min(self.wait * 2, self.most)
        self.failures += 1
        self.last_failure = self.clock()
        return self.wait

    def seen(self, exc: BaseException) -> None:
        """A failure met by something that does not retry on its own pace (a page being
        handled, a lease renewal): it starts an outage, or is one more sign of it (the wait
        is not lengthened: that is for the retries)."""
        if self.since is None:
            self.failed(exc)

    def struck(self, exc: BaseException) -> None:
        """A failure met by work that was let through because the outage's wait was over (a
        retry: the wait grows), or by work already under way (one more sign of it)."""
        if self.since is None or self.due():
            self.failed(exc)

    def due(self) -> bool:
        """Whether Redis is worth trying now: it is not away, or the wait after the last
        failure is over."""
        return self.since is None or self.clock() >= self.last_failure + self.wait

    def left(self) -> float:
        """Seconds until :meth:`due`."""
        return 0.0 if self.since is None else max(self.last_failure + self.wait - self.clock(), 0.0)

    def ok(self) -> None:
        """A call to Redis succeeded: an outage, if there was one, is over."""
        if self.since is not None:
            self.say(f"{self.back} after {self.clock() - self.since:.0f} s ({self.failures} failed tries)")
            self.since = None


def keep_going(do_pass: Callable[[], None], interval: float, outage: Outage, wait: Callable[[float], bool],
               down: tuple[type[BaseException], ...] = REDIS_DOWN) -> None:
    """Run ``do_pass`` every ``interval`` seconds through Redis outages (a pass failing with
    one of ``down``; after it, the outage's wait instead), until ``wait(seconds)`` returns
    True: it waits, and says whether to stop (a ``threading.Event``'s ``wait``, set by SIGTERM)."""
    while True:
        try:
            do_pass()
        except down as exc:
            delay = outage.failed(exc)
        else:
            outage.ok()
            delay = interval
        if wait(delay):
            return


def until_reachable(attempt: Callable[[], T], outage: Outage, wait: Callable[[float], bool],
                    down: tuple[type[BaseException], ...] = REDIS_DOWN) -> T | None:
    """``attempt()``'s result once it no longer fails with one of ``down`` (a long-running
    process starting while Redis is away waits for it: said once each way, with the outage's
    backoff); None if ``wait(seconds)`` said stop meanwhile."""
    while True:
        try:
            result = attempt()
        except down as exc:
            if wait(outage.failed(exc)):
                return None
        else:
            outage.ok()
            return result


__all__ = ["FIRST_WAIT_S", "MOST_WAIT_S", "REDIS_DOWN", "Outage", "keep_going", "reason", "until_reachable"]
