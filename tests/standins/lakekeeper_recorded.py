"""What the real Lakekeeper 0.13.3 answered, as the stand-ins' contract.

``tests/contracts/lakekeeper-0.13.3.jsonl`` holds, one line per HTTP exchange of the recording in
``shared/lakekeeper-api/recorded-0.13.3/exchanges.jsonl`` (lakeflow's commands and direct API
calls against the real server, authentication off, then on with an OpenID provider), what a
replay needs and what is compared: the request (method, path, the headers that change an answer,
the body with storage keys redacted, which kind of bearer token was sent) and the answer's
status, content type, encoding, ``x-request-id``, error type and *shape* (keys and value types,
never values). Tokens, keys and session tokens of the recording are not copied.

``python -m tests.standins.lakekeeper_recorded [EXCHANGES]`` distils the file anew from the recording.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TypeVar

ROOT = Path(__file__).resolve().parents[2]
DISTILLED = ROOT / "tests" / "contracts" / "lakekeeper-0.13.3.jsonl"
RECORDING = ROOT.parent / "shared" / "lakekeeper-api" / "recorded-0.13.3" / "exchanges.jsonl"
KEPT_HEADERS = ("content-type", "idempotency-key", "x-iceberg-access-delegation", "x-project-id",
                "accept-encoding")
SECRET_FIELDS = ("aws-access-key-id", "aws-secret-access-key")
# values that differ between servers and are sent back later: a warehouse's id, a page token, a
# table's location (a new table's location holds the server's table id)
MAPPED = ("id", "next-page-token", "base-location")
NO_TOKEN, PROVIDER_TOKEN, OTHER_TOKEN = "none", "provider-jwt", "other"
E = TypeVar("E")


@dataclass(frozen=True)
class Answer:
    status: int
    decoded: bool  # False: the recording could not read the body (recording 1's gzip answers)
    content_type: Optional[str]  # the mime type, without parameters
    gzip: bool
    request_id: bool
    error_type: Optional[str]
    shape: Any  # None when the recording could not decode the body (recording 1's gzip answers)
    text: Optional[str] = None  # a plain-text answer
    ids: Optional[dict[str, str]] = None  # the body's MAPPED values: what a replay maps


@dataclass(frozen=True)
class Exchange:
    recording: int
    seq: int
    step: str
    method: str
    path: str  # with the query
    headers: dict[str, str]
    token: str  # NO_TOKEN | PROVIDER_TOKEN | OTHER_TOKEN
    body: Any
    answer: Answer

    @property
    def label(self) -> str:
        return f"{self.recording}/{self.seq} {self.step} {self.method} {self.path.split('?')[0]}"


def shape(value: Any) -> Any:
    """A JSON value's structure: dicts by their keys, lists by their first item, scalars by type."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def answer_of(status: int, headers: dict[str, str], body: Any, decoded: bool = True) -> Answer:
    """The compared parts of one answer (``headers`` lower-cased, ``body`` parsed JSON or text)."""
    ctype = headers.get("content-type")
    mime = ctype.split(";")[0].strip() if ctype else None
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    table = body.get("table") if isinstance(body, dict) else None
    found = {**(body if isinstance(body, dict) else {}), **(table if isinstance(table, dict) else {})}
    ids = {k: found[k] for k in MAPPED if isinstance(found.get(k), str)}
    return Answer(status, decoded, mime, headers.get("content-encoding") == "gzip", "x-request-id" in headers,
                  error.get("type") if error else None,
                  shape(body) if decoded and mime == "application/json" else None,
                  body if isinstance(body, str) and mime == "text/plain" else None, ids or None)


def _token_kind(headers: dict[str, str]) -> str:
    auth = headers.get("authorization")
    if not auth:
        return NO_TOKEN
    token = auth.split()[-1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    except (IndexError, ValueError):
        return OTHER_TOKEN
    return PROVIDER_TOKEN if "lakekeeper" in (claims.get("aud") or []) else OTHER_TOKEN


def redacted(body: Any) -> Any:
    """``body`` with the storage keys of a warehouse's credential replaced by ``<redacted>``."""
    if isinstance(body, dict):
        return {k: "<redacted>" if k in SECRET_FIELDS else redacted(v) for k, v in body.items()}
    return body


def distil(line: dict[str, Any]) -> dict[str, Any]:
    """One recorded exchange → its line in the distilled file."""
    request = {k.lower(): v for k, v in line["request_headers"].items()}
    headers = {k.lower(): v for k, v in (line["response_headers"] or {}).items()}
    body = line["response_body"]
    decoded = not (body is None and headers.get("content-encoding") == "gzip")
    answer = answer_of(line["status"], headers, body, decoded)
    return {"recording": line["recording"], "seq": line["seq"], "step": line["step"], "method": line["method"],
            "path": line["path"], "headers": {k: request[k] for k in KEPT_HEADERS if k in request},
            "token": _token_kind(request), "body": redacted(line["request_body"]), "answer": answer.__dict__}


def read_distilled(path: Path, exchange: Callable[..., E], answer: Callable[..., Any]) -> list[E]:
    """The exchanges distilled into ``path`` as ``exchange`` objects (their answer as ``answer``), in order."""
    out = []
    for text in path.read_text().splitlines():
        line = json.loads(text)
        out.append(exchange(**{**line, "answer": answer(**line["answer"])}))
    return out


def write_distilled(argv: list[str], recording: Path, distilled: Path, distil_line: Callable[[dict], dict]) -> int:
    """Distil the recording (``argv[0]``, else ``recording``) into ``distilled``, a line an exchange."""
    source = Path(argv[0]) if argv else recording
    lines = [distil_line(json.loads(t)) for t in source.read_text().splitlines() if t.strip()]
    distilled.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
    print(f"{len(lines)} exchanges from {source} → {distilled}")
    return 0


def load(path: Path = DISTILLED) -> list[Exchange]:
    """The distilled exchanges, in the order they were made."""
    return read_distilled(path, Exchange, Answer)


def main(argv: list[str]) -> int:
    return write_distilled(argv, RECORDING, DISTILLED, distil)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
