"""The docs cannot drift from the code: every ``make`` target, ``lakeflow`` subcommand, flag (and
flag value of a fixed set), environment variable and repository file quoted in README.md,
ARCHITECTURE.md, docs/*.md and .env.example exists — checked against the Makefile's rules, the real
argparse parser (``lakeflow.cli.main.build_parser``), the settings models and the checkout; ARCHITECTURE.md's
module map names every top-level module and its import table is the code's.

Unit tests: they start no process. The real-process tests: tests/integration/test_docs.py."""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pytest

from lakeflow.cli.env_example import sections
from lakeflow.cli.main import build_parser
from lakeflow.settings.env import variables

ROOT = Path(__file__).resolve().parents[2]


ARCHITECTURE = ROOT / "ARCHITECTURE.md"


PACKAGE = ROOT / "lakeflow"


DOCS = [ROOT / "README.md", ARCHITECTURE, *sorted((ROOT / "docs").glob("*.md")), ROOT / ".env.example"]


MAKEFILE = ROOT / "Makefile"


# Variables the docs may name that are not lakeflow settings: other tools' own (with the tool),
# shell ones, and placeholders of examples.
EXTERNAL_VARIABLES = {
    "PWD", "PATH", "HOME", "VAR", "KEY",                    # shell; ${VAR} and KEY=VALUE placeholders
    "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CREDENTIAL_PROFILES_FILE", "AWS_CONFIG_FILE",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",  # the AWS SDKs
    "SPARK_HOME", "SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS",  # Spark
    "FLINK_CONF_DIR", "FLINK_LIB_DIR", "FLINK_OPT_DIR", "FLINK_PID_DIR", "JAVA_HOME",  # Flink's scripts
    "STACK_PG_PASSWORD", "STACK_PG_ENCRYPTION_KEY", "STACK_KEYCLOAK_ADMIN_PASSWORD",  # deploy/stack.env (compose)
    "LAKEFLOW_CLIENT_SECRET",                                           # an example's secret source
}


EXTERNAL_PREFIXES = ("LAKEKEEPER__", "KC_")  # Lakekeeper's and Keycloak's own settings (deploy/docker-compose.yml)


@dataclass(frozen=True)
class Quote:
    """A piece of code quoted in a doc: an inline code span or a line of a code block; or a line of
    prose (``.env.example``'s comments), where only ``make TARGET`` counts as a command."""

    doc: Path
    line: int
    text: str
    prose: bool = False

    def __str__(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}: {self.text.strip()}"


def quotes(doc: Path) -> Iterator[Quote]:
    fenced = False
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        if doc.suffix != ".md":
            yield Quote(doc, number, line.lstrip("# "), prose=True)
            for span in re.findall(r"`([^`]+)`", line):
                yield Quote(doc, number, span)
            continue
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            yield Quote(doc, number, line)
        else:
            for span in re.findall(r"`([^`]+)`", line):
                yield Quote(doc, number, span.replace("\\|", "|"))


ALL = [q for doc in DOCS for q in quotes(doc)]


def words(text: str) -> list[str]:
    """Shell words of ``text`` up to a comment (unbalanced quotes: plain whitespace split)."""
    text = text.split(" #")[0]
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


SEPARATORS = {"&&", "||", ";", "|", ">", ">>", "<", "2>", "&", "then", "else", "(", ")"}


def commands(name: str) -> Iterator[tuple[Quote, list[str]]]:
    """Each invocation of ``name`` (``make``, ``lakeflow`` or a path ending in ``/bin/lakeflow``) with
    its words up to a shell separator (in prose: ``make`` and its first word only)."""
    for q in ALL:
        if q.prose and name != "make":
            continue
        w = q.text.split() if q.prose else words(q.text)
        for i, word in enumerate(w):
            if word == name or (name == "lakeflow" and word.endswith("/bin/lakeflow")):
                rest = []
                for token in w[i + 1:i + 2] if q.prose else w[i + 1:]:
                    if token in SEPARATORS or token.startswith(("#", "$(", "`")):
                        break
                    rest.append(token)
                yield q, rest


