"""Runs from the lineage store, compaction runs foremost: OpenLineage run events merged per run id (read as
plain JSON: no OpenLineage library import on the harvest's path); the engine that ran (arrow or
spark, the ``processing_engine`` run facet) becomes the run's ``engine`` property. The same merge serves the
Flink runs pushed by lakeflow's listener (:mod:`lakeflow.lineage.native`).

A dataset's ``schema`` facet becomes its columns (the newest event's) when the dataset is lakeflow's:
a compaction run's raw and Iceberg tables, and the table lakeflow's sink declares (its
``lakeflow_table`` facet). The schemas of other tables a Flink job reads or writes (a Kafka topic, a
JDBC table) are left to the sources that own them: DataHub's Kafka or Postgres source, whose
``schemaMetadata`` an upsert of the listener's Flink SQL types would replace."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from lakeflow.lineage.columns import Column, from_facet
from lakeflow.lineage.datasets import DatasetId
from lakeflow.lineage.flink_rest import IOMetrics
from lakeflow.lineage.graph import StoredRun
from lakeflow.lineage.store import is_flink, read_events

TERMINAL = ("COMPLETE", "FAIL", "ABORT")
LAKEFLOW_TABLE = "lakeflow_table"  # the facet of the table lakeflow's sink writes (java/lakeflow/flink/TableLineage)


def read_runs(directory: Path) -> list[StoredRun]:
    """Every compaction run in the store (not Flink's: :mod:`lakeflow.lineage.native`), START and
    COMPLETE/FAIL/ABORT events merged; sorted by run id."""
    return merge(e for e in read_events(directory) if not is_flink(e))


def merge(events: Iterable[Mapping[str, Any]]) -> list[StoredRun]:
    by_run: dict[str, list[Mapping[str, Any]]] = {}
    for e in events:
        by_run.setdefault(str(e["run"]["runId"]), []).append(e)
    return [
        _run(run_id, sorted(evs, key=lambda e: (e.get("eventTime", ""), e.get("eventType") in TERMINAL)))
        for run_id, evs in sorted(by_run.items())
    ]


def _run(run_id: str, events: list[Mapping[str, Any]]) -> StoredRun:
    last = events[-1]
    start = next((_ms(e) for e in events if e.get("eventType") == "START"), None)
    end = next((_ms(e) for e in reversed(events) if e.get("eventType") in TERMINAL), None)
    inputs: set[DatasetId] = set()
    outputs: set[DatasetId] = set()
    aliases: dict[DatasetId, tuple[DatasetId, ...]] = {}
    schemas: dict[DatasetId, tuple[Column, ...]] = {}
    props: dict[str, str] = {}
    for e in events:
        flink = is_flink(e)
        for key, target in (("inputs", inputs), ("outputs", outputs)):
            for d in e.get(key) or ():
                ds = DatasetId(str(d["namespace"]), str(d["name"]))
                target.add(ds)
                facets = d.get("facets") or {}
                links = (facets.get("symlinks") or {}).get("identifiers") or ()
                if links:
                    aliases[ds] = tuple(sorted(DatasetId(str(i["namespace"]), str(i["name"])) for i in links))
                columns = from_facet(facets.get("schema")) if not flink or LAKEFLOW_TABLE in facets else ()
                if columns:
                    schemas[ds] = columns
        run_facets = (e.get("run") or {}).get("facets") or {}
        error = run_facets.get("errorMessage")
        if isinstance(error, Mapping) and error.get("message"):
            props["error"] = str(error["message"]).splitlines()[0][:500]
        engine = run_facets.get("processing_engine")
        if isinstance(engine, Mapping) and engine.get("name"):  # the compaction engine that ran (arrow, spark)
            props["engine"] = str(engine["name"])[:40]
    return StoredRun(
        run_id=run_id,
        namespace=str(last["job"]["namespace"]),
        name=str(last["job"]["name"]),
        event_type=str(last.get("eventType", "OTHER")),
        start_ms=start,
        end_ms=end,
        inputs=tuple(sorted(inputs)),
        outputs=tuple(sorted(outputs)),
        aliases=aliases,
        properties=props,
        io=_io(events),
        schemas=schemas,
    )


def _io(events: list[Mapping[str, Any]]) -> IOMetrics:
    """Rows and bytes in/out from the newest event carrying statistics facets (the final one)."""
    for e in reversed(events):
        rows_in = bytes_in = rows_out = bytes_out = 0
        found = False
        for key, facet_key, stats in (
            ("inputs", "inputFacets", "inputStatistics"),
            ("outputs", "outputFacets", "outputStatistics"),
        ):
            for d in e.get(key) or ():
                s = ((d.get(facet_key) or {}).get(stats) or {}) if isinstance(d, Mapping) else {}
                if not isinstance(s, Mapping) or not s:
                    continue
                found = True
                rows, size = _int(s.get("rowCount")), _int(s.get("size"))
                if key == "inputs":
                    rows_in, bytes_in = rows_in + rows, bytes_in + size
                else:
                    rows_out, bytes_out = rows_out + rows, bytes_out + size
        if found:
            return IOMetrics(rows_in, rows_out, bytes_in, bytes_out)
    return IOMetrics()


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _ms(event: Mapping[str, Any]) -> int | None:
    try:
        return int(datetime.fromisoformat(str(event["eventTime"]).replace("Z", "+00:00")).timestamp() * 1000)
    except (KeyError, ValueError):
        return None
