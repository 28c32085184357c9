"""XPath over a packed document, without unpacking it.

The subset: absolute (``/a/b``) or descendant (``//b``, ``/a//b``) location paths of child
steps with name tests (``name``, ``prefix:name`` with the document's prefixes, ``*``),
predicates ``[n]`` (position among the step's matches for each context node),
``[@attr]`` and ``[@attr="value"]``, ending optionally in ``text()`` or ``@attr``. Results
are the same nodes, in document order, as lxml's for the same expression. Anything else is
refused with a message naming what is not supported.

Only the containers a query needs are decompressed: structure and tags always; attributes
for ``@``; content for ``text()``.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

from webrace.xpack.operators import TEXT, XPackError

_STEP = re.compile(r"""
    (?P<test>\*|[A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?|text\(\)|@[A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?)
    (?P<preds>(?:\[[^\]]*\])*)$""", re.VERBOSE)
_PRED = re.compile(r"""\[\s*(?:(?P<pos>\d+)|@(?P<attr>[A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?)
    (?:\s*=\s*(?P<q>["'])(?P<value>.*?)(?P=q))?)\s*\]""", re.VERBOSE)


class UnsupportedQuery(XPackError):
    """An XPath expression outside the subset XPack answers."""


@dataclass(frozen=True)
class Step:
    descendant: bool  # reached by // (descendant-or-self::node()/child::)
    kind: str  # "element", "text", "attribute"
    name: str | None  # element or attribute name (Clark notation); None for * and text()
    predicates: tuple[tuple[str, Any, Any], ...] = ()  # ("pos", n, None) | ("attr", name, value or None)


def compile_query(expression: str, namespaces: dict[str, str]) -> list[Step]:
    expr = expression.strip()
    if not expr.startswith("/"):
        raise UnsupportedQuery(f"{expression!r}: only absolute paths (starting with / or //) are supported")
    steps: list[Step] = []
    pos = 0
    while pos < len(expr):
        descendant = expr.startswith("//", pos)
        pos += 2 if descendant else 1
        end = _next_slash(expr, pos)
        raw = expr[pos:end]
        pos = end
        if not raw:
            raise UnsupportedQuery(f"{expression!r}: empty step")
        match = _STEP.match(raw)
        if not match:
            raise UnsupportedQuery(f"{expression!r}: step {raw!r} is not supported (name tests, *, text(), @attr, "
                                   "[n], [@a], [@a='v'])")
        test = match.group("test")
        predicates = []
        for text in re.findall(r"\[[^\]]*\]", match.group("preds")):
            found = _PRED.fullmatch(text)
            if not found:
                raise UnsupportedQuery(f"{expression!r}: predicate {text} is not supported")
            if found.group("pos"):
                if int(found.group("pos")) < 1:
                    raise UnsupportedQuery(f"{expression!r}: positions start at 1")
                predicates.append(("pos", int(found.group("pos")), None))
            else:
                predicates.append(("attr", _qualify(found.group("attr"), namespaces, expression, attribute=True),
                                   found.group("value")))
        if test == "text()":
            kind, name = "text", None
        elif test.startswith("@"):
            kind, name = "attribute", _qualify(test[1:], namespaces, expression, attribute=True)
        else:
            kind, name = "element", None if test == "*" else _qualify(test, namespaces, expression)
        if kind != "element" and predicates:
            raise UnsupportedQuery(f"{expression!r}: predicates on {test} are not supported")
        if steps and steps[-1].kind != "element":
            raise UnsupportedQuery(f"{expression!r}: {test} must be the last step")
        steps.append(Step(descendant, kind, name, tuple(predicates)))
    return steps


def _next_slash(expr: str, pos: int) -> int:
    depth, quote = 0, None
    for i in range(pos, len(expr)):
        ch = expr[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "/" and depth == 0:
            return i
    return len(expr)


def _qualify(name: str, namespaces: dict[str, str], expression: str, attribute: bool = False) -> str:
    if ":" not in name:
        return name  # no prefix: no namespace (XPath 1.0), for elements and attributes alike
    prefix, local = name.split(":", 1)
    uri = namespaces.get(prefix)
    if uri is None:
        raise UnsupportedQuery(f"{expression!r}: prefix {prefix!r} is not declared in the document")
    return f"{{{uri}}}{local}"


class Evaluator:
    """Runs compiled queries over a :class:`~webrace.xpack.format.PackedDocument`."""

    def __init__(self, doc: Any) -> None:
        from webrace.xpack.format import _read_array, _read_strings

        self.doc = doc
        structure, _ = _read_array(doc.container("structure"))
        tag_ids, _ = _read_array(doc.container("tags"))
        names = _read_strings(doc.container("names"))
        if len(structure) != doc.nodes or len(tag_ids) != doc.nodes or (tag_ids and max(tag_ids) >= len(names)):
            raise XPackError("corrupt XPack file (structure)")
        self.names = names
        self.tags = tag_ids
        self.children: list[list[int]] = [[] for _ in range(doc.nodes)]
        open_nodes: list[list[int]] = []
        for i, count in enumerate(structure):
            if open_nodes:
                parent = open_nodes[-1]
                self.children[parent[0]].append(i)
                parent[1] -= 1
                if parent[1] == 0:
                    open_nodes.pop()
            if count:
                open_nodes.append([i, count])
        self._attributes: dict[int, list[tuple[str, str]]] | None = None
        self._contents: dict[int, str] | None = None

    def namespaces(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for line in self.doc.container("namespaces").decode("utf-8", "surrogatepass").split("\n"):
            if line:
                _, prefix, uri = line.split("\t", 2)
                if prefix:
                    found.setdefault(prefix, uri)
        return found

    def attributes(self) -> dict[int, list[tuple[str, str]]]:
        if self._attributes is None:
            self._attributes = self.doc.to_packed_attributes()
        return self._attributes

    def contents(self) -> dict[int, str]:
        if self._contents is None:
            self._contents = self.doc.to_packed_contents(self.names, self.tags)
        return self._contents

    def is_element(self, i: int) -> bool:
        return not self.names[self.tags[i]].startswith("#")

    def run(self, expression: str, namespaces: dict[str, str] | None = None) -> list[tuple[str, Any]]:
        """Results in document order: ("element", node), ("text", string) or ("attribute", string)."""
        steps = compile_query(expression, {**self.namespaces(), **(namespaces or {})})
        context = [0]
        for step in steps:
            if step.kind == "element":
                context = self._elements(context, step)
            elif step.kind == "text":
                nodes = self._candidates(context, step.descendant)
                contents = self.contents()
                text_label = self.names.index(TEXT) if TEXT in self.names else -1
                return [("text", contents.get(i, "")) for i in nodes if self.tags[i] == text_label]
            else:
                attributes = self.attributes()
                nodes = [i for i in (self._descendants_or_self(context) if step.descendant else context)]
                return [("attribute", value) for i in sorted(set(nodes))
                        for key, value in attributes.get(i, []) if key == step.name]
        return [("element", i) for i in context]

    def _candidates(self, context: list[int], descendant: bool) -> list[int]:
        parents = self._descendants_or_self(context) if descendant else context
        return sorted({c for p in parents for c in self.children[p]})

    def _descendants_or_self(self, context: list[int]) -> list[int]:
        seen: set[int] = set()
        stack = list(context)
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            stack.extend(self.children[node])
        return sorted(seen)

    def _elements(self, context: list[int], step: Step) -> list[int]:
        parents = self._descendants_or_self(context) if step.descendant else context
        found: set[int] = set()
        for parent in parents:
            matches = [c for c in self.children[parent] if self.is_element(c)
                       and (step.name is None or self.names[self.tags[c]] == step.name)]
            for kind, key, value in step.predicates:
                if kind == "pos":
                    matches = matches[key - 1:key] if key <= len(matches) else []
                else:
                    attributes = self.attributes()
                    matches = [m for m in matches if any(k == key and (value is None or v == value)
                                                         for k, v in attributes.get(m, []))]
            found.update(matches)
        return sorted(found)


def count_nodes(data: bytes) -> int:
    """The node count, from the header alone."""
    from webrace.xpack.format import _HEAD, MAGIC

    if len(data) < _HEAD.size:
        raise XPackError("not an XPack file (too short)")
    magic, nodes, _ = struct.unpack_from("<4sIB", data)
    if magic != MAGIC:
        raise XPackError("not an XPack file (bad magic)")
    return nodes
