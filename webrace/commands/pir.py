"""``scrapy pir serve [--port P]``: each owner's ACIs as a small web page on 127.0.0.1."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webrace.commands import ends_quietly_on_closed_pipe


@ends_quietly_on_closed_pipe
class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "serve [--port P]"

    def short_desc(self) -> str:
        return "Serve the Personal Information Roadmap: each owner's ACIs, newest first, on 127.0.0.1"

    def long_desc(self) -> str:
        return (
            "serve: an HTTP server on 127.0.0.1 (only) with / (owners), /owner/NAME (their ACIs, each "
            "linking to the stored version), /owner/NAME/feed.atom and /aci/ID (the stored version, "
            "scripts disabled). --port 0 picks a free port. Stops on Ctrl-C."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--port", type=int, default=8080, metavar="P", help="TCP port (default 8080; 0: any)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args != ["serve"]:
            raise UsageError("expected `serve`")
        if not 0 <= opts.port <= 65535:
            raise UsageError("--port must be between 0 and 65535")
        from webrace.annotation.pir import PirServer

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
        try:
            server = PirServer(self.settings, opts.port)
        except OSError as exc:
            print(f"error: cannot listen on 127.0.0.1:{opts.port}: {exc.strerror or exc}", file=sys.stderr)
            self.exitcode = 1
            return
        print(f"Serving the PIR on {server.base_url}/ (Ctrl-C to stop)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
