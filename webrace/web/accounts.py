"""Accounts of the user tier (the seed's Service Manager authenticates people): an owner is
an account, with a password hashed by Argon2id (argon2-cffi, RFC 9106 parameters), an admin
flag, API tokens (only their SHA-256 is stored: a token is 256 random bits, so a fast hash
is enough and lets it be looked up), and the logins of the web app's sessions (the signed
session cookie names a login; logging out, a new password or removing the account ends it
on the server too, so a copied cookie stops working).

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
from webrace.backends.sqlite import connect
from webrace.names import owner_name_problem  # one rule for every entry path

# Owner names: what urd.xsd allows as an owner, so every account can own URDs.
MAX_PASSWORD = 1024  # characters; Argon2 takes any length, the bound keeps a request cheap
TOKEN_PREFIX = "wr_"  # noqa: S105 - the visible prefix of API tokens, not a secret

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
"""


class AccountError(ValueError):
    """A bad name, password or unknown account; the message says which, in one line."""


class Accounts:
    """The account store (one SQLite connection: open one per thread, like the other stores)."""

    def __init__(self, path: str | Path, hasher: PasswordHasher | None = None) -> None:
        self.conn = connect(Path(path))
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.executescript(_SCHEMA)
        self.hasher = hasher or PasswordHasher()

    def __enter__(self) -> Accounts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # -- accounts -------------------------------------------------------------------------

    def add(self, name: str, password: str, admin: bool = False) -> None:
        check_name(name)
        digest = self.hasher.hash(check_password(password))
        try:
            self.conn.execute("INSERT INTO account (name, password, admin, created) VALUES (?, ?, ?, ?)",
                              (name, digest, int(admin), _now()))
        except sqlite3.IntegrityError:
            raise AccountError(f"there is already an account named {name!r}") from None

    def check(self, name: str, password: str) -> bool:
        """Whether ``password`` is ``name``'s. An unknown name costs the same hashing (the
        answer does not tell which of the two was wrong, nor by its timing)."""
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
        """Remove the account, its tokens and logins (its URDs, ACIs and sentinels stay)."""
        if not self.conn.execute("DELETE FROM account WHERE name = ?", (name,)).rowcount:
            raise AccountError(f"no account named {name!r}")

    def passwd(self, name: str, password: str) -> None:
        """A new password; every login of the account ends."""
        digest = self.hasher.hash(check_password(password))
        if not self.conn.execute("UPDATE account SET password = ? WHERE name = ?", (digest, name)).rowcount:
            raise AccountError(f"no account named {name!r}")
        self.conn.execute("DELETE FROM login WHERE name = ?", (name,))

    def names(self) -> list[str]:
        return [n for (n,) in self.conn.execute("SELECT name FROM account ORDER BY name")]

    def exists(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM account WHERE name = ?", (name,)).fetchone() is not None

    def is_admin(self, name: str) -> bool:
        row = self.conn.execute("SELECT admin FROM account WHERE name = ?", (name,)).fetchone()
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
        return self.conn.execute("DELETE FROM token WHERE name = ?", (name,)).rowcount

    # -- logins (the web app's sessions) --------------------------------------------------

    def open_login(self, name: str, lifetime_s: float) -> str:
        """A login of ``name`` lasting ``lifetime_s``; its id goes into the session cookie."""
        login = secrets.token_urlsafe(24)
        now = _now()
        self.conn.execute("DELETE FROM login WHERE expires < ?", (now,))  # the table stays small
        self.conn.execute("INSERT INTO login (id, name, expires) VALUES (?, ?, ?)",
                          (login, name, now + int(lifetime_s * 1000)))
        return login

    def login_owner(self, login: str) -> str | None:
        """The account a login belongs to, while it lasts."""
        row = self.conn.execute("SELECT name FROM login WHERE id = ? AND expires >= ?", (login, _now())).fetchone()
        return row[0] if row else None

    def close_login(self, login: str) -> None:
        self.conn.execute("DELETE FROM login WHERE id = ?", (login,))


def open_accounts(settings: Any) -> Accounts:
    """The account store of ``WEBRACE_DATA_DIR`` (``accounts.sqlite``)."""
    return Accounts(data_dir(settings) / "accounts.sqlite")


def check_name(name: str) -> str:
    problem = owner_name_problem(name or "")
    if problem:
        raise AccountError(problem)
    return name


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
