"""``scrapy web serve [--host H] [--port P]``: the web app (login, each owner's pages and
profile, the JSON API) on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import re
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.commands import ends_quietly_on_closed_pipe, environment_errors
from webrace.safetext import printable

if TYPE_CHECKING:
    from webrace.web.config import WebConfig


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    exit_statuses: ClassVar[str] = (
        "0: stopped by Ctrl-C or SIGTERM (Redis going away is answered 503 meanwhile); 1: it cannot "
        "listen there, a setting of the web app is wrong"
    )
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "serve [--host H] [--port P]"

    def short_desc(self) -> str:
        return "Serve the web app: login, each owner's ACIs, notifications and profile, the JSON API"

    def long_desc(self) -> str:
        return (
            "serve: the web app (waitress) on 127.0.0.1:8080 unless --host/--port say otherwise (--port 0: any "
            "free port). Every page needs a login (accounts: `scrapy user add NAME [--admin]`); an owner sees "
            "only their own pages, an admin everyone's. Host names other than WEBRACE_WEB_ALLOWED_HOSTS get 400. "
            "Stops on Ctrl-C."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--host", default="127.0.0.1", metavar="H",
                            help="address to listen on (default 127.0.0.1: this machine only)")
        parser.add_argument("--port", type=int, default=8080, metavar="P", help="TCP port (default 8080; 0: any)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        # imported here, not at the top: Scrapy imports every command module to list them (Flask)
        from webrace.web.config import WebConfig
        from webrace.web.server import request_timeout, serve

        if args != ["serve"]:
            raise UsageError("expected `serve`")
        if not 0 <= opts.port <= 65535:
            raise UsageError("--port must be between 0 and 65535")
        problem = host_problem(opts.host)
        if problem:
            raise UsageError(problem)
        try:
            web = WebConfig.from_settings(self.settings, opts.host)
            request_timeout(self.settings)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        self._warn(web, opts.host)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
        try:
            serve(self.settings, opts.host, opts.port, announce=lambda line: print(line, flush=True))
        except environment_errors():
            raise
        except (OSError, ValueError) as exc:  # waitress: ValueError for a name that resolves to nothing
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if isinstance(exc, ValueError):
                reason = "not an address of this machine or a name it resolves"
            print(f"error: cannot listen on {opts.host}:{opts.port}: {reason}", file=sys.stderr)
            self.exitcode = 1

    def _warn(self, web: WebConfig, host: str) -> None:
        from webrace.web.accounts import open_accounts

        with open_accounts(self.settings) as accounts:
            if not accounts.names():
                print("warning: no account yet: nobody can log in; add one with `scrapy user add NAME --admin`",
                      file=sys.stderr)
        if not _loopback(host):
            plain = "" if web.plain_http.private or web.plain_http.networks else (
                "; plain http is answered from this machine only (WEBRACE_WEB_PLAIN_HTTP): put a TLS proxy in "
                "front (WEBRACE_WEB_TRUSTED_PROXY)")
            print(f"note: listening beyond this machine; Host names answered: {', '.join(web.allowed_hosts)} "
                  f"(WEBRACE_WEB_ALLOWED_HOSTS){plain}", file=sys.stderr)


_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def host_problem(host: str) -> str | None:
    """Why ``host`` cannot be an address to listen on (None: it may be): an IP address (IPv6
    with or without brackets) or a host name of at most 253 characters in labels of at most 63."""
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(literal)
        return None
    except ValueError:
        pass
    name = host.removesuffix(".")
    if 0 < len(name) <= 253 and all(_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return f"--host must be an IP address or a host name of this machine, not {printable(repr(host), 80)}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
