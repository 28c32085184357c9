"""Scout's JavaDoc application (seed 001): rules that read the HTML the JDK's ``javadoc``
writes and describe the packages, classes and interfaces in it, and a member index that
answers "which classes have a member named X", inherited members included.

- :class:`PackageListRule`: the ``element-list`` (``package-list`` before JDK 10) file ->
  enqueues each package's ``package-summary.html``; records nothing.
- :class:`PackageIndexRule`: a package summary -> ``{"package", "interfaces", "classes",
  ...}`` and enqueues every type's page.
- :class:`ClassDocRule`: a type's page -> the seed's vector of JavaDoc objects: first the
  type (``kind``, qualified ``name``, ``superclass``, ``interfaces``, ``description``), then
  its *declared* fields and methods (methods with their parameter types). What a type
  inherits is not taken from the page: the index computes it.
- :class:`MemberIndexRule`: reads every ClassDocRule result when the crawl (or offline run)
  closes and records, for the session, one ``{"member", "classes"}`` per member name, where a
  class has a member if it declares it or inherits it from a superclass or interface that is
  documented (the seed's BuildMethodIndex).

Query it (the seed's QueryMethodIndex)::

    python -m rules.javadoc contains MAX_VALUE      # in the project directory

The pages are read as an HTML corpus: the ``title`` attributes javadoc puts on type links
("class in java.util", "interface in java.lang") and the member-summary tables.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from urllib.parse import urljoin

from parsel import Selector

from rules.base import Doc, Rule

_TYPE_TITLE = re.compile(r"^(class|interface|enum|annotation|record|exception|error|enum class|record class)"
                         r"(?: or interface)? in (\S+)$")
_KINDS = ("Class", "Interface", "Enum", "Annotation Interface", "Annotation Type", "Record", "Enum Class",
          "Record Class")


def _qualified_name(title: str, text: str) -> str | None:
    """``pkg.Name`` of a javadoc type link, from its title ("class in pkg") and text."""
    found = _TYPE_TITLE.match(title or "")
    name = (text or "").strip().split("<", 1)[0]
    return f"{found.group(2)}.{name}" if found and name else None


def _last_word(text: str | None, default: str | None) -> str | None:
    """The clause keyword a run of text ends with ("extends", "implements"), else ``default``."""
    words = [w for w in (text or "").replace(",", " ").split() if w in ("extends", "implements")]
    return words[-1] if words else default


class PackageListRule(Rule):
    def process_doc(self, doc: Doc) -> None:
        if not doc.url.endswith(("/element-list", "/package-list")):
            return
        for line in doc.unicode_body.splitlines():
            package = line.strip()
            if package and not package.startswith("module:"):
                self.enqueue(urljoin(doc.url, package.replace(".", "/") + "/package-summary.html"))


class PackageIndexRule(Rule):
    def process_doc(self, doc: Doc) -> dict | None:
        if not doc.url.endswith("/package-summary.html"):
            return None
        title = doc.selector.css("h1::attr(title)").get("") or doc.selector.css("h1::text").get("")
        package = title.removeprefix("Package").strip()
        members: dict[str, list[str]] = {}
        for link in doc.selector.xpath("//main//a[@title] | //body//a[@title]"):
            found = _TYPE_TITLE.match(link.attrib["title"])
            if not found or found.group(2) != package:
                continue
            kind = found.group(1).split()[0]
            group = "interfaces" if kind == "interface" else "classes" if kind == "class" else f"{kind}s"
            name = f"{package}.{link.xpath('string()').get('').strip()}"
            if name not in members.setdefault(group, []):
                members[group].append(name)
                self.enqueue(urljoin(doc.url, link.attrib["href"]))
        return {"package": package, **{k: sorted(v) for k, v in sorted(members.items())}}


class ClassDocRule(Rule):
    def process_doc(self, doc: Doc) -> list[dict] | None:
        sel = doc.selector
        title = (sel.css("h1::attr(title)").get() or sel.css("h1::text").get() or "").strip()
        kind = next((k for k in _KINDS if title.startswith(k + " ")), None)
        if kind is None:
            return None
        simple = title[len(kind):].strip().split("<", 1)[0]
        package = (sel.css(".sub-title a::text").get() or sel.css(".header .sub-title::text").get() or "").strip()
        name = f"{package}.{simple}" if package else simple
        superclass, interfaces = None, []
        span = sel.css(".type-signature .extends-implements")
        if span:  # "extends A implements B, C" (an interface: "extends B, C")
            root = span[0].root
            clause = _last_word(root.text, None)
            for child in root:
                if getattr(child, "tag", None) == "a":
                    qualified = _qualified_name(child.get("title", ""), child.text_content())
                    if qualified and clause == "extends" and kind == "Class":
                        superclass = qualified
                    elif qualified:
                        interfaces.append(qualified)
                clause = _last_word(child.tail, clause)
        described = {"kind": kind.lower(), "name": name, "url": doc.url, "superclass": superclass,
                     "interfaces": interfaces,
                     "description": " ".join(" ".join(sel.css(".class-description > .block ::text").getall()).split())}
        return [described, *self._members(sel, "field"), *self._members(sel, "method")]

    def _members(self, sel: Selector, kind: str) -> Iterator[dict]:
        seen = set()
        for link in sel.css(f"section.{kind}-summary .summary-table a.member-name-link, "
                            f"section.{kind}-summary table span.memberNameLink a"):
            member = link.xpath("string()").get("").strip()
            signature = " ".join(link.xpath("ancestor::code[1]").xpath("string()").get("").split())
            params = []
            if kind == "method" and "(" in signature:
                inside = signature.split("(", 1)[1].rsplit(")", 1)[0]
                params = [p.strip().rsplit(" ", 1)[0].replace("\xa0", " ").split()[0] for p in inside.split(",")
                          if p.strip()]
            key = (member, tuple(params))
            if key not in seen:
                seen.add(key)
                yield {"kind": kind, "name": member, "params": params} if kind == "method" else \
                    {"kind": kind, "name": member}


class MemberIndexRule(Rule):
    """Builds the member index when the session closes, from ``classdoc``'s results."""

    def configure(self, classdoc: str = "ClassDoc") -> None:
        self.classdoc = classdoc

    def close(self) -> list[dict]:
        types: dict[str, dict] = {}
        for _url, _seq, vector in self.results.of(self.classdoc):
            if vector and isinstance(vector[0], dict) and "superclass" in vector[0]:
                head = vector[0]
                types[head["name"]] = {**head, "members": {m["name"] for m in vector[1:]}}
        return [{"member": m, "classes": c} for m, c in sorted(build_index(types).items())]


