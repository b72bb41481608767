"""The plumbing every small stand-in server in tests/ shares: a quiet handler, serve, stop."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """No access log on stderr; TCP_NODELAY so small answers are not held back by Nagle."""

    def log_message(self, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """Serve ``handler`` on a free 127.0.0.1 port in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()
