"""The schemas reference, read from the XML Schemas themselves with xmlschema: every element
and attribute a document may hold, where it goes, its type and bounds, how often it occurs,
and its ``xs:annotation``; then the schema file itself."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import xmlschema
from xmlschema.validators import XsdAttribute, XsdElement, XsdGroup

from webrace.reference.markdown import code, fence, table, text


@dataclass(frozen=True)
class SchemaFile:
    title: str
    package: str  # where the file is shipped
    name: str  # its file name
    about: str  # what reads it, for the page's link text

    def source(self) -> str:
        return resources.files(self.package).joinpath(self.name).read_text(encoding="utf-8")

    def load(self) -> xmlschema.XMLSchema:
        with resources.as_file(resources.files(self.package).joinpath(self.name)) as path:
            return xmlschema.XMLSchema(str(path))


SCHEMAS = (
    SchemaFile("URD", "webrace.schemas", "urd.xsd", "`scrapy urd add`, the profile page and `POST .../urds`"),
    SchemaFile("SCD", "scd", "scd.xsd", "`scrapy crawl dynabot -a scd=FILE`"),
    SchemaFile("ACI", "webrace.schemas", "aci.xsd", "`scrapy aci list --format xml`"),
    SchemaFile("Meta-info", "webrace.schemas", "metainfo.xsd", "the object cache's record of one URL"),
    SchemaFile(
        "Rules template", "webrace.schemas", "template.xsd", "`scrapy rules run --template FILE`, `-a template=FILE`"
    ),
)


FACETS = (
    ("minInclusive", "at least"),
    ("minExclusive", "more than"),
    ("maxInclusive", "at most"),
    ("maxExclusive", "less than"),
    ("length", "length"),
    ("minLength", "length at least"),
    ("maxLength", "length at most"),
)


@dataclass(frozen=True)
class Entry:
    """One element or attribute of a document, at ``path`` (``urd/uri/@timing``)."""

    path: str
    kind: str  # "element" | "attribute"
    type: str
    occurs: str
    documentation: str


def documentation(component: Any) -> str:
    """The text of a component's ``xs:annotation`` (a reference's, else the declaration's it
    refers to, else its named type's), on one line."""
    for candidate in (component, getattr(component, "ref", None), getattr(component, "type", None)):
        annotation = getattr(candidate, "annotation", None)
        if annotation is not None and str(annotation).strip():
            return " ".join(str(annotation).split())
    return ""


def entries(schema: xmlschema.XMLSchema) -> list[Entry]:
    """Every element and attribute, from each global element down, in document order. An
    element that refers to a global one is listed where it is used, and its content once,
    under the global one."""
    found: list[Entry] = []
    for element in schema.elements.values():
        _walk(element, element.local_name, found, set())
    return found


def _walk(element: XsdElement, path: str, found: list[Entry], above: set[int], occurs: str = "1..1") -> None:
    found.append(Entry(path, "element", _content_type(element), occurs, documentation(element)))
    if element.ref is not None or id(element.type) in above:  # described where it is declared
        return
    kind = element.type
    for attribute in getattr(kind, "attributes", {}).values():
        if isinstance(attribute, XsdAttribute):
            found.append(
                Entry(
                    f"{path}/@{attribute.local_name}",
                    "attribute",
                    type_text(attribute.type),
                    _use(attribute),
                    documentation(attribute),
                )
            )
    if kind.is_complex() and kind.content is not None and not kind.has_simple_content():
        for child, low, high in _particles(kind.content, 1, 1):
            _walk(child, f"{path}/{child.local_name}", found, above | {id(kind)}, f"{low}..{high or 'unbounded'}")


def _particles(group: XsdGroup, low: int, high: int | None) -> Iterator[tuple[XsdElement, int, int | None]]:
    """The elements of a model group with how often each may occur in its parent: the
    occurrences of the groups around it multiplied in (an alternative of a choice may be absent)."""
    low = low * group.min_occurs * (0 if group.model == "choice" and len(group) > 1 else 1)
    high = None if high is None or group.max_occurs is None else high * group.max_occurs
    for item in group:
        if isinstance(item, XsdGroup):
            yield from _particles(item, low, high)
        elif isinstance(item, XsdElement):
            most = None if high is None or item.max_occurs is None else high * item.max_occurs
            yield item, low * item.min_occurs, most


