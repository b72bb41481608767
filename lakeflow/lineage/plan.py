"""Reading Flink execution plans: which operators read or write what, and on what evidence.

A plan node's description is HTML: the chained operators are separated by ``<br/>``, prefixed
with ``+-`` and indentation, and text is escaped (``&gt;``). Each description is decoded and split
into its operators first; then every operator is searched for *all* the references it carries:

* SQL plan nodes: ``TableSourceScan(table=[[c, d, t]])``, ``LookupJoin(table=[c.d.t])``,
  ``Sink(table=[c.d.t])`` / ``Sink(table=[[c, d, t]])``, ``IcebergSink c.d.t``: catalog tables,
  split as ``catalog.database.<rest>`` (a JDBC catalog's table ``pg.shop.public.alerts`` is table
  ``public.alerts`` of database ``shop``); ``t[3]: Writer`` (Sink V2, e.g. the Kafka SQL sink): a
  bare table name; ``StreamingFileWriter`` / ``Sink: Filesystem``: a filesystem table sink whose
  table the plan does not name.
* The Kafka SQL source ``Source: KafkaSource-<catalog>.<database>.<table>``: a catalog table
  (kind ``kafka``, with ``table`` set), which the gateway can look up.
* lakeflow's declared sink ``LakeflowSink[<location>]``.
* DataStream names: ``KafkaSource-<topic>`` / ``KafkaSink-<topic>`` and ``<name>: Writer`` /
  ``<name>: Committer`` pairs. A name is only a name: these are *name-only* evidence.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass

from lakeflow.lineage.datasets import SINK_NAME_PREFIX
from lakeflow.lineage.flink_rest import PlanNode

SOURCE, SINK = "source", "sink"

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_INDEX = re.compile(r"^\[\d+\]:\s*")
_TREE = re.compile(r"^(?:\s*(?::-|\+-|:|\|))+\s*")  # a multi-sink plan's ":- ", ":  +- " branches
_SCAN = re.compile(r"\bTableSourceScan\(table=\[\[(?P<ids>.*?)\]\]")
_LOOKUP = re.compile(r"\bLookupJoin\(table=\[(?P<ids>[^\]]+)\]")
_SINK_NESTED = re.compile(r"\b(?:Sink|TableSinkFunction)\(table=\[\[(?P<ids>.*?)\]\]")
_SINK_DOTTED = re.compile(r"\bSink\(table=\[(?P<ids>[^\[\]]+)\]")
_ICEBERG = re.compile(r"\bIcebergSink\s+(?P<ids>[\w`.-]+)")
_DECLARED = re.compile(re.escape(SINK_NAME_PREFIX) + r"\[(?P<loc>.+)\](?::\s*(?:Writer|Committer))?$")
_TABLE_WRITER = re.compile(r"^(?:Sink:\s*)?(?P<name>[^\[\]:]+)\[\d+\]:\s*(?:Writer|Committer)$")
_WRITER = re.compile(r"^(?:Sink:\s*)?(?P<name>.+?):\s*(?P<part>Writer|Committer)$")
_KAFKA = re.compile(r"\bKafka(?P<kind>Source|Sink)-(?P<topic>[^\s\[\]:<>,]+)")
_FS_SINK = re.compile(r"^(?:Sink:\s*)?(?:StreamingFileWriter|Filesystem)$")
_FS_TAIL = "end"  # the discarding sink chained after a StreamingFileWriter
_SOURCE = re.compile(r"^Source:\s*(?P<name>.+)$")
_SINK = re.compile(r"^Sink:\s*(?P<name>.+)$")


@dataclass(frozen=True, order=True)
class TableRef:
    """A table as a SQL plan names it; catalog and database are None for a bare Sink V2 name.
    ``table`` is everything after the database, dots included (``public.alerts``)."""

    catalog: str | None
    database: str | None
    table: str

    def __str__(self) -> str:
        return ".".join(p for p in (self.catalog, self.database, self.table) if p)


@dataclass(frozen=True, order=True)
class Reference:
    """One dataset an operator reads (``role`` source) or writes (sink), as the plan shows it.

    ``kind``: ``table`` (catalog table), ``table-writer`` (bare Sink V2 table name),
    ``filesystem`` (filesystem table sink, table not named), ``declared`` (lakeflow's sink name,
    ``value`` = location), ``kafka`` (``value`` = the name after ``KafkaSource-``; ``table`` set
    when that name is a ``catalog.database.table`` identifier), ``writer`` (a Writer/Committer sink
    named ``value``), ``operator`` (a DataStream source/sink with no connector evidence).
    """

    role: str
    kind: str
    vertex_id: str
    operator: str
    table: TableRef | None = None
    value: str | None = None
    name_only: bool = False


def operators(description: str) -> list[str]:
    """The chained operators of one plan-node description, decoded: ``<br/>`` split, the tree's
    ``+-`` / ``:-`` / ``:`` branches and indentation stripped, HTML entities unescaped, ``[N]:`` prefixes removed."""
    out = []
    for part in _BR.split(description):
        text = _INDEX.sub("", _TREE.sub("", html.unescape(part).strip()))
        if text:
            out.append(text)
    return out


def identifiers(text: str, sep: str | None = None) -> list[str]:
    """``c, d, t`` or ``c.d.t`` (with optional backquoted parts) → ``[c, d, t]``; ``sep`` is
    guessed (``,`` when the text has one outside quotes) unless given."""
    parts, current, quoted = [], [], False
    sep = sep or ("," if "," in text.replace("`,`", "") else ".")
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and text[i + 1 : i + 2] == "`":  # `` inside a quoted name
                current.append("`")
                i += 1
            else:
                quoted = not quoted
        elif ch == sep and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def table_ref(ids: str) -> TableRef | None:
    """A plan's table identifier: ``[c, d, t, project=[…], …]`` (a scan's list: the third item is
    the table, dots and all) or ``c.d.rest`` (everything after the database is the table: a
    JDBC catalog's ``public.alerts``); None when it does not name catalog, database and table."""
    listed = "," in ids.replace("`,`", "")
    names = identifiers(ids, "," if listed else ".")
    if len(names) < 3 or "=" in names[2]:
        return None
    table = names[2] if listed else ".".join(names[2:])
    return TableRef(names[0], names[1], table)


def references(node: PlanNode) -> tuple[Reference, ...]:
    """Every reference in one plan node, in operator order."""
    return _node_references(node.id, node.description)


@functools.lru_cache(maxsize=4096)
def _node_references(vid: str, description: str) -> tuple[Reference, ...]:
    """:func:`references` of a node, read once per vertex and description: the runs of one job, and
    jobs submitted again, share their plans' nodes."""
    return tuple(ref for op in operators(description) for ref in _references(vid, op))


def _references(vid: str, op: str) -> Iterable[Reference]:
    tables = False
    for pattern, role in (
        (_SCAN, SOURCE),
        (_LOOKUP, SOURCE),
        (_SINK_NESTED, SINK),
        (_SINK_DOTTED, SINK),
        (_ICEBERG, SINK),
    ):
        for hit in pattern.finditer(op):
            ref = table_ref(hit.group("ids"))
            if ref is not None:
                tables = True
                yield Reference(role, "table", vid, op, table=ref)
    if tables:
        return
    declared = _DECLARED.search(op)
    if declared:
        yield Reference(SINK, "declared", vid, op, value=declared.group("loc"))
        return
    kafka = list(_KAFKA.finditer(op))
    for k in kafka:
        role = SOURCE if k.group("kind") == "Source" else SINK
        table = table_ref(k.group("topic")) if role == SOURCE else None
        yield Reference(role, "kafka", vid, op, table=table, value=k.group("topic"), name_only=True)
    if kafka:
        return
    if _FS_SINK.match(op):
        yield Reference(SINK, "filesystem", vid, op)
    elif m := _TABLE_WRITER.match(op):
        yield Reference(SINK, "table-writer", vid, op, table=TableRef(None, None, m.group("name").strip()))
    elif m := _WRITER.match(op):
        yield Reference(SINK, "writer", vid, op, value=m.group("name").strip(), name_only=True)
    elif m := _SOURCE.match(op):
        yield Reference(SOURCE, "operator", vid, op, value=m.group("name").strip(), name_only=True)
    elif m := _SINK.match(op):
        yield Reference(SINK, "operator", vid, op, value=m.group("name").strip(), name_only=True)


def job_references(plan: Iterable[PlanNode]) -> list[Reference]:
    """All references of a job, de-duplicated (a Writer and its Committer are one sink), sorted."""
    refs = [r for node in plan for r in references(node)]
    if any(r.kind == "filesystem" for r in refs):  # its discarding tail is part of the same sink
        refs = [r for r in refs if not (r.kind == "writer" and r.value == _FS_TAIL)]
    unique: dict[tuple, Reference] = {}
    for r in sorted(refs, key=lambda r: (r.operator.endswith("Committer"), r)):  # Writers first
        unique.setdefault((r.role, r.kind, r.table, r.value), r)
    return sorted(unique.values())
