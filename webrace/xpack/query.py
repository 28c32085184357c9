"""XPath over a packed document, without unpacking it.

The subset: absolute (``/a/b``) or descendant (``//b``, ``/a//b``) location paths of child
steps with name tests (``name``, ``prefix:name`` with the document's prefixes, ``*``),
predicates ``[n]`` (position among the step's matches for each context node),
``[@attr]`` and ``[@attr="value"]``, ending optionally in ``text()`` or ``@attr``. Results
are the same nodes, in document order, as lxml's for the same expression. Anything else is
refused with a message naming what is not supported.

Only the blocks a query needs are decompressed: the structural block always (depths,
labels, attribute-name sets); attribute values for ``@``-tests with a value and ``@attr``
results; content for ``text()``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from webrace.xpack.operators import TEXT, WS, XPackError

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


@functools.lru_cache(maxsize=256)
def _compiled(expression: str, namespaces: tuple[tuple[str, str], ...]) -> tuple[list[Step], str | None]:
    """The steps, and whether the path is plain: element name tests (or ``*``) without
    predicates, all down the child axis ("children") or one ``//`` step ("descendants")."""
    steps = compile_query(expression, dict(namespaces))
    plain = None
    if all(step.kind == "element" and not step.predicates for step in steps):
        if not any(step.descendant for step in steps):
            plain = "children"
        elif len(steps) == 1:
            plain = "descendants"
    return steps, plain


