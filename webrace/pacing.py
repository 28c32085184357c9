"""Per-host pacing that follows what each request cost the server (pure, no Scrapy).

After Heritrix's politeness (the wait before a host's next request is a factor of how long
its last answer took, bounded below and above) and Scrapy's AutoThrottle (the latency of
the last response sets the slot's delay): a 304 that took 5 ms lets the next request go
soon, a page that took 2 s to download earns a longer rest, a fast server is crawled fast.

With one request at a time per host, the host rests ``factor`` times as long as it worked
for us, so our share of its time stays near ``1 / (1 + factor)`` (the pauses add up to
``factor`` times the answers' total, whatever their order). A robots.txt ``Crawl-delay`` and
Scrapy's ``DOWNLOAD_DELAY`` are floors: the time between two requests' starts never falls
below them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class HostDelays:
    """The pauses one host was given: their count, sum and largest."""

    count: int = 0
    total: float = 0.0
    largest: float = 0.0

    def add(self, pause: float) -> None:
        self.count += 1
        self.total += pause
        self.largest = max(self.largest, pause)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass
class Pacing:
    factor: float = 2.0  # rest after an answer, as a multiple of the answer's download time
    min_delay: float = 0.0  # the rest is never shorter (seconds)
    max_delay: float = 30.0  # nor longer
    floor: float = 0.0  # start-to-start floor for every host (Scrapy's DOWNLOAD_DELAY)
    hosts: dict[str, HostDelays] = field(default_factory=dict)
    crawl_delays: dict[str, float] = field(default_factory=dict)  # host -> robots.txt Crawl-delay

    def pause(self, seconds: float) -> float:
        """The rest after an answer whose whole download took ``seconds``."""
        return min(max(self.factor * max(seconds, 0.0), self.min_delay), self.max_delay)

    def answered(self, host: str, seconds: float) -> float:
        """Record an answer of ``host`` that took ``seconds``; return the time that must
        separate the start of this request from the start of the next one."""
        seconds = max(seconds, 0.0)
        gap = max(seconds + self.pause(seconds), self.start_floor(host))
        self.hosts.setdefault(host, HostDelays()).add(gap - seconds)  # the rest it really got
        return gap

    def start_floor(self, host: str) -> float:
        """The least time between two requests' starts for ``host``."""
        return max(self.crawl_delays.get(host, 0.0), self.floor)
