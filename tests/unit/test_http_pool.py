"""lakeflow.http.Pool, the harvester's transport on libcurl (pycurl), against servers on 127.0.0.1:
kept-alive connections (one per thread), redirects within the origin (303 turns into a GET, a loop
ends), compressed answers, error answers cut, the environment's .netrc, and failures worded as
requests words them."""

from __future__ import annotations

import gzip
import threading
from http.server import ThreadingHTTPServer
from typing import Iterator

import pytest

from lakeflow.http import MAX_REDIRECTS, USER_AGENT, AnswerRefused, HttpOptions, Pool, RequestFailed, failure
from tests.standins.http_stub import FixedServer, QuietHandler, serve, stop, url_of

FAST = HttpOptions(timeout=5, max_retries=0)


class Routes:
    """An HTTP/1.1 server answering by path (``{path: (status, headers, body)}``, else 404) and
    recording ``(method, path, body, client port)`` of every request."""

    def __init__(self, routes: dict[str, tuple[int, tuple[tuple[str, str], ...], bytes]]) -> None:
        self.routes = routes
        self.received: list[tuple[str, str, bytes, int]] = []
        routes_, received = self.routes, self.received

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append((self.command, self.path, body, self.client_address[1]))
                status, headers, answer = routes_.get(self.path, (404, (), b"{}"))
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = _answer

        self.server: ThreadingHTTPServer = serve(Handler)
        self.url = url_of(self.server)


@pytest.fixture
def routes() -> Iterator:
    started: list[Routes] = []

    def start(table: dict) -> Routes:
        started.append(Routes(table))
        return started[-1]

    yield start
    for r in started:
        stop(r.server)


def body(pool: Pool, method: str, url: str, data: bytes | None = None) -> tuple[int, bytes]:
    reply = pool.request(method, url, data)
    return reply.status, reply.body


def test_the_requests_of_a_thread_share_one_kept_alive_connection(routes):
    server = routes({"/a": (200, (), b'{"a": 1}'), "/b": (200, (), b"[]")})
    pool = Pool(server.url, FAST)
    assert [body(pool, "GET", f"{server.url}{p}") for p in ("/a", "/b", "/a")] == [
        (200, b'{"a": 1}'), (200, b"[]"), (200, b'{"a": 1}')]
    assert len({port for *_, port in server.received}) == 1
    other = threading.Thread(target=lambda: [body(pool, "GET", f"{server.url}/a") for _ in range(2)])
    other.start()
    other.join()
    assert len({port for *_, port in server.received}) == 2  # another thread, its own connection, kept too
    pool.close()
    assert body(pool, "GET", f"{server.url}/b") == (200, b"[]")  # a closed pool opens anew
    assert len({port for *_, port in server.received}) == 3


def test_compressed_answers_are_taken_and_error_answers_cut(routes):
    server = routes({"/gz": (200, (("Content-Encoding", "gzip"),), gzip.compress(b"[1, 2]" * 500)),
                     "/err": (500, (), b"x" * 5000), "/big": (200, (), b"y" * 5000)})
    pool = Pool(server.url, FAST, max_bytes=4096, error_bytes=1000)
    assert body(pool, "GET", f"{server.url}/gz") == (200, b"[1, 2]" * 500)
    assert body(pool, "GET", f"{server.url}/err") == (500, b"x" * 1000)
    with pytest.raises(AnswerRefused, match="^answer larger than 4096 bytes refused$"):
        pool.request("GET", f"{server.url}/big")


def test_a_303_within_the_origin_is_followed_as_a_get_without_the_body(routes):
    server = routes({"/statements": (303, (("Location", "/result"),), b""), "/result": (200, (), b"{}")})
    assert body(Pool(server.url, FAST), "POST", f"{server.url}/statements", b'{"statement": "x"}') == (200, b"{}")
    assert [(m, p, b) for m, p, b, _ in server.received] == [
        ("POST", "/statements", b'{"statement": "x"}'), ("GET", "/result", b"")]


def test_a_redirect_loop_within_the_origin_ends_after_max_redirects():
    server = FixedServer(307, (("Location", "/again"),)).start()
    try:
        with pytest.raises(RequestFailed) as err:
            Pool(server.url, FAST).request("GET", f"{server.url}/start")
        assert len(server.received) == MAX_REDIRECTS + 1
        assert failure(err.value) == f"TooManyRedirects: Exceeded {MAX_REDIRECTS} redirects (the last to {server.url}/again)"
    finally:
        server.stop()


def test_the_environments_netrc_is_read_when_no_credentials_are_given(routes, tmp_path, monkeypatch):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login ann password pw\n")
    monkeypatch.setenv("NETRC", str(netrc))
    server = routes({})
    assert Pool(server.url, FAST).headers == {"User-Agent": USER_AGENT, "Accept": "*/*",
                                              "Authorization": "Basic YW5uOnB3"}
    assert Pool(server.url, FAST, {"Authorization": "Bearer t"}).headers["Authorization"] == "Bearer t"


def test_a_refused_connection_is_worded_as_requests_words_it():
    from tests.support.fixtures_servers import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RequestFailed) as err:
        Pool(url, FAST).request("GET", f"{url}/x")
    assert failure(err.value).startswith(f"ConnectionError: Failed to connect to {url.removeprefix('http://')} after ")


@pytest.fixture
def tls_server(tmp_path):
    """An HTTPS server on 127.0.0.1 with a self-signed certificate (written to ``cert.pem``)."""
    import datetime
    import ipaddress
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    server = Routes({"/a": (200, (), b"{}")})
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    yield server.url.replace("http://", "https://"), tmp_path / "cert.pem"
    stop(server.server)


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_tls_is_verified_against_the_environments_ca_bundle_or_not_at_all(tls_server, monkeypatch, variable):
    url, cert = tls_server
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RequestFailed) as err:
        Pool(url, FAST).request("GET", f"{url}/a")  # certifi's CAs do not know it
    assert failure(err.value).startswith("SSLError: ")
    assert body(Pool(url, HttpOptions(timeout=5, max_retries=0, verify=False)), "GET", f"{url}/a") == (200, b"{}")
    assert body(Pool(url, HttpOptions(timeout=5, max_retries=0, verify=str(cert))), "GET", f"{url}/a") == (200, b"{}")
    monkeypatch.setenv(variable, str(cert))
    assert body(Pool(url, FAST), "GET", f"{url}/a") == (200, b"{}")
