"""Feeds: one ACI per line or row however the crawl batches them; CSV feeds with one item
type per file, every cell readable back.

:class:`FeedExporter` (in ``EXTENSIONS`` in place of Scrapy's) writes each ACI of an
:class:`~webrace.items.AciBatch` (the ACIs of one page, one item in the crawl) as an item of
its own, so feeds, ``item_classes`` filters and ``batch_item_count`` see ACIs as before.

A crawl emits several item types (``scrapy crawl urd``: pages, ACIs, rule results,
notifications; ``scrapy crawl dynabot``: profiles and traces). Scrapy's CSV exporter takes
its columns from the first item and writes every later item into them, so an ACI after a
page became a row of mostly empty page columns ("CSVExporter dropped fields"). Here:

- :class:`CsvItemExporter` (``FEED_EXPORTERS["csv"]``) keeps a file to the type of its first
  item: its columns are that type's fields, and an item of another type is not written into
  them (a warning names the type, how many were left out, and how to get them). Lists and
  dicts are written as JSON, so a link list whose URLs contain commas reads back as it was.
  With ``FEED_EXPORT_FIELDS`` (or a feed's ``fields``) the columns are yours and every item is
  written, as in Scrapy.
- :func:`split_csv_feeds` gives ``-o/-O FILE.csv`` one CSV per item type, through the
  ``item_classes`` feed option: the first type in ``FILE.csv``, the others beside it
  (``pages.csv`` -> ``pages.acis.csv``), each created only when it has items.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

from scrapy.exporters import CsvItemExporter as ScrapyCsvItemExporter
from scrapy.exporters import JsonItemExporter as ScrapyJsonItemExporter
from scrapy.exporters import JsonLinesItemExporter as ScrapyJsonLinesItemExporter
from scrapy.extensions.feedexport import FeedExporter as ScrapyFeedExporter
from scrapy.extensions.feedexport import ItemFilter
from scrapy.utils.python import to_bytes

from webrace.items import AciBatch
from webrace.records.aci import Aci
from webrace.rounds.groups import Members

logger = logging.getLogger(__name__)

# The item types each spider emits: the first goes to the file named on the command line,
# each other one to that name with its key before ".csv".
ITEM_TYPES: dict[str, dict[str, str]] = {
    "urd": {
        "": "webrace.items.Page",
        "acis": "webrace.records.aci.Aci",
        "results": "webrace.scout.engine.RuleResult",
        "notifications": "webrace.sentinels.evaluate.Notification",
    },
    "dynabot": {"": "webrace.items.ServiceProfile", "traces": "webrace.items.ServiceTrace"},
}


class FeedExporter(ScrapyFeedExporter):
    """Scrapy's feed exports, with a page's batch of ACIs written one ACI at a time."""

    def item_scraped(self, item: Any, spider: Any) -> None:
        if isinstance(item, AciBatch):
            if not self._takes_acis():
                return  # no feed writes ACIs: none is made (a page's batch may hold 10,000)
            for aci in item.acis:
                super().item_scraped(aci, spider)
        else:
            super().item_scraped(item, spider)

    def _takes_acis(self) -> bool:
        """Some feed may write ACIs: one without ``item_classes``, one that names ``Aci``, or one
        with a filter of its own (it may look into any ACI: each is made and asked)."""
        return any(type(slot.filter) is not ItemFilter or not slot.filter.item_classes
                   or issubclass(Aci, slot.filter.item_classes) for slot in self.slots)


class SharedListsMixin:
    """JSON exporters that encode a shared list (:class:`~webrace.rounds.groups.Members`: the
    owners and URD ids of every page the same groups reached, 10,000 names for 10,000 owners)
    once, not once a page: the rest of the item is encoded by Scrapy's encoder and the list's
    JSON, kept from the first page that held it, is put after it. Same JSON, field order aside."""

    SHARED_KEPT = 64

    def _encode(self, itemdict: dict) -> list[bytes]:
        """The item's JSON as pieces, written one after the other: a shared list's JSON is
        kept as bytes and written as it is (250 KB a line at 10,000 owners, never copied)."""
        shared = [(k, itemdict.pop(k)) for k, v in list(itemdict.items()) if type(v) is Members]
        text = self.encoder.encode(itemdict)
        if not shared:
            return [to_bytes(text, self.encoding)]
        memo = self.__dict__.setdefault("_shared_json", {})
        parts = [to_bytes(text[:-1] + (", " if itemdict else ""), self.encoding)]
        for n, (key, value) in enumerate(shared):
            kept = memo.get(id(value))
            if kept is None or kept[0] is not value:
                if len(memo) >= self.SHARED_KEPT:
                    memo.clear()
                # holds the list: its id stays its
                kept = memo[id(value)] = (value, to_bytes(self.encoder.encode(list(value)), self.encoding))
            parts += [to_bytes(f"{', ' if n else ''}{self.encoder.encode(key)}: ", self.encoding), kept[1]]
        parts.append(b"}")
        return parts


class JsonLinesItemExporter(SharedListsMixin, ScrapyJsonLinesItemExporter):
    """Scrapy's JSON lines exporter, shared lists encoded once (``FEED_EXPORTERS``)."""

    def export_item(self, item: Any) -> None:
        self.file.writelines([*self._encode(dict(self.get_serialized_fields(item))), b"\n"])


