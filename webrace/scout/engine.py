"""Running a template's rules over documents, in the crawl or offline (seed 001).

:class:`RuleEngine` owns the rule instances and the results table, and is used from one
thread at a time (the crawl gives it a dedicated worker thread; ``scrapy rules run`` calls
it directly), so rules need no locking and an SQLite results table stays on its thread.
For each document every rule runs in template order; each one's results are recorded
before the next runs (a later rule reads an earlier one's results for the same document).
A rule that raises is logged and counted; its results for that document are not recorded,
and the other rules go on.

No Scrapy here.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rules.base import Doc, ResultsView, Rule
from webrace.backends.base import SESSION, ResultsStore
from webrace.scout.template import Template

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuleResult:
    """One rule's results for one document (also the item the crawl emits, and one line of
    ``scrapy results export``)."""

    rule: str
    url: str
    seq: int
    results: list


@dataclass
class Outcome:
    """What running every rule over one document produced."""

    seq: int
    results: list[RuleResult] = field(default_factory=list)
    enqueued: list[str] = field(default_factory=list)
    errors: int = 0


class RuleEngine:
    def __init__(self, template: Template, open_store: Callable[[], ResultsStore]) -> None:
        self.template = template
        self.rules: list[Rule] = template.instantiate()
        self._open_store = open_store
        self._store: ResultsStore | None = None
        self.stats: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()  # time spent per rule
        self._enqueued: list[str] = []
        for rule in self.rules:
            rule.results = ResultsView(self._get, self._rows)
            rule._enqueue = self._enqueued.append

    @property
    def store(self) -> ResultsStore:
        if self._store is None:  # opened on the thread that uses it
            self._store = self._open_store()
        return self._store

    def _get(self, rule: str, url: str) -> list | None:
        return self.store.get(rule, url)

    def _rows(self, rule: str) -> Any:
        return ((url, seq, results) for _, url, seq, results in self.store.rows(rule))

    def process(self, url: str, body: bytes, headers: Mapping[str, str] | None = None, status: int = 200,
                version: int | None = None) -> Outcome:
        """Run every rule over one document; record and return their results."""
        store = self.store
        seq = store.seq(url)
        doc = Doc(url, seq, body, {k.lower(): v for k, v in (headers or {}).items()}, status, version)
        outcome = Outcome(seq)
        now = int(time.time() * 1000)
        for rule in self.rules:
            self._enqueued.clear()
            started = time.perf_counter()
            try:
                results = as_results(rule.process_doc(doc))
            except Exception:
                logger.exception("Rule %s failed on %s", rule.name, url)
                outcome.errors += 1
                self.stats["rules/errors"] += 1
                continue
            finally:
                self.seconds[rule.name] += time.perf_counter() - started
            store.put(rule.name, url, seq, results, now)
            outcome.results.append(RuleResult(rule.name, url, seq, results))
            outcome.enqueued.extend(self._enqueued)
            self.stats["rules/results"] += len(results)
        self.stats["rules/documents"] += 1
        self.stats["rules/enqueued"] += len(outcome.enqueued)
        return outcome

    def close(self) -> list[RuleResult]:
        """Every rule's ``close()`` (in template order); results recorded for the session."""
        done = []
        now = int(time.time() * 1000)
        for rule in self.rules:
            try:
                results = as_results(rule.close())
            except Exception:
                logger.exception("Rule %s failed when closing", rule.name)
                self.stats["rules/errors"] += 1
                continue
            if results:
                self.store.put(rule.name, SESSION, 0, results, now)
                done.append(RuleResult(rule.name, SESSION, 0, results))
        if self._store is not None:
            self._store.close()
            self._store = None
        return done


def as_results(output: Any) -> list:
    """A rule's output as a JSON list: None -> [], one value -> [value], an iterable (not a
    string or a mapping) -> its values. Dataclasses become their fields; anything else JSON
    cannot hold becomes its ``str``."""
    if output is None:
        return []
    single = isinstance(output, (str, bytes, Mapping)) or dataclasses.is_dataclass(output)
    if single or not isinstance(output, Iterable):
        output = [output]
    return [_jsonable(value) for value in output]


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif hasattr(value, "to_dict"):
        value = value.to_dict()
    elif isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    elif isinstance(value, (set, frozenset, tuple)):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
