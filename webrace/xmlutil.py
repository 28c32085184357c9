"""Safe XML parsing: lxml with entity resolution, DTD loading and network access off."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

import xmlschema
from lxml import etree


def safe_parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=False,
    )


@cache
def schema(name: str) -> xmlschema.XMLSchema:
    """The XSD shipped in ``webrace/schemas/`` (``urd``, ``aci``, ``metainfo``...), read as
    a package resource so that it is found inside a zipped egg too (scrapyd)."""
    return xmlschema.XMLSchema(files("webrace.schemas").joinpath(f"{name}.xsd").read_text(encoding="utf-8"))
