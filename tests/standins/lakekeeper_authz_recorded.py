"""What the real Lakekeeper 0.13.3 with OpenFGA authorization answered, as the stand-ins' contract.

``tests/contracts/lakekeeper-authz-0.13.3.jsonl`` holds, one line per HTTP exchange of the recording
in ``shared/lakekeeper-api/recorded-authz-0.13.3/exchanges.jsonl`` (an admin, an ingestion, a
compaction and an unrelated principal, each an OAuth client, against a real server with OpenFGA;
its README tells the story), what a replay needs and what is compared: the server instance (1: the
first, thrown away after ``lf-other`` bootstrapped it; 2: the rest), the principal, the request
(method, path, the ``X-Iceberg-Access-Delegation`` header, the body with storage keys redacted) and
the answer's status, error type and message, and *shape* (:func:`tests.standins.lakekeeper_recorded.shape`:
keys and value types, never values), plus the ids in it (every UUID by its place in the body),
which a replay maps onto the ids the stand-ins give. The recording holds no token or key (they are
``<redacted>`` there); none is copied.

``python -m tests.standins.lakekeeper_authz_recorded [EXCHANGES]`` distils the file anew from the recording.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.standins.lakekeeper_recorded import ROOT, read_distilled, redacted, shape, write_distilled

DISTILLED = ROOT / "tests" / "contracts" / "lakekeeper-authz-0.13.3.jsonl"
RECORDING = ROOT.parent / "shared" / "lakekeeper-api" / "recorded-authz-0.13.3" / "exchanges.jsonl"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class Answer:
    status: int
    error_type: str | None
    error_message: str | None
    shape: Any
    ids: dict[str, str]  # place in the body ("properties.namespace_id", "identifiers.0.id") -> a UUID


@dataclass(frozen=True)
class Exchange:
    n: int
    instance: int  # 1: the server thrown away after exchange 2; 2: the one everything else ran against
    step: str
    principal: str | None  # the OAuth client id (principal oidc~<it>); None: no token sent
    method: str
    path: str  # with the query
    delegation: str | None  # the X-Iceberg-Access-Delegation header
    body: Any
    answer: Answer

    @property
    def label(self) -> str:
        return f"{self.n} {self.step} ({self.principal}) {self.method} {self.path.split('?')[0]}"


def ids_of(body: Any, place: str = "") -> dict[str, str]:
    """Every UUID in an answer by its place (an error's id is no object's)."""
    if isinstance(body, dict):
        return {k: v for key, value in body.items() if key != "error"
                for k, v in ids_of(value, f"{place}{key}.").items()}
    if isinstance(body, list):
        return {k: v for i, item in enumerate(body) for k, v in ids_of(item, f"{place}{i}.").items()}
    return {place.rstrip("."): body} if isinstance(body, str) and UUID.match(body) else {}


def answer_of(status: int, body: Any) -> Answer:
    """The compared parts of one answer (``body``: parsed JSON, text, or None when empty)."""
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
    return Answer(status, error.get("type"), error.get("message"), shape(body), ids_of(body))


def distil(line: dict[str, Any]) -> dict[str, Any]:
    """One recorded exchange → its line in the distilled file."""
    return {"n": line["n"], "instance": 1 if line["instance"].startswith("first") else 2, "step": line["step"],
            "principal": line["principal"], "method": line["method"], "path": line["path"],
            "delegation": line["delegation"], "body": redacted(line["request"]),
            "answer": answer_of(line["status"], line["response"]).__dict__}


def load(path: Path = DISTILLED) -> list[Exchange]:
    """The distilled exchanges, in the order they were made."""
    return read_distilled(path, Exchange, Answer)


def main(argv: list[str]) -> int:
    return write_distilled(argv, RECORDING, DISTILLED, distil)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
