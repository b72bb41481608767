"""The lineage picture: ``lakeflow harvest --format html|dot|mermaid`` and ``lakeflow lineage view``.

Unit tests: they start no process. The real-process tests: tests/integration/test_lineage_view.py."""

from __future__ import annotations

from lakeflow.cli import main


def test_lineage_view_without_a_harvest_or_a_store_says_what_to_give(tmp_path, monkeypatch, capsys):
    for name in ("LINEAGE_DIR", "LAKEFLOW_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LAKEFLOW_ENV_FILE", str(tmp_path / "none.env"))
    monkeypatch.chdir(tmp_path)  # no ./.lakeflow/lineage here
    assert main(["lineage", "view", "--format", "json"]) == 2
    assert "nothing to draw: give --harvest FILE" in capsys.readouterr().err


def test_html_without_graphviz_is_one_clear_error(recorded_jobmanager, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot here
    assert main(["harvest", "--rest-url", recorded_jobmanager.url, "--format", "html", "--output",
                 str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert "needs Graphviz's `dot`" in err and "apt-get install graphviz" in err
    assert recorded_jobmanager.requests == []  # told before harvesting, not after
    assert main(["harvest", "--rest-url", recorded_jobmanager.url, "--format", "dot", "--output",
                 str(tmp_path / "x.dot")]) == 0  # DOT and Mermaid need nothing
