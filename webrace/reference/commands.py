"""The commands reference, made from the commands themselves: every ``scrapy`` command of
``webrace.commands`` (Scrapy's ``COMMANDS_MODULE``; the same classes are the
``scrapy.commands`` entry points), its syntax, descriptions, options and exit statuses, read
from the argparse parser built as ``scrapy`` builds it (``cmd.add_options(parser)``)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass
from typing import Any

from scrapy.cmdline import ScrapyArgumentParser
from scrapy.commands import ScrapyCommand
from scrapy.settings import Settings
from scrapy.spiderloader import SpiderLoader

from webrace import commands as webrace_commands
from webrace.reference.markdown import code, fence, table, text

GLOBAL = "Global Options"  # the argument group ScrapyCommand.add_options puts Scrapy's own options in
_STATUS = re.compile(r"(\d+)(?: also)?:?\s+(.*)", re.DOTALL)


@dataclass
class Option:
    flags: str  # "-o, --output OUT.jsonl"
    help: str
    default: Any
    choices: tuple[str, ...]

    @property
    def names(self) -> list[str]:
        return [f.split()[0] for f in self.flags.split(", ")]


@dataclass
class CommandDoc:
    name: str
    short: str
    long: str  # without the exit statuses the decorator appends
    forms: list[str]  # one usage line per subcommand (or form)
    options: list[Option]
    statuses: list[tuple[str, str]]  # (status, meaning), the command's own then those every command shares
    needs_project: bool
    command: ScrapyCommand

    @property
    def subcommands(self) -> list[str]:
        return [form.split()[0] for form in self.forms if form and form[0].isalpha()]


def webrace_settings() -> Settings:
    """WebRACE's settings, as a project directory gives them to a command."""
    settings = Settings()
    settings.setmodule("webrace.settings", priority="project")
    return settings


def command_classes() -> dict[str, type[ScrapyCommand]]:
    """Name -> class of every command ``webrace.commands`` defines, named after its module
    as Scrapy names them."""
    found = {}
    for info in pkgutil.iter_modules(webrace_commands.__path__, webrace_commands.__name__ + "."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, ScrapyCommand) and obj.__module__ == module.__name__:
                found[info.name.rsplit(".", 1)[1]] = obj
    return dict(sorted(found.items()))


def parser_of(name: str, command: ScrapyCommand) -> argparse.ArgumentParser:
    """The parser ``scrapy NAME`` parses its command line with (scrapy.cmdline.execute)."""
    parser = ScrapyArgumentParser(
        usage=f"scrapy {name} {command.syntax()}", conflict_handler="resolve", description=command.long_desc()
    )
    settings = webrace_settings()
    settings.setdict(command.default_settings, priority="command")
    command.settings = settings
    command.add_options(parser)
    return parser


def options_of(parser: argparse.ArgumentParser, global_options: bool = False) -> list[Option]:
    """The options of ``parser``: its own, or (``global_options``) those Scrapy gives every command."""
    found = []
    for group in parser._action_groups:  # argparse's public API offers no other way to read them back
        if (group.title == GLOBAL) != global_options:
            continue
        for action in group._group_actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            found.append(
                Option(
                    _flags(action), _help(action, parser), action.default, tuple(str(c) for c in action.choices or ())
                )
            )
    return found


def _flags(action: argparse.Action) -> str:
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    args = {None: metavar, "?": f"[{metavar}]", "*": f"[{metavar} ...]", "+": f"{metavar} [{metavar} ...]"}
    return f"{names} {args.get(action.nargs, metavar)}"


def _help(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    words = action.help or ""
    if "%(" in words:  # as argparse expands it
        words = words % {**vars(action), "prog": parser.prog}
    return words


def split_forms(syntax: str) -> list[str]:
    """``add FILE... | list [--format table|jsonl] | due (--all | ID...)`` -> its forms: split
    at the ``|`` outside brackets and parentheses."""
    forms, depth, start = [], 0, 0
    for i, ch in enumerate(syntax):
        depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(ch, 0)
        if ch == "|" and depth == 0:
            forms.append(syntax[start:i].strip())
            start = i + 1
    forms.append(syntax[start:].strip())
    return [f for f in forms if f]


def split_statuses(said: str) -> list[tuple[str, str]]:
    """``0: done; 1: ...; 2 also: ...`` -> [(status, meaning)]: split at ``; `` before a status."""
    pairs: list[tuple[str, str]] = []
    for part in re.split(r";\s+(?=\d+\b)", said.strip().rstrip(".")):
        match = _STATUS.fullmatch(part.strip())
        if match:
            pairs.append((match.group(1), match.group(2)))
        elif pairs:  # a status's meaning holding "; " and a number
            pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]}; {part}")
    return pairs


