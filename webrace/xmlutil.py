"""Safe XML parsing: lxml with entity resolution, DTD loading and network access off."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import xmlschema
from lxml import etree

SCHEMA_DIR = Path(__file__).parent / "schemas"


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
    """The XSD shipped in ``webrace/schemas/`` (``urd``, ``aci``, ``metainfo``...)."""
    return xmlschema.XMLSchema(str(SCHEMA_DIR / f"{name}.xsd"))