def make_targets(args: list[str]) -> list[str]:
    """The targets among ``make``'s words: flags and VAR=value skipped; the first other word that
    is no target (a message's ``make stack: …``, prose) ends them, a target ending in ``:``/``,``/``)`` too."""
    targets = []
    for token in args:
        if token.startswith("-") or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
            continue
        bare = token.rstrip(":,;.)")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", bare):
            break
        targets.append(bare)
        if bare != token:
            break
    return targets


def make_rules() -> dict[str, str]:
    """Target → its rule line, from the Makefile's text (no includes, no pattern rules)."""
    rules = {}
    for line in MAKEFILE.read_text().splitlines():
        m = re.match(r"^([a-z0-9][a-z0-9 -]*):(?![=:])(.*)$", line)
        if m:
            for target in m.group(1).split():
                rules[target] = m.group(2)
    return rules


def phony() -> set[str]:
    text = MAKEFILE.read_text().replace("\\\n", " ")
    return {t for line in re.findall(r"^\.PHONY:(.*)$", text, re.MULTILINE) for t in line.split()}


def test_every_make_target_quoted_exists() -> None:
    rules = make_rules()
    missing = [f"{q}  → make {t}" for q, rest in commands("make") for t in make_targets(rest) if t not in rules]
    assert not missing, "make targets quoted but not in the Makefile:\n" + "\n".join(missing)


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def check_lakeflow(words_: list[str], root: argparse.ArgumentParser) -> Optional[str]:
    """Why ``lakeflow <words>`` is not a valid invocation, or None."""
    parser, path = root, ["lakeflow"]
    expect_value: Optional[argparse.Action] = None
    for token in words_:
        token = token.strip("[]")  # an optional flag: [--dry-run]
        if expect_value is not None:
            action, expect_value = expect_value, None
            if action.choices and re.fullmatch(r"[a-z][a-z0-9-]*", token) and token not in action.choices:
                return f"{' '.join(path)} {action.option_strings[-1]} {token}: not one of {sorted(action.choices)}"
            continue
        if token.startswith("--") and len(token) > 2 and re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", token):
            flag = token.split("=")[0]
            known = {**options(root), **options(parser)}
            if flag not in known:
                return f"{' '.join(path)}: no flag {flag}"
            if known[flag].nargs != 0 and "=" not in token:
                expect_value = known[flag]
            continue
        subs = subparsers(parser)
        if subs:
            if not re.fullmatch(r"[a-z][a-z0-9-]*", token):
                return None  # a placeholder (…, <sub>, COMMAND): nothing more to check
            if token not in subs:
                return f"{' '.join(path)}: no subcommand {token!r} (has {sorted(subs)})"
            parser, path = subs[token], [*path, token]
    return None


def test_every_lakeflow_command_and_flag_quoted_exists() -> None:
    root = build_parser()
    wrong = [f"{q}\n    {why}" for q, rest in commands("lakeflow") if (why := check_lakeflow(rest, root))]
    assert not wrong, "lakeflow commands quoted in the docs that the CLI does not have:\n" + "\n".join(wrong)


def test_the_checker_catches_what_drifted_before() -> None:
    root = build_parser()
    assert check_lakeflow(["ingest", "cluster-up"], root)
    assert check_lakeflow(["compact", "--no-such-flag"], root)
    assert check_lakeflow(["harvest", "--format", "svg"], root)
    assert check_lakeflow(["flink", "up", "--rest-port", "8082"], root) is None
    assert "s3a-jars" in make_rules() and "bench" not in phony() - set(make_rules())


def settings_variables() -> set[str]:
    return {name for model in sections() for name in variables(model)}


