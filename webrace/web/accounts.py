"""Accounts of the user tier (the seed's Service Manager authenticates people): an owner is
an account, with a password hashed by Argon2id (argon2-cffi, RFC 9106 parameters), an admin
flag, API tokens (only their SHA-256 is stored: a token is 256 random bits, so a fast hash
is enough and lets it be looked up), a secret feed token (the same, read-only, for the
owner's Atom feed only), the logins of the web app's sessions (the signed session cookie
names a login; logging out, a new password or removing the account ends it on the server
too, so a copied cookie stops working) and the login attempts the login limit counts.

Names are stored and looked up in one form (``webrace.names.canonical_owner``: NFKC, case
folded): ``Alice`` and ``alice`` are one account, and a login as ``ALICE`` finds it.

Accounts live in SQLite under ``WEBRACE_DATA_DIR`` (``accounts.sqlite``) in both modes:
like the URD-DB they stay where the scheduler and the web app run.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from webrace.backends import data_dir
from webrace.backends.sqlite.connection import connect
from webrace.names import canonical_owner, owner_name_problem  # one rule for every entry path

# Owner names: what urd.xsd allows as an owner, so every account can own URDs.
MAX_PASSWORD = 1024  # characters; Argon2 takes any length, the bound keeps a request cheap
TOKEN_PREFIX = "wr_"  # noqa: S105 - the visible prefix of API tokens, not a secret
FEED_TOKEN_PREFIX = "wrf_"  # noqa: S105 - told apart from API tokens at a glance; never accepted by the API
SCHEMA_VERSION = 1  # PRAGMA user_version: 1 = names in canonical form

_SCHEMA = """
CREATE TABLE IF NOT EXISTS account (
    name      TEXT PRIMARY KEY,
    password  TEXT NOT NULL,
    admin     INTEGER NOT NULL DEFAULT 0,
    created   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS token (
    digest    TEXT PRIMARY KEY,
    name      TEXT NOT NULL REFERENCES account(name) ON DELETE CASCADE,
    created   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS login (
    id        TEXT PRIMARY KEY,
    name      TEXT NOT NULL REFERENCES account(name) ON DELETE CASCADE,
    expires   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS feed_token (
    name      TEXT PRIMARY KEY REFERENCES account(name) ON DELETE CASCADE,
    digest    TEXT NOT NULL UNIQUE,
    created   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS login_attempt (
    key       TEXT NOT NULL,
    at        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS login_attempt_key ON login_attempt (key, at);
CREATE INDEX IF NOT EXISTS login_attempt_at ON login_attempt (at);
"""

_RENAME = tuple(f"UPDATE {table} SET name = ? WHERE name = ?" for table in ("account", "token", "login", "feed_token"))  # noqa: S608 - table names of ours


class AccountError(ValueError):
    """A bad name, password or unknown account; the message says which, in one line."""


class Accounts:
    """The account store (one SQLite connection: open one per thread, like the other stores)."""

    def __init__(self, path: str | Path, hasher: PasswordHasher | None = None) -> None:
        self.conn = connect(Path(path))
        self.conn.executescript(_SCHEMA)
        if self.conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            self._canonical_names()
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.hasher = hasher or PasswordHasher()

    def _canonical_names(self) -> None:
        """Accounts made before names were case folded (``Alice``): renamed to their canonical
        form, once, with their tokens and logins (foreign keys are off until this is done).
        One whose canonical form another account already has keeps its name: ``scrapy user
        list`` shows both, and ``scrapy user remove`` takes the exact name first."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            taken = {n for (n,) in self.conn.execute("SELECT name FROM account")}
            for old in sorted(taken):
                new = canonical_owner(old)
                if new is not None and new != old and new not in taken:
                    for statement in _RENAME:
                        self.conn.execute(statement, (new, old))
                    taken = (taken - {old}) | {new}
            self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def __enter__(self) -> Accounts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # -- accounts -------------------------------------------------------------------------

    def add(self, name: str, password: str, admin: bool = False) -> str:
        """Add the account; returns its name as stored (canonical: ``Alice`` -> ``alice``)."""
        name = check_name(name)
        digest = self.hasher.hash(check_password(password))
        try:
            self.conn.execute("INSERT INTO account (name, password, admin, created) VALUES (?, ?, ?, ?)",
                              (name, digest, int(admin), _now()))
        except sqlite3.IntegrityError:
            raise AccountError(f"there is already an account named {name!r}") from None
        return name

    def check(self, name: str, password: str) -> bool:
        """Whether ``password`` is ``name``'s. An unknown name costs the same hashing (the
        answer does not tell which of the two was wrong, nor by its timing)."""
        name = _key(name)
        row = self.conn.execute("SELECT password FROM account WHERE name = ?", (name,)).fetchone()
        stored = row[0] if row else _dummy_hash(self.hasher)
        try:
            self.hasher.verify(stored, password[:MAX_PASSWORD + 1])
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
        if row is None:
            return False
        if self.hasher.check_needs_rehash(stored):  # parameters raised since: upgrade it now
            self.conn.execute("UPDATE account SET password = ? WHERE name = ?", (self.hasher.hash(password), name))
        return True

    def remove(self, name: str) -> None:
        """Remove the account, its tokens and logins (its URDs, ACIs and sentinels stay). The
        exact name first: an account older than canonical names, left so by a clash, can go."""
        for key in dict.fromkeys((name, _key(name))):
            if self.conn.execute("DELETE FROM account WHERE name = ?", (key,)).rowcount:
                return
        raise AccountError(f"no account named {name!r}")

    def passwd(self, name: str, password: str) -> None:
        """A new password; every login of the account ends."""
        digest = self.hasher.hash(check_password(password))
        name = _key(name)
        if not self.conn.execute("UPDATE account SET password = ? WHERE name = ?", (digest, name)).rowcount:
            raise AccountError(f"no account named {name!r}")
        self.conn.execute("DELETE FROM login WHERE name = ?", (name,))

    def names(self) -> list[str]:
        return [n for (n,) in self.conn.execute("SELECT name FROM account ORDER BY name")]

    def exists(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM account WHERE name = ?", (_key(name),)).fetchone() is not None

    def is_admin(self, name: str) -> bool:
        row = self.conn.execute("SELECT admin FROM account WHERE name = ?", (_key(name),)).fetchone()
        return bool(row and row[0])

    def rows(self) -> list[dict[str, Any]]:
        """Every account: name, admin, created (epoch ms), tokens (how many)."""
        query = ("SELECT a.name, a.admin, a.created, COUNT(t.digest) FROM account a "
                 "LEFT JOIN token t ON t.name = a.name GROUP BY a.name ORDER BY a.name")
        return [{"name": n, "admin": bool(a), "created": c, "tokens": t} for n, a, c, t in self.conn.execute(query)]

    # -- API tokens -----------------------------------------------------------------------

    def new_token(self, name: str) -> str:
        """A new API token for ``name`` (shown once: only its hash is kept)."""
        if not self.exists(name):
            raise AccountError(f"no account named {name!r}")
        name = _key(name)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.conn.execute("INSERT INTO token (digest, name, created) VALUES (?, ?, ?)",
                          (_token_digest(token), name, _now()))
        return token

    def owner_for_token(self, token: str) -> str | None:
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        row = self.conn.execute("SELECT name FROM token WHERE digest = ?", (_token_digest(token),)).fetchone()
        return row[0] if row else None

    def revoke_tokens(self, name: str) -> int:
        return self.conn.execute("DELETE FROM token WHERE name = ?", (_key(name),)).rowcount

    # -- the secret feed token: reads the owner's Atom feed, nothing else ----------------------

    def new_feed_token(self, name: str) -> str:
        """A new secret feed token for ``name``, replacing the one before (shown once: only its
        hash is kept)."""
        if not self.exists(name):
            raise AccountError(f"no account named {name!r}")
        token = FEED_TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.conn.execute("INSERT OR REPLACE INTO feed_token (name, digest, created) VALUES (?, ?, ?)",
                          (_key(name), _token_digest(token), _now()))
        return token

    def feed_owner(self, token: str) -> str | None:
        """Whose feed ``token`` reads (None: no such token, or revoked)."""
        if not token.startswith(FEED_TOKEN_PREFIX) or len(token) > 200:
            return None
        row = self.conn.execute("SELECT name FROM feed_token WHERE digest = ?", (_token_digest(token),)).fetchone()
        return row[0] if row else None

    def feed_token_made(self, name: str) -> int | None:
        """When ``name``'s feed token was made (epoch ms; None: there is none)."""
        row = self.conn.execute("SELECT created FROM feed_token WHERE name = ?", (_key(name),)).fetchone()
        return row[0] if row else None

    def revoke_feed_token(self, name: str) -> bool:
        return bool(self.conn.execute("DELETE FROM feed_token WHERE name = ?", (_key(name),)).rowcount)

    # -- logins (the web app's sessions) --------------------------------------------------

    def open_login(self, name: str, lifetime_s: float) -> str:
        """A login of ``name`` lasting ``lifetime_s``; its id goes into the session cookie."""
        login = secrets.token_urlsafe(24)
        now = _now()
        self.conn.execute("DELETE FROM login WHERE expires < ?", (now,))  # the table stays small
        self.conn.execute("INSERT INTO login (id, name, expires) VALUES (?, ?, ?)",
                          (login, _key(name), now + int(lifetime_s * 1000)))
        return login

    def login_owner(self, login: str) -> str | None:
        """The account a login belongs to, while it lasts."""
        row = self.conn.execute("SELECT name FROM login WHERE id = ? AND expires >= ?", (login, _now())).fetchone()
        return row[0] if row else None

    def close_login(self, login: str) -> None:
        self.conn.execute("DELETE FROM login WHERE id = ?", (login,))

    # -- the login limit: attempts counted here, shared by every process of the data directory --

    def count_attempt(self, key: str, limit: int, window_ms: int) -> tuple[int | None, int]:
        """Count a login attempt on ``key`` (client address and canonical name) BEFORE its
        password is checked, in a moving window of ``window_ms``: ``(attempt id, 0)`` when
        fewer than ``limit`` attempts are in the window, else ``(None, ms until one leaves
        it)`` and nothing is counted. One write transaction (``BEGIN IMMEDIATE``: SQLite's
        lock on the file) for the count and the insert, so parallel attempts, in threads or
        in several server processes, are let through ``limit`` at most."""
        now = _now()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute("DELETE FROM login_attempt WHERE at <= ?", (now - window_ms,))  # the table stays small
            count, oldest = self.conn.execute("SELECT COUNT(*), MIN(at) FROM login_attempt WHERE key = ?",
                                              (key,)).fetchone()
            attempt = None
            if count < limit:
                attempt = self.conn.execute("INSERT INTO login_attempt (key, at) VALUES (?, ?)", (key, now)).lastrowid
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return (attempt, 0) if attempt is not None else (None, max(oldest + window_ms - now, 1))

    def forget_attempt(self, attempt: int) -> None:
        """A login that succeeded: its attempt is no failure, and is not counted."""
        self.conn.execute("DELETE FROM login_attempt WHERE rowid = ?", (attempt,))


def open_accounts(settings: Any) -> Accounts:
    """The account store of ``WEBRACE_DATA_DIR`` (``accounts.sqlite``)."""
    return Accounts(data_dir(settings) / "accounts.sqlite")


def check_name(name: str) -> str:
    """``name`` in the form it is stored in (``Alice`` -> ``alice``), or :class:`AccountError`."""
    problem = owner_name_problem(name or "")
    if problem:
        raise AccountError(problem)
    return canonical_owner(name)


def _key(name: str) -> str:
    """The stored form of a name looked up (a name that has none is looked up as given: not found)."""
    return canonical_owner(name) or name


def check_password(password: str) -> str:
    if not password:
        raise AccountError("the password is empty")
    if len(password) > MAX_PASSWORD:
        raise AccountError(f"the password is longer than {MAX_PASSWORD} characters")
    return password


def _token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


_DUMMY: dict[tuple, str] = {}


def _dummy_hash(hasher: PasswordHasher) -> str:
    """A hash with the hasher's parameters, verified when the name is unknown."""
    key = (hasher.time_cost, hasher.memory_cost, hasher.parallelism)
    if key not in _DUMMY:
        _DUMMY[key] = hasher.hash(secrets.token_hex(16))
    return _DUMMY[key]


def _now() -> int:
    return int(time.time() * 1000)