def _use(attribute: XsdAttribute) -> str:
    if attribute.use == "required":
        return "required"
    return f"optional, default {attribute.default}" if attribute.default is not None else "optional"


def _content_type(element: XsdElement) -> str:
    kind = element.type
    if kind.is_simple():
        return type_text(kind)
    if kind.has_simple_content():
        return type_text(kind.content)
    return "elements" if kind.content is not None and list(kind.content.iter_elements()) else "empty"


def type_text(kind: Any) -> str:
    """A simple type in a few words: its name, its base, and its facets (enumeration, pattern, bounds)."""
    name = (kind.prefixed_name or kind.local_name) if kind.name else ""
    if name.startswith("xs:"):
        return name
    if getattr(kind, "item_type", None) is not None:
        said = f"list of {type_text(kind.item_type)}"
    elif getattr(kind, "member_types", None):
        said = " or ".join(_grouped(type_text(m)) for m in kind.member_types)
    else:
        base = getattr(kind, "base_type", None) or getattr(kind, "primitive_type", None)
        parts = [type_text(base) if base is not None else ""]
        if kind.enumeration:
            parts.append("one of " + ", ".join(map(str, kind.enumeration)))
        facets = {str(key).rsplit("}", 1)[-1]: facet for key, facet in kind.facets.items()}
        if facets.get("pattern") is not None:  # its own, not its base type's (xs:NCName's)
            parts.append("matching " + " or ".join(f"`{regex}`" for regex in facets["pattern"].regexps))
        facets = {key: getattr(facet, "value", None) for key, facet in facets.items()}
        for facet, word in FACETS:
            value = facets.get(facet)
            if value is not None and not (facet == "minInclusive" and _implied_minimum(kind, value)):
                parts.append(f"{word} {value}")
        said = ", ".join(p for p in parts if p)
    return f"{name} ({said})" if name and said else name or said


def _grouped(said: str) -> str:
    return f"({said})" if "," in said else said


def _implied_minimum(kind: Any, value: Any) -> bool:
    """0 for a nonNegativeInteger, 1 for a positiveInteger: its base type says it already."""
    base = getattr(kind.base_type, "local_name", "")
    return (base, value) in (("nonNegativeInteger", 0), ("positiveInteger", 1))


def undocumented(schema: xmlschema.XMLSchema) -> list[str]:
    """Paths of the elements and attributes without an ``xs:annotation``."""
    return [e.path for e in entries(schema) if not e.documentation]


def schemas_page() -> str:
    out = [
        "# Schemas",
        "",
        "The XML formats WebRACE reads and writes, read from their XML Schemas (validated with xmlschema on the "
        "way in: a file that does not conform is refused with the validator's message, file and line) when these "
        "pages are built. Each element and attribute is listed where it goes, with its type, how often it may "
        "occur and what it means; then the schema file itself.",
        "",
    ]
    out += [f"- [{item.title}](#{item.name.replace('.', '')}): {text(item.about)}" for item in SCHEMAS]
    out.append("")
    for item in SCHEMAS:
        out += _schema(item)
    return "\n".join(out)


def _schema(item: SchemaFile) -> list[str]:
    schema = item.load()
    about = " ".join(" ".join(str(a).split()) for a in schema.annotations)
    out = [f"## {item.title}: {item.name} {{#{item.name.replace('.', '')}}}", ""]
    if about:
        out += [text(about), ""]
    out += [f"Read by {text(item.about)}. The file: [{item.name}](schemas/{item.name}).", ""]
    rows = [[code(e.path), text(e.type), e.occurs, text(e.documentation)] for e in entries(schema)]
    out += [table(["Element or attribute", "Type", "Occurs", "Meaning"], rows), ""]
    out += [f'??? note "{item.name}"', "", _indented(fence(item.source(), "xml")), ""]
    return out


def _indented(block: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in block.splitlines())


def schema_files() -> dict[str, str]:
    """File name -> text of every schema, for the documentation to serve beside the page."""
    return {item.name: item.source() for item in SCHEMAS}
