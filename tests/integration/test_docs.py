"""The docs cannot drift from the code: every ``make`` target, ``lakeflow`` subcommand, flag (and
flag value of a fixed set), environment variable and repository file quoted in README.md,
ARCHITECTURE.md, docs/*.md and .env.example exists — checked against the Makefile's rules, the real
argparse parser (``lakeflow.cli.main.build_parser``), the settings models and the checkout; ARCHITECTURE.md's
module map names every top-level module and its import table is the code's.

The unit tests (no process): tests/unit/test_docs.py.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Iterator

from tests.unit.test_docs import (  # noqa: F401 (fixtures, constants)
    ALL,
    ARCHITECTURE,
    DOCS,
    MAKEFILE,
    ROOT,
    SEPARATORS,
    Quote,
    commands,
    make_rules,
    make_targets,
    phony,
    quotes,
    words,
)

# made by the commands, not in the checkout; or files of the Flink distribution in the wheel
GENERATED = ("build/", ".lakeflow/", ".venv/", "dist/", "/tmp/", "bin/", "conf/", "lib/", "opt/", "plugins/")


PATH_RE = re.compile(r"(?<![\w./$-])((?:\.?[\w-]+/)*[\w.-]+\.(?:md|py|toml|ya?ml|java|env|sh|json|example|properties))\b"
                     r"|(?<![\w./$-])((?:lakeflow|jobs|tests|bench|deploy|docs|java|build-support)/[\w./-]*)")


def test_make_rules_phony_and_help_agree() -> None:
    rules = make_rules()
    assert not phony() - set(rules), f".PHONY names targets without a rule: {sorted(phony() - set(rules))}"
    helped = {t for t, rest in rules.items() if "## " in rest}
    listed = {line.split()[0] for line in subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True,
                                                         text=True, check=True).stdout.splitlines() if line.strip()}
    assert helped <= listed, f"make help misses {sorted(helped - listed)}"


def test_make_dry_run_knows_the_quoted_targets() -> None:
    """``make -n`` (nothing run) accepts every target the docs quote."""
    quoted = sorted({t for _, rest in commands("make") for t in make_targets(rest)})
    proc = subprocess.run(["make", "-n", "-q", "--no-print-directory", *quoted], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert "No rule to make target" not in proc.stderr, proc.stderr


def cited_paths() -> Iterator[tuple[Path, int, str]]:
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", line):  # markdown links
                if not re.match(r"[a-z]+:", target):
                    yield doc, number, str((doc.parent / target).resolve().relative_to(ROOT))
            for q in (Quote(doc, number, s) for s in re.findall(r"`([^`]+)`", line)) if doc.suffix == ".md" else (
                    [Quote(doc, number, line)]):
                for m in PATH_RE.finditer(q.text):
                    yield doc, number, (m.group(1) or m.group(2)).rstrip(".")


def repo_files() -> set[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return {p for p in out.splitlines() if (ROOT / p).exists()}


def test_every_file_cited_exists() -> None:
    """A path is found from the checkout's root, the doc's folder, or as the tail of a path in the
    checkout (docs name modules relative to their package: ``compaction/run.py``); a bare name only
    for a Python module (``readings.py``), other bare names being other tools' (``config.yaml``)."""
    files = repo_files()
    folders = {str(Path(f).parent) for f in files}
    missing = []
    for doc, number, path in cited_paths():
        path = path.rstrip("/")
        if path.startswith(GENERATED) or any(c in path for c in "*<>{}…") or "://" in path:
            continue
        if "/" not in path and not path.endswith(".py"):
            continue
        found = (ROOT / path).exists() or (doc.parent / path).exists() or any(
            f == path or f.endswith("/" + path) for f in files | folders)
        if not found:
            missing.append(f"{doc.relative_to(ROOT)}:{number}: {path}")
    assert not missing, "files cited in the docs that are not in the repository:\n" + "\n".join(sorted(set(missing)))
