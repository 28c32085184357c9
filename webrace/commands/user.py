"""``scrapy user add|list|remove|passwd|token``: the accounts of the web app (each owner is one)."""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.commands import ends_quietly_on_closed_pipe

# webrace.web.accounts (argon2, the SQLite stores) is imported where it is used, not at the top: Scrapy
# imports every command module to list them
if TYPE_CHECKING:
    from webrace.web.accounts import Accounts

EXIT_BAD_INPUT = 2  # as a UsageError ends a command


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: done; 2 also: a bad name, an empty password, an existing account, an unknown name"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return ("add NAME [--admin] [--password-stdin] | list | remove NAME | passwd NAME [--password-stdin] | "
                "token NAME [--revoke]")

    def short_desc(self) -> str:
        return "Manage the web app's accounts (one per owner): add, list, remove, new password, API token"

    def long_desc(self) -> str:
        return (
            "add NAME [--admin]: a new account (an owner; --admin sees and manages every owner); the password is "
            "asked twice, or read from one line of standard input with --password-stdin. list: every account. "
            "Names are stored case folded (Unicode NFKC): Alice and alice are one account. "
            "remove NAME: the account, its tokens and logins (its URDs, ACIs and sentinels stay). passwd NAME: a "
            "new password (every login of the account ends). token NAME: print a new API token for "
            "`Authorization: Bearer` (only its hash is kept; shown once); --revoke: remove all of NAME's tokens."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--admin", action="store_true", help="with `add`: an admin account")
        parser.add_argument("--password-stdin", action="store_true",
                            help="with `add`/`passwd`: read the password from one line of standard input")
        parser.add_argument("--revoke", action="store_true", help="with `token`: remove every token of NAME")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("missing subcommand: add, list, remove, passwd or token")
        action, rest = args[0], args[1:]
        handler = {"add": self.add, "list": self.list, "remove": self.remove, "rm": self.remove,
                   "passwd": self.passwd, "token": self.token}.get(action)
        if handler is None:
            raise UsageError(f"unknown subcommand {action!r}: expected add, list, remove, passwd or token")
        if action == "list":
            if rest:
                raise UsageError("`list` takes no arguments")
        elif len(rest) != 1:
            raise UsageError(f"`{action}` takes one account name")
        from webrace.web.accounts import AccountError, open_accounts

        try:
            with open_accounts(self.settings) as accounts:
                handler(accounts, *rest, opts=opts)
        except AccountError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = EXIT_BAD_INPUT

    def add(self, accounts: Accounts, name: str, opts: argparse.Namespace) -> None:
        from webrace.web.accounts import AccountError, check_name

        name = check_name(name)  # before the password is asked; as it is stored: Alice -> alice
        if accounts.exists(name):
            raise AccountError(f"there is already an account named {name!r}")
        accounts.add(name, _password(opts.password_stdin), admin=opts.admin)
        print(f"Added {'admin ' if opts.admin else ''}account {name}")

    def list(self, accounts: Accounts, opts: argparse.Namespace) -> None:
        rows = accounts.rows()
        if not rows:
            print("No account: add one with `scrapy user add NAME --admin`", file=sys.stderr)
            return
        width = max(len("NAME"), *(len(r["name"]) for r in rows))
        print(f"{'NAME':<{width}}  ROLE   TOKENS  CREATED")
        for row in rows:
            created = datetime.fromtimestamp(row["created"] / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            role = "admin" if row["admin"] else "owner"
            print(f"{row['name']:<{width}}  {role:<5}  {row['tokens']:>6}  {created}")

    def remove(self, accounts: Accounts, name: str, opts: argparse.Namespace) -> None:
        accounts.remove(name)
        print(f"Removed account {name} (its URDs, ACIs and sentinels stay)")

    def passwd(self, accounts: Accounts, name: str, opts: argparse.Namespace) -> None:
        from webrace.web.accounts import AccountError

        if not accounts.exists(name):
            raise AccountError(f"no account named {name!r}")
        accounts.passwd(name, _password(opts.password_stdin))
        print(f"New password for {name}")

    def token(self, accounts: Accounts, name: str, opts: argparse.Namespace) -> None:
        from webrace.web.accounts import AccountError

        if not accounts.exists(name):
            raise AccountError(f"no account named {name!r}")
        if opts.revoke:
            print(f"Revoked {accounts.revoke_tokens(name)} token(s) of {name}")
            return
        print(accounts.new_token(name))


def _password(from_stdin: bool) -> str:
    """One line of standard input, or asked twice at the terminal (not echoed)."""
    from webrace.web.accounts import MAX_PASSWORD, AccountError, check_password

    if from_stdin:
        line = sys.stdin.readline(MAX_PASSWORD + 2)
        return check_password(line.removesuffix("\n").removesuffix("\r"))
    if not sys.stdin.isatty():
        raise AccountError("no terminal to ask the password at: use --password-stdin")
    first = check_password(getpass.getpass("Password: "))
    if getpass.getpass("Again: ") != first:
        raise AccountError("the two passwords differ")
    return first
