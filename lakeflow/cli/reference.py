"""``docs/cli.md`` written from the ``lakeflow`` parser (:func:`lakeflow.cli.main.build_parser`): every
command, its usage and its options with their defaults, so the reference cannot drift from the code
(tests/integration/test_cli.py checks). ``python -m lakeflow.cli.reference > docs/cli.md``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

from lakeflow.cli.main import build_parser

WIDTH = 100  # usage lines are wrapped at this width, whatever the terminal
HEADER = """\
# `lakeflow` command reference

Generated from the command's own parsers by `python -m lakeflow.cli.reference > docs/cli.md`
(tests/integration/test_cli.py fails when this file is stale): edit the `help=` texts in the code, not this
file. Every command also answers `--help`. Settings (environment variables, `.env.local`) are
documented in `.env.example`; an option's default that names a variable is read when the command
runs, never while its arguments are parsed.
"""


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """``(path, help, parser)`` of every listed command below ``parser``, depth first in definition order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if name not in helps:  # an internal command (no help=): in neither lakeflow --help nor here
                    continue
                yield (*path, name), helps.get(name, ""), sub
                yield from commands(sub, (*path, name))


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def cell(text: str) -> str:
    """``text`` as one markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def expanded_help(action: argparse.Action, prog: str) -> str:
    """The action's help with argparse's ``%(default)s``-style fields filled in."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    if action.choices is not None:
        params["choices"] = ", ".join(str(c) for c in action.choices)
    return action.help % params


def option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        choices = "{" + ",".join(str(c) for c in action.choices) + "}" if action.choices is not None else None
        metavar = " ".join(action.metavar) if isinstance(action.metavar, tuple) else action.metavar
        value = metavar or choices
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += f" {value or action.dest.upper()}"
        else:
            name = value or action.dest
        default = action.default
        shown = "" if default is None or default is False or default is argparse.SUPPRESS else f"`{default}`"
        rows.append(f"| `{cell(name)}` | {shown} | {cell(expanded_help(action, parser.prog))} |")
    return rows


def render() -> str:
    root = build_parser()
    lines = [HEADER]
    for path, summary, parser in [((), root.description or "", root), *commands(root)]:
        name = " ".join(["lakeflow", *path])
        lines += [f"{'#' * min(2 + len(path), 4)} `{name}`", ""]
        text = parser.description or summary
        if text:
            lines += [" ".join(text.split()), ""]
        lines += ["```text", usage(parser), "```", ""]
        rows = option_rows(parser)
        if rows:
            lines += ["| option | default | what it does |", "|---|---|---|", *rows, ""]
    return "\n".join(lines)


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
