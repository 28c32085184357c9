"""The state-store interfaces components depend on (never on SQLite or Redis directly)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

from webrace.urd import Urd


class UrdStore(ABC):
    """URD-DB: the standing requests, keyed by URD id."""

    @abstractmethod
    def put_many(self, urds: Iterable[Urd]) -> None:
        """Store every URD in one transaction; an id already present is replaced."""

    @abstractmethod
    def remove(self, ids: Iterable[str]) -> list[str]:
        """Remove these ids; return the ones that existed."""

    @abstractmethod
    def get(self, urd_id: str) -> Urd | None: ...

    @abstractmethod
    def all(self) -> list[Urd]:
        """Every URD, ordered by id."""

    @abstractmethod
    def due(self, now_ms: int) -> list[Urd]:
        """URDs with ``lastcheck + timing <= now_ms`` (never checked = due), soonest first."""

    @abstractmethod
    def mark_checked(self, ids: Iterable[str], at_ms: int) -> None:
        """Set ``lastcheck`` of these URDs to ``at_ms``."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self) -> UrdStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
