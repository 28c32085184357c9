"""The embedded results table of the rules (``results.sqlite``): a row per rule and document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from webrace.backends.base import ResultsStore
from webrace.backends.sqlite.connection import Transaction, connect

_RESULTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS document (
    url  TEXT PRIMARY KEY,
    seq  INTEGER NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS result (
    rule     TEXT NOT NULL,
    url      TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    results  TEXT NOT NULL,
    updated  INTEGER NOT NULL,
    PRIMARY KEY (rule, url)
);
CREATE INDEX IF NOT EXISTS result_seq ON result(rule, seq);
"""


class SqliteResultsStore(ResultsStore):
    def __init__(self, path: str | Path) -> None:
        self.conn = connect(Path(path))
        self.conn.executescript(_RESULTS_SCHEMA)

    def seq(self, url: str) -> int:
        row = self.conn.execute("SELECT seq FROM document WHERE url = ?", (url,)).fetchone()
        if row:
            return row[0]
        with Transaction(self.conn):
            row = self.conn.execute("SELECT seq FROM document WHERE url = ?", (url,)).fetchone()
            if row:
                return row[0]
            (top,) = self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM document").fetchone()
            self.conn.execute("INSERT INTO document (url, seq) VALUES (?, ?)", (url, top + 1))
            return top + 1

    def put(self, rule: str, url: str, seq: int, results: list, at_ms: int) -> None:
        with Transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO result (rule, url, seq, results, updated) VALUES (?, ?, ?, ?, ?)",
                              (rule, url, seq, json.dumps(results, ensure_ascii=False), at_ms))

    def get(self, rule: str, url: str) -> list | None:
        row = self.conn.execute("SELECT results FROM result WHERE rule = ? AND url = ?", (rule, url)).fetchone()
        return json.loads(row[0]) if row else None

    def rows(self, rule: str | None = None) -> Iterator[tuple[str, str, int, list]]:
        if rule is None:
            cursor = self.conn.execute("SELECT rule, url, seq, results FROM result ORDER BY rule, seq")
        else:
            cursor = self.conn.execute("SELECT rule, url, seq, results FROM result WHERE rule = ? ORDER BY seq",
                                       (rule,))
        for name, url, seq, results in cursor:
            yield name, url, seq, json.loads(results)

    def rules(self) -> list[str]:
        return [r for (r,) in self.conn.execute("SELECT DISTINCT rule FROM result ORDER BY rule")]

    def close(self) -> None:
        self.conn.close()
