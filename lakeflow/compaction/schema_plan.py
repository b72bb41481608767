"""``lakeflow schema plan``: what the next compaction would do to the table's schema, changing nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakeflow.compaction.commit import iceberg_catalog, load_target
from lakeflow.compaction.config import CompactConfig
from lakeflow.schema.evolution import Change, plan, refused
from lakeflow.schema.types import spelled


@dataclass
class SchemaPlan:
    """The declared schema against the table: its changes, or that the table would be created."""

    table: str
    declared: str  # where the schema was declared, and its digest
    exists: bool
    changes: list[Change] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # a new table's columns

    @property
    def refused(self) -> bool:
        return bool(refused(self.changes))

    def lines(self) -> list[str]:
        head = f"{self.table} against {self.declared}"
        if not self.exists:
            return [f"{head}: no table yet; the next compaction creates it with", *(f"  {c}" for c in self.columns)]
        if not self.changes:
            return [f"{head}: no change"]
        return [f"{head}:", *(f"  {c}" for c in self.changes)] + (
            ["refused: the next compaction stops before reading anything (exit code 2)"] if self.refused else []
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "table": self.table,
            "declared": self.declared,
            "exists": self.exists,
            "refused": self.refused,
            "changes": [
                {"action": c.action, "field": c.field, "change": c.change, "reason": c.reason} for c in self.changes
            ],
            "columns": self.columns,
        }


def schema_plan(config: CompactConfig) -> SchemaPlan:
    """The declared schema (TABLE_SCHEMA) against the compacted table, as the next run would plan it."""
    s = config.schema
    target = load_target(
        iceberg_catalog(config.settings), config.namespace, config.target_table, config.settings.s3_endpoint
    )
    out = SchemaPlan(table=config.target_name, declared=f"{s.source} ({s.digest})", exists=target is not None)
    if target is None:
        out.columns = [f"{f.name}: {spelled(f.field_type)}" for f in s.iceberg_schema().fields]
        return out
    out.changes = plan(target.table.schema(), target.layout(s), s)
    return out