def read_command(name: str, cls: type[ScrapyCommand]) -> CommandDoc:
    command = cls()
    parser = parser_of(name, command)
    long = getattr(cls.long_desc, "__wrapped__", cls.long_desc)(command)  # without the statuses appended
    statuses = split_statuses(getattr(cls, "exit_statuses", "")) + split_statuses(webrace_commands.COMMON_STATUSES)
    return CommandDoc(
        name,
        command.short_desc(),
        long,
        split_forms(command.syntax()),
        options_of(parser),
        statuses,
        bool(cls.requires_project),
        command,
    )


def read_commands() -> list[CommandDoc]:
    return [read_command(name, cls) for name, cls in command_classes().items()]


def global_options() -> list[Option]:
    """The options Scrapy gives every command (``ScrapyCommand.add_options``)."""
    command = next(iter(command_classes().values()))()
    return options_of(parser_of("COMMAND", command), global_options=True)


def spider_docs() -> dict[str, str]:
    """Name -> module docstring of every spider of the project (what ``scrapy crawl`` runs)."""
    loader = SpiderLoader.from_settings(webrace_settings())
    return {
        name: inspect.getdoc(importlib.import_module(loader.load(name).__module__)) or ""
        for name in sorted(loader.list())
    }


def commands_page(docs: list[CommandDoc] | None = None) -> str:
    docs = read_commands() if docs is None else docs
    out = [
        "# Commands",
        "",
        "Every `scrapy` command WebRACE adds, read from the commands themselves (`webrace/commands/`) when these "
        "pages are built: what `scrapy COMMAND -h` says, laid out. In a WebRACE project directory (where its "
        "`scrapy.cfg` is) every one runs; elsewhere Scrapy finds them through the `scrapy.commands` entry points, "
        "and those that need WebRACE's settings ask for `SCRAPY_SETTINGS_MODULE=webrace.settings`.",
        "",
        table(["Command", "What it does"], [[f"[`scrapy {d.name}`](#scrapy-{d.name})", text(d.short)] for d in docs]),
        "",
    ]
    for doc in docs:
        out += _command(doc)
    out += [
        "## Options of every command",
        "",
        "Scrapy's own options, which every command above takes too.",
        "",
        _options_table(global_options()),
        "",
    ]
    return "\n".join(out)


def _command(doc: CommandDoc) -> list[str]:
    out = [f"## scrapy {doc.name}", "", text(doc.short), ""]
    out += [fence("\n".join(f"scrapy {doc.name} {form}" for form in doc.forms), "text"), ""]
    where = (
        "Needs WebRACE's settings: run it in a project directory or with `SCRAPY_SETTINGS_MODULE=webrace.settings`."
        if doc.needs_project
        else "Runs anywhere: it needs no project."
    )
    out += [text(doc.long), "", where, ""]
    if doc.name == "crawl":
        out += _spiders()
    if doc.options:
        out += ["**Options**", "", _options_table(doc.options), ""]
    out += ["**Exit status**", "", table(["Status", "Meaning"], [[code(s), text(m)] for s, m in doc.statuses]), ""]
    return out


def _options_table(options: list[Option]) -> str:
    rows = []
    for option in options:
        said = option.help
        if option.choices and not option.flags.endswith("}") and not all(c in said for c in option.choices):
            said += f" (one of {', '.join(option.choices)})"
        if option.default not in (None, False, [], "", argparse.SUPPRESS) and "default" not in said:
            said += f" (default {option.default})"
        rows.append([code(option.flags), text(said) if said else ""])
    return table(["Option", "Meaning"], rows)


def _spiders() -> list[str]:
    """``scrapy crawl``'s spiders: each one's first paragraph and those about its ``-a`` arguments."""
    out = ["**Spiders**", ""]
    for name, doc in spider_docs().items():
        paragraphs = [p for p in re.split(r"\n\s*\n", doc) if p.strip()]
        said = [p for i, p in enumerate(paragraphs) if i == 0 or "-a " in p]
        out += [f"`{name}`: " + " ".join(text(p) for p in said), ""]
    return out
