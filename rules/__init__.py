"""Scout-style rules (seed 001): per-document processors users write and name in a template.

    from rules import Rule

    class Emails(Rule):
        def process_doc(self, doc):
            yield from doc.selector.css("a[href^='mailto:']::attr(href)").getall()

See :mod:`rules.base` for the contract, :mod:`webrace.scout` for templates, the results
table and how the crawl runs rules.
"""

from rules.base import Doc, ResultsView, Rule, RuleConfigError, Tag
from rules.bfs import BreadthFirstSearch
from rules.regexp import RegExpRule

__all__ = ["BreadthFirstSearch", "Doc", "RegExpRule", "ResultsView", "Rule", "RuleConfigError", "Tag"]
