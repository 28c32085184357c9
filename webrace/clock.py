"""The wall clock stepping under a long-running process (issue 44).

NTP correcting a drifted clock, a virtual machine resumed, a person setting the date: the wall
clock jumps while ``time.monotonic()`` does not. URDs keep their next due time
(``lastcheck + timing``) and sentinels theirs in wall-clock epoch ms, so after a step *back*
of an hour nothing would be crawled or checked for an hour, silently; a step *forward* makes
everything due at once (one burst). :class:`ClockWatch` notices either by comparing how far
each clock moved between two looks; the round engines then say it in one line and, after a
step back, make due now what was left due "in the future" (``UrdStore.reclock``,
``SentinelStore.reclock``). Leases use Redis's own clock, so a worker's does not matter to them.

No Scrapy here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

STEP_THRESHOLD_S = 60.0  # WEBRACE_CLOCK_STEP_THRESHOLD's default


def wall_millis() -> int:
    return time.time_ns() // 1_000_000


class ClockWatch:
    """How far the wall clock jumped between two looks, beyond what the monotonic clock
    advanced. ``wall`` (epoch ms) and ``monotonic`` (seconds) are injectable for tests."""

    def __init__(self, threshold_s: float = STEP_THRESHOLD_S, wall: Callable[[], int] = wall_millis,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.threshold_ms = max(int(threshold_s * 1000), 1)
        self.wall, self.monotonic = wall, monotonic
        self.last_wall_ms: int | None = None  # the wall clock at the last look
        self._last_monotonic = 0.0

    def step(self, wall_ms: int | None = None) -> int:
        """Milliseconds the wall clock (``wall_ms``, read now if None) stepped since the last
        look: positive forward, negative back; 0 within the threshold, and at the first look."""
        wall = self.wall() if wall_ms is None else wall_ms
        mono = self.monotonic()
        last_wall, last_mono = self.last_wall_ms, self._last_monotonic
        self.last_wall_ms, self._last_monotonic = wall, mono
        if last_wall is None:
            return 0
        drift = (wall - last_wall) - round((mono - last_mono) * 1000)
        return drift if abs(drift) > self.threshold_ms else 0


class SteadySeconds:
    """Epoch seconds that advance with the monotonic clock: the wall clock's reading when made,
    then no step (for relative waits only, never for a date)."""

    def __init__(self, wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self.offset = wall() - monotonic()

    def __call__(self) -> float:
        return self.monotonic() + self.offset


def steady_reactor(reactor: object, seconds: SteadySeconds | None = None) -> None:
    """Keep a Twisted reactor's timed calls (``callLater``, ``LoopingCall``) in steady time
    from now on (once per reactor; calls already pending keep their times, which agree)."""
    if not isinstance(reactor.seconds, SteadySeconds):
        reactor.seconds = seconds or SteadySeconds()


def span(ms: int) -> str:
    """3_725_000 -> ``1h2m5s``; under a second -> ``0s``."""
    seconds, parts = abs(ms) // 1000, []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def step_line(step_ms: int, what: str) -> str:
    """The one line a process says about a step (``step_ms`` as :meth:`ClockWatch.step`
    gives it), ending with ``what`` it does about it."""
    return (f"Wall clock stepped {'forward' if step_ms > 0 else 'back'} by {span(step_ms)} "
            f"(against the monotonic clock): {what}")


__all__ = ["STEP_THRESHOLD_S", "ClockWatch", "SteadySeconds", "span", "steady_reactor", "step_line", "wall_millis"]
