"""The stand-ins answer as the real Lakekeeper 0.13.3 did: every recorded request
(``tests/contracts/lakekeeper-0.13.3.jsonl``, see tests/standins/lakekeeper_recorded.py) is sent again, in
order, to the stand-ins behind one URL — the management stand-in for ``/health``,
``/management/v1`` and namespace creation, the Lakekeeper stand-in for the rest, its STS on a moto
server of its own — and each answer is compared with the real one: status, content type,
gzip, ``x-request-id``, error type, and the shape of the body (keys and value types).

What cannot be modelled is listed in :data:`NOT_REPLAYED` with the reason; the test fails when a
listed exchange stops being needed there, so the list stays true.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import requests
from werkzeug.serving import make_server
from werkzeug.wrappers import Request

from tests.support.fixtures_servers import run_moto
from tests.standins.lakekeeper_recorded import NO_TOKEN, PROVIDER_TOKEN, Answer, Exchange, answer_of, load
from tests.standins.lakekeeper import LakekeeperStandin, S3Account
from tests.standins.management import ManagementStandin

_NAMESPACES = re.compile(r"^/catalog/v1/[^/]+/namespaces$")
_ICEBERG_TABLES = re.compile(r"^/catalog/v1/[^/]+/namespaces/([^/]+)/tables(?:/[^/]+)?$")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PAGE_TOKEN = re.compile(r"pageToken=([^&]+)")

# step (or "step seq") → why the stand-ins are not asked: what only the real server's
# surroundings decide. Every other recorded exchange is replayed and compared.
NOT_REPLAYED = {
    "01-stack-bootstrap 5": "412: the real server validated the new warehouse's storage against moto, whose "
                            "STS ignores session policies (so the downscoped-credential check failed); the "
                            "stand-in does not validate storage",
    "02-create-warehouse-manual 6": "412: the same storage validation (before it was switched off)",
    "34c-register-in-warehouse-without-role-arn 131": "412: moto's STS answers 500 to an AssumeRole without a "
                                                      "RoleArn; the stand-in vends from a role per table",
    "iceberg": "Iceberg REST table calls (load, create, commit) are Apache's Iceberg REST server's "
               "(tests/support/iceberg_rest.py), not the stand-in's; their effect is modelled (a name an Iceberg "
               "table holds cannot be registered)",
}


class OneServer:
    """The stand-ins behind one URL, as the real server serves them; a warehouse or namespace the
    management stand-in creates also exists for the Lakekeeper stand-in."""

    def __init__(self, lakekeeper: LakekeeperStandin, management: ManagementStandin) -> None:
        self.lakekeeper, self.management = lakekeeper, management
        self._server = make_server("127.0.0.1", 0, self, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self.lakekeeper.url = self.url  # what its config answers as the catalog's uri

    def __call__(self, environ: dict, start_response: Callable) -> Any:
        request = Request(environ)
        management = (request.path == "/health" or request.path.startswith("/management/")
                      or (request.method == "POST" and _NAMESPACES.match(request.path)))
        if not management:
            return self.lakekeeper(environ, start_response)
        answer = self.management(environ, start_response)
        self._sync()
        return answer

    def _sync(self) -> None:
        for wh in self.management.warehouses.values():
            if wh.id not in self.lakekeeper.warehouses:
                profile = wh.profile
                existing = {w.bucket for w in self.lakekeeper.warehouses.values()}
                self.lakekeeper.add_warehouse(
                    wh.name, warehouse_id=wh.id, bucket=profile["bucket"], key_prefix=profile.get("key-prefix") or "",
                    vended_endpoint=profile.get("endpoint"), create_bucket=profile["bucket"] not in existing,
                    sts_enabled=bool(profile.get("sts-enabled")),
                    soft_delete=(wh.delete_profile or {}).get("type") == "soft")
            for levels in self.management.namespaces.get(wh.id, ()):
                self.lakekeeper.create_namespace(levels, self.lakekeeper.warehouses[wh.id])

    def serve(self) -> None:
        import threading

        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def one_server(tmp_path: Path) -> Iterator[OneServer]:
    with run_moto(tmp_path / "moto") as moto:
        lakekeeper = LakekeeperStandin(S3Account(moto.url, moto.region))
        lakekeeper.accept(None)  # the recording starts with authentication off
        management = ManagementStandin()
        server = OneServer(lakekeeper, management)
        server.serve()
        try:
            yield server
        finally:
            server.stop()


def _skip_reason(ex: Exchange) -> str | None:
    for key in (f"{ex.step} {ex.seq}", ex.step):
        if key in NOT_REPLAYED:
            return NOT_REPLAYED[key]
    if _ICEBERG_TABLES.match(ex.path.split("?")[0]):
        return NOT_REPLAYED["iceberg"]
    return None


def _auth_on(ex: Exchange) -> bool:
    """Steps 30 and later ran with an OpenID provider (recorded-0.13.3/README.md)."""
    number = re.match(r"^(\d+)", ex.step)
    return number is not None and int(number.group(1)) >= 30


class Replay:
    """Sends recorded requests to the stand-ins; the ids and page tokens the real server gave are
    mapped to the ones the stand-ins gave in the same answers."""

    def __init__(self, server: OneServer) -> None:
        self.server = server
        self.mapped: dict[str, str] = {}  # a value of the real server's → the stand-in's
        self.session = requests.Session()

    def send(self, ex: Exchange) -> Answer:
        auth = _auth_on(ex)
        valid = (lambda t: t == self.server.lakekeeper.token) if auth else None
        self.server.lakekeeper.accept(valid)
        self.server.management.accept = valid
        path = _UUID.sub(lambda m: self.mapped.get(m.group(0), m.group(0)), ex.path)
        path = _PAGE_TOKEN.sub(lambda m: f"pageToken={self.mapped.get(m.group(1), m.group(1))}", path)
        # identity: every body readable here; whether the stand-ins compress is test_gzip_as_lakekeeper's
        headers = {**{k.title(): v for k, v in ex.headers.items()}, "Accept-Encoding": "identity"}
        if ex.token != NO_TOKEN:
            token = self.server.lakekeeper.token if ex.token == PROVIDER_TOKEN else "not-a-token-of-the-provider"
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if ex.body is not None:
            text = json.dumps(ex.body)
            for real, ours in self.mapped.items():
                text = text.replace(real, ours)
            data = text.encode()
        response = self.session.request(ex.method, self.server.url + path, data=data, headers=headers, timeout=30)
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text or None
        answer = answer_of(response.status_code, {k.lower(): v for k, v in response.headers.items()}, body)
        for key, real in (ex.answer.ids or {}).items():
            if (answer.ids or {}).get(key):
                self.mapped[real] = answer.ids[key]
        return answer


def test_the_stand_ins_answer_every_recorded_request_as_lakekeeper_did(one_server: OneServer) -> None:
    replay = Replay(one_server)
    compared, used_reasons, differences = 0, set(), []
    for ex in load():
        reason = _skip_reason(ex)
        if reason is not None:
            used_reasons.add(reason)
            _model_iceberg_effect(one_server, replay, ex)
            continue
        ours, real = replay.send(ex), ex.answer
        compared += 1
        for field in ("status", "content_type", "request_id", "error_type")[: 4 if real.decoded else 3]:
            if getattr(real, field) != getattr(ours, field):
                differences.append(f"{ex.label}: {field}: real {getattr(real, field)!r}, "
                                   f"stand-in {getattr(ours, field)!r}")
        if real.shape is not None and real.shape != ours.shape:
            differences.append(f"{ex.label}: body\n  real     {json.dumps(real.shape)}\n"
                               f"  stand-in {json.dumps(ours.shape)}")
        if real.text is not None and (ours.text or "").split(":")[0] != real.text.split(":")[0]:
            differences.append(f"{ex.label}: text: real {real.text!r}, stand-in {ours.text!r}")
    assert not differences, f"{len(differences)} of {compared} answers differ:\n" + "\n".join(differences)
    assert set(NOT_REPLAYED.values()) == used_reasons, "a NOT_REPLAYED entry no longer matches any exchange"
    assert compared >= 150, compared


def test_gzip_as_lakekeeper(one_server: OneServer) -> None:
    """JSON answers are gzip-compressed for a client that accepts it, as the real ones were; a tiny
    one and a 204 are not; every answer carries x-request-id."""
    gzipped = [ex for ex in load() if ex.answer.gzip]
    assert gzipped, "the recording has compressed answers"
    big = requests.get(f"{one_server.url}/catalog/v1/config", headers={"Accept-Encoding": "gzip"}, timeout=10)
    assert (big.status_code, big.headers.get("Content-Encoding")) == (400, "gzip") and big.json()["error"]
    plain = requests.get(f"{one_server.url}/catalog/v1/config", headers={"Accept-Encoding": "identity"}, timeout=10)
    assert "Content-Encoding" not in plain.headers and plain.headers["x-request-id"]


def _model_iceberg_effect(server: OneServer, replay: Replay, ex: Exchange) -> None:
    """An Iceberg table the recording created holds its name in the warehouse."""
    match = _ICEBERG_TABLES.match(ex.path.split("?")[0])
    if match and ex.method == "POST" and ex.path.endswith("/tables") and ex.answer.status == 200:
        real_id = ex.path.split("/")[3]
        wh = server.lakekeeper.warehouses[replay.mapped.get(real_id, real_id)]
        wh.iceberg_tables.add(((match.group(1),), ex.body["name"]))
