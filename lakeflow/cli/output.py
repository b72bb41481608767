"""The one way a command prints for people: a result as text lines, or as JSON (``--json``); notes
(progress, hints) on stderr, so stdout stays the result. Also :func:`shown`, a ``lakeflow``
command line a user can paste."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from lakeflow.runtime.homes import lakeflow_script


class Output:
    """Where a command's result goes: ``as_json`` prints its data as JSON, else its lines of text."""

    def __init__(self, as_json: bool = False, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.as_json = as_json
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def result(self, lines: Iterable[str], data: Any) -> None:
        """The command's result: ``data`` as indented JSON with ``--json``, else ``lines``."""
        text = json.dumps(data, indent=1, default=str) if self.as_json else "\n".join(lines)
        print(text, file=self.out, flush=True)

    def note(self, message: str) -> None:
        """A line for the person at the terminal, beside the result (stderr)."""
        print(message, file=self.err, flush=True)


def shown(*args: str) -> str:
    """A ``lakeflow`` command line as a user can paste it from here: ``.venv/bin/lakeflow …``
    (:func:`~lakeflow.runtime.homes.lakeflow_script`, relative to the current directory when below it)."""
    script = lakeflow_script()
    rel = os.path.relpath(script)
    return " ".join([str(script) if rel.startswith("..") else rel, *args])