def make_variables() -> set[str]:
    """The Makefile's variables: assigned, or used as ``$(NAME)`` (ARGS, PYTEST_ARGS: the caller's)."""
    text = MAKEFILE.read_text()
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*[:?]?=", text, re.MULTILINE)) | set(re.findall(r"\$\(([A-Z][A-Z0-9_]*)\)", text))


def bench_knobs() -> set[str]:
    """The variables the benchmarks read (``knob("NAME", default)`` in bench/*.py: FRESHNESS_MINUTES, …)."""
    return {name for path in (ROOT / "bench").glob("*.py") for name in re.findall(r'knob\("([A-Z][A-Z0-9_]*)"', path.read_text())}


def test_every_variable_quoted_is_a_setting_or_named_as_external() -> None:
    known = settings_variables() | make_variables() | bench_knobs() | EXTERNAL_VARIABLES
    found = []
    for q in ALL:
        names = re.findall(r"\$\{?([A-Z][A-Z0-9_]*)(?![A-Za-z0-9_])", q.text)
        names += [w.split("=")[0] for w in words(q.text) if re.fullmatch(r"[A-Z][A-Z0-9_]*=\S*", w)]
        found += [f"{q}  → {n}" for n in names if n not in known and not n.startswith(EXTERNAL_PREFIXES)]
    assert not found, "variables quoted in the docs that nothing defines:\n" + "\n".join(found)


def anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file."""
    out = set()
    for heading in re.findall(r"^#+ (.*)$", doc.read_text(), re.MULTILINE):
        out.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return out


def test_every_link_anchor_exists() -> None:
    wrong = []
    for doc in DOCS:
        if doc.suffix != ".md":
            continue
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", line):
                linked = (doc.parent / target).resolve() if target else doc
                if linked.suffix == ".md" and linked.exists() and anchor not in anchors(linked):
                    wrong.append(f"{doc.relative_to(ROOT)}:{number}: {target}#{anchor}")
    assert not wrong, "links to headings that do not exist:\n" + "\n".join(wrong)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_quote_something(doc: Path) -> None:
    """The parsers above see each doc (a doc they skipped would pass every check)."""
    assert any(q.doc == doc for q in ALL)


def section(doc: Path, title: str) -> str:
    """The text of ``doc`` under the heading ``## title``, up to the next ``## `` heading."""
    text = doc.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def top_level_parts() -> set[str]:
    """lakeflow's top-level modules and packages, by name (``__init__`` included)."""
    return {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def part_of(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_between_parts() -> dict[str, set[str]]:
    """Top-level part → the other parts its modules import, imports inside functions included
    (not those under ``if TYPE_CHECKING:``), as tools/import_cycles.py counts them."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        tree = ast.parse(path.read_text(), str(path))
        skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(
            node.test) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
                names = [base]
            else:
                continue
            for name in names:
                if name.startswith("lakeflow.") and part_of(name) != part_of(module):
                    graph.setdefault(part_of(module), set()).add(part_of(name))
    return graph


def test_the_module_map_names_every_top_level_module() -> None:
    named = set(re.findall(r"^\| `(\w+)/?` \|", section(ARCHITECTURE, "Module map"), re.MULTILINE))
    assert named == top_level_parts(), (
        f"ARCHITECTURE.md's module map misses {sorted(top_level_parts() - named)}, names {sorted(named - top_level_parts())}")


def test_the_import_table_is_the_codes() -> None:
    text = section(ARCHITECTURE, "What imports what today")
    table = {m: set(re.findall(r"`(\w+)`", deps)) for m, deps in re.findall(r"^\| `(\w+)` \| (.*) \|$", text, re.MULTILINE)}
    assert table == imports_between_parts()
    leaves = set(re.findall(r"`(\w+)`", text.split("import no other part of lakeflow")[0].rsplit("\n\n", 1)[-1]))
    assert leaves == top_level_parts() - set(imports_between_parts()) - {"__init__"}