class JsonItemExporter(SharedListsMixin, ScrapyJsonItemExporter):
    """Scrapy's JSON exporter, shared lists encoded once (``FEED_EXPORTERS``)."""

    def export_item(self, item: Any) -> None:
        parts = self._encode(dict(self.get_serialized_fields(item)))
        self._add_comma_after_first()
        self.file.writelines(parts)


class CsvItemExporter(ScrapyCsvItemExporter):
    """Scrapy's CSV exporter, one item type per file, lists and dicts as JSON."""

    def __init__(self, file: Any, **kwargs: Any) -> None:
        super().__init__(file, **kwargs)
        self.own_columns = not self.fields_to_export  # else FEED_EXPORT_FIELDS chose them
        self.item_type: type | None = None
        self.left_out: Counter[str] = Counter()

    def export_item(self, item: Any) -> None:
        kind = type(item)
        if self.item_type is None:
            self.item_type = kind
        elif kind is not self.item_type and self.own_columns:
            if not self.left_out[kind.__name__]:
                logger.warning("CSV feed of %s items: %s items are not written into its columns; give them a "
                               "feed of their own (FEEDS item_classes, as -O FILE.csv does) or use jsonlines",
                               self.item_type.__name__, kind.__name__)
            self.left_out[kind.__name__] += 1
            return
        super().export_item(item)

    def serialize_field(self, field: Any, name: str, value: Any) -> Any:
        if isinstance(value, (list, tuple, dict)) and "serializer" not in field:
            return json.dumps(value, ensure_ascii=False)
        return super().serialize_field(field, name, value)

    def finish_exporting(self) -> None:
        if self.left_out:
            logger.warning("CSV feed of %s items: left out %s", self.item_type.__name__,
                           ", ".join(f"{n} {kind}" for kind, n in sorted(self.left_out.items())))
        super().finish_exporting()


def split_csv_feeds(feeds: dict[str, dict[str, Any]], spider: str) -> dict[str, dict[str, Any]]:
    """``feeds`` with every CSV feed that takes any item (no ``item_classes``, not stdout)
    made one feed per item type of ``spider``: ``pages.csv`` keeps the first type and
    ``pages.acis.csv``, ``pages.results.csv``... get the others, when there are any."""
    types = ITEM_TYPES.get(spider)
    split: dict[str, dict[str, Any]] = {}
    for uri, options in feeds.items():
        if not types or options.get("format") != "csv" or options.get("item_classes") or uri.startswith("stdout:"):
            split[uri] = options
            continue
        stem = uri[:-4] if uri.lower().endswith(".csv") else uri
        for key, item_class in types.items():
            if key:
                split[f"{stem}.{key}.csv"] = {**options, "item_classes": [item_class], "store_empty": False}
            else:
                split[uri] = {**options, "item_classes": [item_class]}
    return split
