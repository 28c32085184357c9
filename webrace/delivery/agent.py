"""The delivery pass: each owner's new ACIs and notifications to each of the owner's channels,
at least once.

One pass, for every channel that is due (not waiting out a backoff) and that this agent can
lease (another delivery loop may hold it):

1. plan: the owner's items at or after the channel's ``since`` that it takes (its events) and
   was not sent yet; one bounded message for all of them (:mod:`webrace.delivery.message`);
2. send: every message at once, in a small pool of threads, each send limited to
   ``WEBRACE_DELIVERY_TIMEOUT`` seconds (a dead channel delays no other, and the pass by at
   most that); a channel the admin's policy no longer allows (its scheme, its custom
   request) is not sent but failed (``refused: ...``), and every connection a send makes is
   checked by the guard (:mod:`webrace.delivery.guard`: public addresses and the allowed
   hosts only); a channel whose URL this process cannot decrypt (another channel key) is
   left to the processes that can, with a warning;
3. record: a sent message marks its items delivered to that channel, in the store and in this
   agent's journal (:mod:`webrace.backends.sqlite.journal`); a failed one counts a
   failure and sets the next try (exponential backoff from ``WEBRACE_DELIVERY_RETRY_BASE``,
   capped at ``WEBRACE_DELIVERY_RETRY_MAX``); after ``WEBRACE_DELIVERY_FAILING_AFTER``
   failures in a row the channel is reported failing (a warning, a stats counter, `scrapy
   deliver channel list`), and still retried at the capped backoff; a next try further away
   than the channel's backoff was set before the wall clock stepped back: it is due at once;
4. acknowledge: an ACI every one of the owner's ACI channels has taken is acknowledged in the
   ACI store (the mark `scrapy aci ack` sets, so `scrapy store gc` may drop its version).
   An owner without channels: nothing is acknowledged.

The journal is this process's own (its data directory), consulted after the store: an item
the store forgot it sent (Redis came back empty or from an older copy, the channel was
registered again and the crawl made the same ACI again) but the journal remembers is not
sent again ("N already delivered, not sent again"), and is marked in the store. An item is
written to the journal only after its send succeeded: a crash between the send and that
write may send it again (at least once). A journal that cannot be used (corrupt, not
writable) is one warning; delivery goes on without it.

Items are those of the channel's window: ``since`` starts when the channel is added and moves
up, after a successful send, to ``LATENESS_MS`` before the pass (an ACI or notification is
stored at most that long after its time); marks older than the window are forgotten.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import groupby
from typing import Any

from webrace.backends import open_aci_store, open_delivery_journal, open_delivery_store, open_sentinel_store
from webrace.backends.base import AciStore, SentinelStore
from webrace.backends.delivery import DeliveryStore
from webrace.backends.sqlite.journal import DeliveryJournal
from webrace.clock import STEP_THRESHOLD_S, ClockWatch, step_line
from webrace.delivery.channels import shown, status
from webrace.delivery.guard import REFUSED
from webrace.delivery.message import Message, compose
from webrace.delivery.policy import ChannelPolicy
from webrace.delivery.send import send
from webrace.records.aci import Aci
from webrace.records.channel import MAX_ERROR, Channel
from webrace.urd import now_millis

logger = logging.getLogger(__name__)

LATENESS_MS = 24 * 3_600_000  # an item is in its store at most a day after its time (fetch)
LEASE_MARGIN_S = 60.0  # a lease outlives the longest send by this much


@dataclass(frozen=True)
class DeliveryConfig:
    timeout: float = 10.0
    retry_base: float = 30.0
    retry_max: float = 3600.0
    failing_after: int = 3
    max_items: int = 20
    base_url: str = ""
    threads: int = 4

    @classmethod
    def from_settings(cls, settings: Any) -> DeliveryConfig:
        return cls(timeout=max(settings.getfloat("WEBRACE_DELIVERY_TIMEOUT"), 0.1),
                   retry_base=max(settings.getfloat("WEBRACE_DELIVERY_RETRY_BASE"), 0.0),
                   retry_max=max(settings.getfloat("WEBRACE_DELIVERY_RETRY_MAX"), 0.0),
                   failing_after=max(settings.getint("WEBRACE_DELIVERY_FAILING_AFTER"), 1),
                   max_items=max(settings.getint("WEBRACE_DELIVERY_MAX_ITEMS"), 1),
                   base_url=settings.get("WEBRACE_DELIVERY_BASE_URL") or "",
                   threads=max(settings.getint("WEBRACE_DELIVERY_THREADS"), 1))

    def backoff_ms(self, failures: int) -> int:
        """Wait after ``failures`` failures in a row: base, 2 base, 4 base... capped."""
        return int(min(self.retry_base * 2 ** min(max(failures - 1, 0), 32), self.retry_max) * 1000)


@dataclass
class PassReport:
    stats: Counter = field(default_factory=Counter)  # delivery/... counters, as in the crawl's stats
    failing: list[str] = field(default_factory=list)  # one line per channel reported failing
    warnings: list[str] = field(default_factory=list)  # other one-line warnings (the journal's)

    def failure(self) -> str | None:
        """Why the pass did not do its job (None: it did): a message not delivered, a channel
        this process cannot decrypt. A channel waiting out its backoff is not a failure of this pass."""
        s, problems = self.stats, []
        if s["delivery/failed"]:
            problems.append(f"{s['delivery/failed']} message(s) could not be delivered (their channels retry with "
                            "backoff)")
        if s["delivery/undecryptable"]:
            problems.append(f"{s['delivery/undecryptable']} channel(s) cannot be decrypted with this process's "
                            "channel key")
        return "; ".join(problems) or None

    def line(self) -> str:
        s = self.stats
        held = s["delivery/already_delivered"]
        return (f"Delivery: {s['delivery/messages']} message(s) sent ({s['delivery/items/aci']} ACI(s), "
                f"{s['delivery/items/notification']} notification(s)), {s['delivery/failed']} failed, "
                f"{s['delivery/deferred']} channel(s) waiting to retry, {s['delivery/acked']} ACI(s) acknowledged"
                + (f", {held} already delivered, not sent again" if held else ""))


@dataclass
class _Job:
    channel: Channel
    message: Message | None  # None: nothing to send, only items the journal held back to mark
    held: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, id, time) the journal knew delivered
    error: str | None = None


class DeliveryAgent:
    """Runs delivery passes over the stores of ``settings``' mode. ``clock`` (epoch ms) decides
    what is due: tests drive the backoff with their own. ``policy``: the admin's, from the
    settings by default (tests give one with their own resolver)."""

    def __init__(self, settings: Any, clock: Callable[[], int] = now_millis,
                 sender: Callable[[str, str, str, float], str | None] | None = None,
                 policy: ChannelPolicy | None = None) -> None:
        self.settings = settings
        self.config = DeliveryConfig.from_settings(settings)
        self.clock = clock
        self.watch = ClockWatch(settings.getfloat("WEBRACE_CLOCK_STEP_THRESHOLD", STEP_THRESHOLD_S))
        self.policy = policy or ChannelPolicy.from_settings(settings)
        self.sender = sender or (lambda url, title, body, timeout: send(url, title, body, timeout, self.policy.guard))
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # messages sent whose marks the store did not take yet (it went away between the send
        # and the mark): marked before anything else is planned, so nothing is sent twice
        self.unrecorded: list[tuple[str, str, list, int, int]] = []  # (owner, channel id, items, at, since)
        self.journal_problem: str | None = None  # the last warning about the journal (said once)

    def run_pass(self) -> PassReport:
        """One pass over every channel (stores opened here: a pass may run in any thread)."""
        report = PassReport()
        with open_delivery_store(self.settings) as store:
            marked = self._mark_sent(store)  # (Redis away still: the pass ends here, the loop waits)
            channels = store.channels()
            if not channels and not marked:
                return report
            journal = self._open_journal(report)
            try:
                with open_aci_store(self.settings) as acis, open_sentinel_store(self.settings) as sentinels:
                    jobs = self._plan(store, acis, sentinels, channels, journal, report)
                    try:
                        self._send(jobs)
                    finally:
                        marked += self._record(store, jobs, journal, report)
                    self._acknowledge(store, acis, marked, report)
            finally:
                if journal is not None:
                    journal.close()
                    if not report.stats["delivery/journal_errors"]:
                        self.journal_problem = None  # it works again: a new trouble is said again
        return report

    # -- 1. plan -------------------------------------------------------------------------

    def _plan(self, store: DeliveryStore, acis: AciStore, sentinels: SentinelStore,
              channels: list[Channel], journal: DeliveryJournal | None, report: PassReport) -> list[_Job]:
        now, jobs = self.clock(), []
        step = self.watch.step(now)
        if step:
            report.stats["delivery/clock_steps"] += 1
            logger.warning(step_line(step, "retries due meanwhile are tried now" if step > 0 else
                                     "a retry due later than its channel's backoff is tried now"))
        for owner, group in groupby(channels, key=lambda c: c.owner):
            mine = [c for c in group if self._takes(store, c, now, report)]
            if not mine:
                continue
            since = min(c.since for c in mine)
            owner_acis = acis.list(owner, since) if any(c.wants("aci") for c in mine) else []
            notes = sentinels.notifications(owner, since) if any(c.wants("notification") for c in mine) else []
            for channel in mine:
                job = self._job(store, channel, owner_acis, notes, journal, now, report)
                if job is None:
                    store.release(channel.id, self.holder)
                else:
                    jobs.append(job)
        return jobs

    def _takes(self, store: DeliveryStore, channel: Channel, now: int, report: PassReport) -> bool:
        """Due, readable, and leased to this agent."""
        if not channel.url:
            report.stats["delivery/undecryptable"] += 1
            logger.warning("Delivery channel %s of %s is not sent by this process: its URL cannot be decrypted with "
                           "this process's channel key (every process that delivers needs the same one: "
                           "WEBRACE_DELIVERY_CHANNEL_KEY, or the data directory's channel-key file)",
                           channel.id, channel.owner)
            return False
        if channel.next_try - now > self.config.backoff_ms(channel.attempts):
            # further away than its own backoff: set before the wall clock stepped back (the
            # wait would be stretched by the step), so it is over now
            report.stats["delivery/retry_reclocked"] += 1
        elif channel.next_try > now:
            report.stats["delivery/deferred"] += 1
            if channel.attempts >= self.config.failing_after:
                report.failing.append(self._failing_line(channel))
            return False
        if not store.claim(channel.id, self.holder, int((self.config.timeout + LEASE_MARGIN_S) * 1000)):
            report.stats["delivery/leased_elsewhere"] += 1
            return False
        return True

    def _job(self, store: DeliveryStore, channel: Channel, acis: list[Aci], notes: list[dict],
             journal: DeliveryJournal | None, now: int, report: PassReport) -> _Job | None:
        mine_acis = [a for a in acis if a.updatetime >= channel.since] if channel.wants("aci") else []
        mine_notes = ([n for n in notes if int(n.get("at") or 0) >= channel.since]
                      if channel.wants("notification") else [])
        new_aci = set(store.unsent(channel.id, "aci", [a.id for a in mine_acis]))
        new_note = set(store.unsent(channel.id, "notification", [str(n["id"]) for n in mine_notes]))
        old_aci = self._journal_has(journal, channel, "aci", new_aci, now, report)
        old_note = self._journal_has(journal, channel, "notification", new_note, now, report)
        held = ([("aci", a.id, a.updatetime) for a in mine_acis if a.id in old_aci] +
                [("notification", str(n["id"]), int(n.get("at") or 0)) for n in mine_notes if str(n["id"]) in old_note])
        report.stats["delivery/already_delivered"] += len(held)
        mine_acis = [a for a in mine_acis if a.id in new_aci - old_aci]
        mine_notes = [n for n in mine_notes if str(n["id"]) in new_note - old_note]
        if not mine_acis and not mine_notes:
            return _Job(channel, None, held) if held else None
        return _Job(channel, compose(channel.owner, mine_acis, mine_notes, self.config.base_url,
                                     self.config.max_items), held)

    # -- 2. send -------------------------------------------------------------------------

    def _send(self, jobs: list[_Job]) -> None:
        jobs = [job for job in jobs if job.message is not None]
        if not jobs:
            return

        def one(job: _Job) -> None:
            try:
                job.error = self.policy.refusal(job.channel.url) or self.sender(
                    job.channel.url, job.message.title, job.message.body, self.config.timeout)
            except Exception as exc:  # a failure of this channel, never of the pass
                job.error = f"{type(exc).__name__}: {exc}"

        with ThreadPoolExecutor(max_workers=min(self.config.threads, len(jobs)),
                                thread_name_prefix="webrace-delivery") as pool:
            list(pool.map(one, jobs))

    # -- 3. record -----------------------------------------------------------------------

    def _record(self, store: DeliveryStore, jobs: list[_Job], journal: DeliveryJournal | None,
                report: PassReport) -> list[tuple[str, list]]:
        """The messages sent marked, failures counted, the items the journal held back marked
        in the store; (owner, items) of each message and held-back list marked."""
        now = self.clock()
        sent = [job for job in jobs if job.message is not None and job.error is None]
        for job in sent:  # in the journal first: the local file outlives the store's marks
            self._journal_record(journal, job.channel, job.message.items, now, report)
        for job in sent:  # every message sent is remembered before the store is asked to mark any
            self.unrecorded.append((job.channel.owner, job.channel.id, job.message.items, now,
                                    max(job.channel.since, now - LATENESS_MS)))
            report.stats["delivery/messages"] += 1
            for kind, _, _ in job.message.items:
                report.stats[f"delivery/items/{kind}"] += 1
        try:
            marked = self._mark_sent(store)
            for job in jobs:
                if job.held:  # the store forgot them: it knows again, and their ACIs may be acknowledged
                    store.remember(job.channel.id, job.held)
                    marked.append((job.channel.owner, job.held))
            for job in jobs:
                if job.error is not None:
                    self._failed(store, job.channel, job.error[:MAX_ERROR], now, report)
        finally:
            for job in jobs:
                store.release(job.channel.id, self.holder)
        return marked

    def _mark_sent(self, store: DeliveryStore) -> list[tuple[str, list]]:
        """The marks of the messages sent, oldest first; one the store refuses stays for the
        next try (its error ends the pass). (owner, items) of each message marked."""
        marked = []
        while self.unrecorded:
            owner, channel_id, items, at, since = self.unrecorded[0]
            store.delivered(channel_id, items, at, since)
            self.unrecorded.pop(0)
            marked.append((owner, items))
        return marked

    # -- the journal: never a reason not to deliver ----------------------------------------

    def _open_journal(self, report: PassReport) -> DeliveryJournal | None:
        try:
            journal = open_delivery_journal(self.settings)
        except (OSError, sqlite3.Error) as exc:  # DataDirUnusable (a corrupt file, a place not writable) is an OSError
            self._journal_trouble(exc, report)
            return None
        return journal

    def _journal_has(self, journal: DeliveryJournal | None, channel: Channel, kind: str, ids: set[str], now: int,
                     report: PassReport) -> set[str]:
        if journal is None or not ids:
            return set()
        try:
            return journal.delivered(channel.owner, channel.url, kind, sorted(ids), now)
        except (OSError, sqlite3.Error) as exc:
            self._journal_trouble(exc, report)
            return set()

    def _journal_record(self, journal: DeliveryJournal | None, channel: Channel, items: tuple, now: int,
                        report: PassReport) -> None:
        if journal is None:
            return
        try:
            journal.record(channel.owner, channel.url, items, now)
        except (OSError, sqlite3.Error) as exc:
            self._journal_trouble(exc, report)

    def _journal_trouble(self, exc: BaseException, report: PassReport) -> None:
        """One warning (not repeated while the trouble stays the same); delivery goes on."""
        report.stats["delivery/journal_errors"] += 1
        problem = " ".join(str(exc).split())[:300] or type(exc).__name__
        if problem != self.journal_problem:
            self.journal_problem = problem
            report.warnings.append(f"The delivery journal cannot be used ({problem}); delivering without it: an "
                                   "item Redis forgot it sent may be sent again (remove the file to start a new "
                                   "journal)")
            logger.warning(report.warnings[-1])

    def _failed(self, store: DeliveryStore, channel: Channel, error: str, now: int, report: PassReport) -> None:
        failures = channel.attempts + 1
        failures = store.failed(channel.id, now, error, now + self.config.backoff_ms(failures)) or failures
        report.stats["delivery/failed"] += 1
        if error.startswith(REFUSED):
            report.stats["delivery/refused"] += 1
        state = replace(channel, attempts=failures, last_error=error, failing_since=channel.failing_since or now)
        if failures >= self.config.failing_after:
            report.stats["delivery/channels_failing"] += 1
            report.failing.append(self._failing_line(state))
            logger.warning(report.failing[-1])
        else:
            logger.info("Delivery to channel %s of %s failed (%s); trying again in %d s", channel.id,
                        channel.owner, error, self.config.backoff_ms(failures) // 1000)

    def _failing_line(self, channel: Channel) -> str:
        """For the admin (the log, `scrapy deliver`): with the last error, which owners never see."""
        return (f"Delivery channel {channel.id} of {channel.owner} ({shown(channel.url)}) is "
                f"{status(channel, self.config.failing_after)}, last error: {channel.last_error}; retried every "
                f"{self.config.backoff_ms(channel.attempts) // 1000} s at most")

    # -- 4. acknowledge ------------------------------------------------------------------

    def _acknowledge(self, store: DeliveryStore, acis: AciStore, marked: list[tuple[str, list]],
                     report: PassReport) -> None:
        """ACIs sent and marked (``marked``: owner, items) that every ACI channel of their
        owner has now taken."""
        sent: dict[str, dict[str, int]] = {}
        for owner, items in marked:
            sent.setdefault(owner, {}).update({i: at for kind, i, at in items if kind == "aci"})
        for owner, candidates in sent.items():
            ready = set(candidates)
            for channel in (c for c in store.channels(owner) if c.wants("aci")):
                old = {i for i, at in candidates.items() if at < channel.since}  # before its window
                ready &= old | (set(candidates) - set(store.unsent(channel.id, "aci", candidates)))
            if ready:
                report.stats["delivery/acked"] += acis.ack(owner, sorted(ready))
