"""A DataHub GMS stand-in on a real socket: ``POST /aspects?action=ingestProposalBatch`` (Rest.li
2.0.0) stores the proposals, checks the bearer token when one is set, and answers like GMS."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, Optional

from tests.standins.http_stub import QuietHandler, send_json, serve, stop, url_of


@dataclass
class GmsStandIn:
    token: Optional[str] = None
    fail_first: int = 0  # answer 503 to the first N posts
    proposals: list[dict[str, Any]] = field(default_factory=list)
    posts: int = 0
    server: Optional[ThreadingHTTPServer] = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return url_of(self.server)

    def start(self) -> "GmsStandIn":
        gms = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                gms.posts += 1
                if self.path != "/aspects?action=ingestProposalBatch":
                    return self._send(404, {"message": f"no resource {self.path}"})
                if self.headers.get("X-RestLi-Protocol-Version") != "2.0.0":
                    return self._send(400, {"message": "Rest.li protocol 2.0.0 required"})
                if gms.token and self.headers.get("Authorization") != f"Bearer {gms.token}":
                    return self._send(401, {"message": "Unauthorized"})
                if gms.posts <= gms.fail_first:
                    return self._send(503, {"message": "unavailable"})
                proposals = json.loads(body)["proposals"]
                for p in proposals:
                    json.loads(p["aspect"]["value"])  # the aspect must be a JSON document
                gms.proposals.extend(proposals)
                return self._send(200, {"value": [p["entityUrn"] for p in proposals]})

            def _send(self, status: int, payload: Any) -> None:
                send_json(self, status, payload)

        self.server = serve(Handler)
        return self

    def stop(self) -> None:
        if self.server is not None:
            stop(self.server)