def build_index(types: dict[str, dict]) -> dict[str, list[str]]:
    """Member name -> every documented type that declares or inherits it."""
    memo: dict[str, set[str]] = {}

    def all_members(name: str, path: tuple[str, ...] = ()) -> set[str]:
        if name in memo:
            return memo[name]
        info = types.get(name)
        if info is None or name in path:  # undocumented (java.lang.Object...) or a cycle
            return set()
        found = set(info["members"])
        for parent in [info.get("superclass"), *info.get("interfaces", [])]:
            if parent:
                found |= all_members(parent, (*path, name))
        memo[name] = found
        return found

    index: dict[str, set[str]] = {}
    for name in types:
        for member in all_members(name):
            index.setdefault(member, set()).add(name)
    return {member: sorted(classes) for member, classes in index.items()}


def members_named(store: object, name: str, rule: str = "MemberIndex") -> list[str] | None:
    """The types with a member ``name`` (None: not found), from the recorded index."""
    for entry in store.get(rule, "") or []:  # type: ignore[attr-defined]
        if entry.get("member") == name:
            return entry["classes"]
    return None


def main(argv: list[str] | None = None) -> int:
    """``python -m rules.javadoc NAME...``: the seed's QueryMethodIndex, non-interactive."""
    import argparse

    from scrapy.utils.project import get_project_settings

    from webrace.backends import open_results_store

    parser = argparse.ArgumentParser(prog="python -m rules.javadoc", description=main.__doc__)
    parser.add_argument("names", nargs="+", help="member names")
    parser.add_argument("--rule", default="MemberIndex", help="the MemberIndexRule's name in the template")
    args = parser.parse_args(argv)
    with open_results_store(get_project_settings()) as store:
        if store.get(args.rule, "") is None:
            print(f"error: no member index recorded by rule {args.rule!r}: run the crawl or "
                  "`scrapy rules run` with the JavaDoc template first", file=sys.stderr)
            return 1
        for name in args.names:
            classes = members_named(store, name, args.rule)
            print(f"Found {name} {classes}" if classes else f"Not Found {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
