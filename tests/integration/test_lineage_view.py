"""The lineage picture: ``lakeflow harvest --format html|dot|mermaid`` and ``lakeflow lineage view``.

The HTML page is opened in a real headless Chromium (Debian's ``chromium``), driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, no driver): it loads with no
console error and no network request but the file itself, every job and dataset of the recorded
scenario is drawn, and a click on a node shows its details. A screenshot is saved (and copied to
``build/lineage-view.png``).

The unit tests (no process): tests/unit/test_lineage_view.py.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from lakeflow.lineage.datasets import from_location
from tests.unit.test_lineage_view import _harvest, _store, expected_nodes, scenario_files  # noqa: F401 (fixtures, constants)

ROOT = Path(__file__).resolve().parents[2]


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio"]


class Chromium:
    """Headless Chromium with ``--remote-debugging-pipe``: commands go in on fd 3, answers and
    events come out on fd 4, each a JSON message ended by a NUL byte."""

    def __init__(self, profile: Path, log: Path) -> None:
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        assert binary, "Debian's chromium is needed (apt-get install chromium; make test installs it: build-support/test-prereqs.sh)"
        self.log = log.open("wb")
        # fd 3 ← our stdin pipe, fd 4 → our stdout pipe; Chromium's own stdout goes to the log.
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec "$@" 3<&0 4>&1 0</dev/null 1>&2', "sh", binary, *CHROMIUM_FLAGS,
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self._next, self._buffer = 0, b""
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: Optional[dict] = None, session: Optional[str] = None,
             timeout: float = 30.0) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.proc.stdin.write(json.dumps(message).encode() + b"\0")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._next:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e.get("method") == method and not e.get("_seen"):
                    e["_seen"] = True
                    return e
            self.events.append(self._read(deadline))

    def _read(self, deadline: float) -> dict[str, Any]:
        fd = self.proc.stdout.fileno()
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited ({self.proc.poll()})")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Page:
    """One tab: what it logged, what it requested, and a few ways to look at and click it."""

    def __init__(self, browser: Chromium, width: int = 1600, height: int = 1000) -> None:
        self.browser = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False})

    def send(self, method: str, params: Optional[dict] = None) -> dict[str, Any]:
        return self.browser.send(method, params, self.session)

    def open(self, url: str) -> None:
        self.browser.events.clear()
        self.send("Page.navigate", {"url": url})
        self.browser.wait_for("Page.loadEventFired")
        self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

    def eval(self, expression: str) -> Any:
        answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def _mine(self) -> list[dict[str, Any]]:
        return [e for e in self.browser.events if e.get("sessionId") == self.session]

    def errors(self) -> list[str]:
        out = []
        for e in self._mine():
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                out.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p.get('args', [])]}")
            elif e["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')} {p['exceptionDetails'].get('exception', {})}")
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry']['text']}")
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self._mine() if e["method"] == "Network.requestWillBeSent"]

    def click(self, title: str) -> None:
        """A real mouse click in the middle of the drawn node whose SVG <title> is ``title``."""
        x, y = self.eval(f"""(() => {{
            const g = [...document.querySelectorAll('#graph g.node, #graph g.cluster')]
                .find(g => g.querySelector('title').textContent === {json.dumps(title)});
            g.scrollIntoView({{block: 'center', inline: 'center'}});
            const shape = g.querySelector('path, polygon, ellipse');
            const r = shape.getBoundingClientRect();
            return [r.x + r.width / 2, g.classList.contains('cluster') ? r.y + 12 : r.y + r.height / 2];
        }})()""")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def details(self) -> tuple[Optional[str], str]:
        return self.eval("[document.getElementById('details').dataset.node || null, "
                         "document.getElementById('details').textContent]")

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    work = tmp_path_factory.mktemp("chromium")
    b = Chromium(work / "profile", work / "chromium.log")
    yield b
    b.close()


def test_the_monitor_sees_requests_and_errors(browser, tmp_path):
    """The checks below are not vacuous: a page that loads something and logs an error is caught."""
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><img src="http://127.0.0.1:9/x.png"><script>console.error("bad")</script>')
    page = Page(browser)
    page.open(control.as_uri())
    assert "http://127.0.0.1:9/x.png" in page.requests()
    assert any("bad" in e for e in page.errors())


def test_the_page_in_a_real_browser(browser, scenario_files, recorded_scenario, tmp_path):
    doc, html_file = scenario_files
    page = Page(browser)
    page.open(html_file.as_uri())

    assert page.errors() == []
    assert set(page.requests()) <= {html_file.as_uri()}  # nothing but the file itself

    drawn = set(page.eval("[...document.querySelectorAll('#graph g.node')].filter(g => "
                          "g.getBoundingClientRect().width > 0).map(g => g.querySelector('title').textContent)"))
    expected = expected_nodes(doc)
    assert len(expected) == 6 + 1 + 3  # six Flink jobs, the compaction, three datasets
    assert expected <= drawn, expected - drawn
    unresolved = {(j["name"], u) for j in doc["jobs"] for u in j["unresolved"]}
    assert len([t for t in drawn if t.startswith("unresolved:")]) == len(unresolved) > 0
    edges = page.eval("document.querySelectorAll('#graph g.edge').length")
    assert edges == len(doc["edges"]) + len(unresolved)

    raw = f"dataset:{from_location(recorded_scenario['location'])}"
    page.click(raw)
    node, text = page.details()
    assert node == raw and raw[len("dataset:"):] in text
    assert "flink:harvest-declared-sink" in text and "spark:lakeflow.compact.iot.sensor-readings-compacted" in text
    assert "iot.sensor-readings" in text  # its Lakekeeper identity, as an alias

    page.click("spark:lakeflow.compact.iot.sensor-readings-compacted")
    node, text = page.details()
    assert node == "spark:lakeflow.compact.iot.sensor-readings-compacted"
    assert "COMPLETE" in text and "SUCCESS" in text and "0199b0a4-6f1c-7000-8000-000000000001" in text
    assert "2026-11-22 01:00:00 UTC" in text and "2.0 min" in text and "3.9 KiB" in text  # times, bytes in

    unresolved_key = next(t for t in sorted(drawn) if t.startswith("unresolved:flink:harvest-kafka-named"))
    page.click(unresolved_key)
    node, text = page.details()
    assert node == unresolved_key and "Unresolved lineage" in text and "KafkaSink" in text

    page.click("flink:harvest-resubmitted")
    node, text = page.details()
    failed, finished = recorded_scenario["job_ids"]["harvest-resubmitted"]
    assert node == "flink:harvest-resubmitted"
    assert failed in text and finished in text and "FAILURE" in text and "NumberFormatException" in text
    assert "table sink 'sink': the plan names no catalog or database" in text  # its unresolved lineage, with reason
    assert page.errors() == [] and set(page.requests()) <= {html_file.as_uri()}

    shot = tmp_path / "lineage-view.png"
    page.screenshot(shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    (ROOT / "build").mkdir(exist_ok=True)
    shutil.copyfile(shot, ROOT / "build" / "lineage-view.png")


def test_operators_with_vertex_granularity(browser, recorded_jobmanager, recorded_scenario, tmp_path):
    html_file = _harvest(recorded_jobmanager, tmp_path, "html", "--operator-granularity", "vertex",
                         "--job-name-allow", "^harvest-declared")
    page = Page(browser)
    page.open(html_file.as_uri())
    assert page.errors() == [] and set(page.requests()) <= {html_file.as_uri()}
    titles = page.eval("[...document.querySelectorAll('#graph g.node, #graph g.cluster')]"
                       ".map(g => g.querySelector('title').textContent)")
    operators = [t for t in titles if t.startswith("operator:flink:harvest-declared-sink/")]
    assert "cluster:flink:harvest-declared-sink" in titles and len(operators) == 2  # source vertex, sink vertex
    raw = f"dataset:{from_location(recorded_scenario['location'])}"
    edge_titles = page.eval("[...document.querySelectorAll('#graph g.edge')].map(g => g.querySelector('title').textContent)")
    assert sum(1 for t in edge_titles if t.startswith("operator:")) == 2  # source → sink, sink → raw table
    assert any(t.endswith(f"->{raw}") for t in edge_titles)
    sink = next(o for o in operators if any(t == f"{o}->{raw}" for t in edge_titles))
    page.click(sink)
    node, text = page.details()
    assert node == sink and "Flink operator" in text and raw[len("dataset:"):] in text and "Upstream operators" in text
    page.click("cluster:flink:harvest-declared-sink")
    assert page.details()[0] == "cluster:flink:harvest-declared-sink"