class Evaluator:
    """Runs compiled queries over a :class:`~webrace.xpack.format.PackedDocument`, with
    array operations over the structure (node depths, parents, subtree ends) and labels."""

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self._named: dict[str | None, np.ndarray] = {}
        self._attrs: tuple[np.ndarray, np.ndarray] | None = None
        self._prefixes: dict[str, str] | None = None

    @property
    def tree(self) -> Any:
        return self.doc.tree()

    def namespaces(self) -> dict[str, str]:
        if self._prefixes is None:
            self._prefixes = {}
            for _, prefix, uri in self.doc.declared_namespaces():
                if prefix:
                    self._prefixes.setdefault(prefix, uri)
        return self._prefixes

    def run(self, expression: str, namespaces: dict[str, str] | None = None) -> list[tuple[str, Any]]:
        """Results in document order: ("element", node), ("text", string) or ("attribute", string)."""
        prefixes = {**self.namespaces(), **(namespaces or {})} if ":" in expression else {}
        steps, plain = _compiled(expression, tuple(sorted(prefixes.items())))
        if plain:
            return [("element", node) for node in self._plain(steps, plain == "descendants")]
        context = np.zeros(1, dtype=np.int64)
        for step in steps:
            if step.kind == "element":
                context = self._elements(context, step)
            elif step.kind == "text":
                texts = self._named_nodes(TEXT)
                found = texts[self._below(texts, context, step.descendant)]
                values, nodes, places = self.doc.content_values()
                at = np.searchsorted(nodes, found)
                return [("text", values[p]) for p in places[at].tolist()]
            else:
                owners, places = self._attribute(step.name)
                if step.descendant:
                    keep = self._below(owners, context, True, or_self=True)
                else:
                    keep = np.isin(owners, context)
                values, _ = self.doc.attribute_values()
                return [("attribute", values[p]) for p in places[keep].tolist()]
        return [("element", i) for i in context.tolist()]

    def _plain(self, steps: list[Step], descendants: bool) -> list[int]:
        """A plain path over the token stream (see :class:`~webrace.xpack.format.Skeleton`):
        ``//name`` is every opening of a label with that name; ``/a/b/c`` keeps, depth by
        depth, the openings whose parent (the last element opened one level up) was kept."""
        skeleton = self.doc.skeleton()
        if descendants:
            return skeleton.node_ids(skeleton.openings(steps[0].name))
        level = skeleton.level
        context = None
        for depth, step in enumerate(steps, 1):
            found = skeleton.openings(step.name)
            found = found[level[found] == depth + 1]
            if context is not None and len(found):
                # an element at this depth is a child of a kept one if it lies before that
                # one's close: the first token after it back at the kept one's depth
                shallower = (level < depth).nonzero()[0]
                ends = shallower[shallower.searchsorted(context)]
                owner = context.searchsorted(found) - 1
                found = found[(owner >= 0) & (found < ends[np.maximum(owner, 0)])]
            if not len(found):
                return []
            context = found
        return skeleton.node_ids(context)

    def _named_nodes(self, name: str | None) -> np.ndarray:
        """The nodes with an element name (None: every element; TEXT: every text node)."""
        found = self._named.get(name)
        if found is None:
            tree = self.tree
            if name is None:
                wanted = tree.label_is_element
            elif name == TEXT:
                wanted = tree.name_mask(TEXT, WS)[tree.label_name]
            else:
                wanted = tree.name_mask(name)[tree.label_name] & tree.label_is_element
            found = self._named[name] = np.flatnonzero(wanted[tree.labels])
        return found

    def _below(self, nodes: np.ndarray, context: np.ndarray, descendant: bool, or_self: bool = False) -> np.ndarray:
        """A mask over ``nodes`` (sorted): children of a context node, or (``descendant``)
        below one (or the context node itself with ``or_self``)."""
        if not descendant:
            if not len(nodes):
                return np.zeros(0, dtype=bool)
            if len(context) == 1 and context[0] == 0:
                return self.tree.depth[nodes] == 1
            parents = self.tree.parent_of(nodes)
            if len(context) == 1:
                return parents == context[0]
            return np.isin(parents, context)
        if len(context) == 1 and context[0] == 0:
            return np.ones(len(nodes), dtype=bool) if or_self else nodes > 0
        end = self.tree.end
        ends = end[context]
        outer = context[ends > np.concatenate(([-1], np.maximum.accumulate(ends)[:-1]))]  # drop nested ones
        k = np.searchsorted(outer, nodes, side="right") - 1
        inside = (k >= 0) & (nodes < end[outer[np.maximum(k, 0)]])
        return inside if or_self else inside & (nodes != outer[np.maximum(k, 0)])

    def _attribute(self, name: str | None, places: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """The elements carrying attribute ``name``, in document order, and (``places``)
        where their values sit in the attribute value list (that reads the values)."""
        if self._attrs is None:
            self._attrs = self.tree.attribute_pairs()
        owners, attrs = self._attrs
        ids = [i for i, n in enumerate(self.tree.attrnames) if n == name]
        mask = attrs == ids[0] if ids else np.zeros(len(attrs), dtype=bool)
        return owners[mask], self.doc.attribute_values()[1][mask] if places else None

    def _elements(self, context: np.ndarray, step: Step) -> np.ndarray:
        found = self._named_nodes(step.name)
        found = found[self._below(found, context, step.descendant)]
        for kind, key, value in step.predicates:
            if not len(found):
                break
            if kind == "pos":
                parents = self.tree.parent_of(found)
                order = np.argsort(parents, kind="stable")
                grouped = parents[order]
                starts = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1])))
                rank = np.arange(len(found)) - np.repeat(starts, np.diff(np.append(starts, len(found))))
                found = np.sort(found[order[rank == key - 1]])
            else:
                owners, places = self._attribute(key, places=value is not None)
                if places is not None:
                    values, _ = self.doc.attribute_values()
                    owners = owners[np.fromiter((values[p] == value for p in places.tolist()), dtype=bool,
                                                count=len(places))]
                found = found[np.isin(found, owners)]
        return found


def namespace_hint(expression: str, declared: list[tuple[int, str, str]], namespaces: dict[str, str]) -> str | None:
    """Why a query may have matched nothing: it names elements without a prefix (in XPath
    1.0, no namespace) in a document whose elements are in a default namespace. One line
    naming that namespace and the ``--ns`` binding a prefix to it; None when that is not it.
    ``declared`` is the document's (node, prefix, URI) declarations, root first."""
    defaults = [uri for _, prefix, uri in declared if not prefix and uri]
    if not defaults:
        return None
    prefixes = {prefix: uri for _, prefix, uri in declared if prefix}
    try:
        steps = compile_query(expression, {**prefixes, **namespaces})
    except XPackError:
        return None
    bare = [s.name for s in steps if s.kind == "element" and s.name and not s.name.startswith("{")]
    if not bare:
        return None
    prefix = next(p for p in ("d", "d1", "d2", "d3", "dflt") if p not in prefixes and p not in namespaces)
    more = f" (and {len(set(defaults)) - 1} other default namespace(s))" if len(set(defaults)) > 1 else ""
    return (f"nothing matched: {bare[0]} without a prefix means no namespace in XPath, but the document's elements "
            f"are in the default namespace {defaults[0]}{more}: bind a prefix with --ns {prefix}={defaults[0]} and "
            f"write {prefix}:{bare[0]}")
