"""What a crawl's log says to a person: Scrapy's dumps (its versions, settings and enabled
components when it starts, its stats when it ends: about 130 lines) become DEBUG lines, so that
at the default INFO a crawl ends with the WebRACE summary (:mod:`webrace.summary`), not with
the stats dump it is lost in. ``-s WEBRACE_SCRAPY_DUMPS=True`` or ``-L DEBUG`` shows them;
``last-crawl.json`` has every stat either way."""

from __future__ import annotations

import logging

# Scrapy's loggers, and how the messages they dump start
DUMPS = {
    "scrapy.utils.log": ("Versions:",),
    "scrapy.addons": ("Enabled addons:",),
    "scrapy.middleware": ("Enabled ",),  # extensions, downloader and spider middlewares, item pipelines
    "scrapy.crawler": ("Overridden settings:",),
    "scrapy.statscollectors": ("Dumping Scrapy stats:",),
}


class DumpsToDebug(logging.Filter):
    """A logger filter that makes Scrapy's dumps DEBUG records: the handlers compare a record's
    level after the logger's filters, so at INFO they drop them, at DEBUG they show them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith(DUMPS.get(record.name, ())) and record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


DUMPS_TO_DEBUG = DumpsToDebug()


def quiet_scrapy_dumps() -> None:
    """Before Scrapy logs its start (the crawl command's ``process_options``): from then on in
    this process its dumps are DEBUG lines. Adding the filter twice adds it once."""
    for name in DUMPS:
        logging.getLogger(name).addFilter(DUMPS_TO_DEBUG)
