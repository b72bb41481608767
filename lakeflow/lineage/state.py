"""Stateful stale-entity removal: what the last successful harvest emitted, and what vanished.

The state file lists the entities this harvester *owns* (flows and tasks, with their flow) — never
datasets: a dataset is only referenced, other sources own it. An entity is stale when the previous
state had it and this harvest did not emit it, unless its flow is protected: the cluster still
lists the job but it was left out for its state (RESTARTING, FAILING, …) or could not be read.
If the stale share of the previous state exceeds ``fail_safe_threshold`` percent, nothing is
removed and the state is kept as it was (an accidental config change must not wipe the catalog).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lakeflow.lineage.emit_datahub import Urns
from lakeflow.lineage.graph import Graph

VERSION = 1


@dataclass(frozen=True)
class StaleCheck:
    removed: tuple[str, ...]
    state: dict[str, str]  # urn → "<orchestrator>:<flow>" to save
    warning: str | None = None


def owned(graph: Graph, env: str, platform_instance: str | None) -> dict[str, str]:
    """URN → flow key of every flow and task in the graph."""
    u = Urns(env, platform_instance, {})
    out = {u.flow(f.orchestrator, f.name): f"{f.orchestrator}:{f.name}" for f in graph.flows}
    out.update({u.task(t.orchestrator, t.flow, t.id): f"{t.orchestrator}:{t.flow}" for t in graph.tasks})
    return out


def check(
    previous: dict[str, str], current: dict[str, str], protected_flows: Iterable[str], fail_safe_threshold: float
) -> StaleCheck:
    protected = {f"flink:{name}" for name in protected_flows}
    kept = {urn: flow for urn, flow in previous.items() if urn not in current and flow in protected}
    stale = tuple(sorted(urn for urn in previous if urn not in current and urn not in kept))
    if previous and 100.0 * len(stale) / len(previous) > fail_safe_threshold:
        return StaleCheck(
            (),
            dict(previous),
            (
                f"stale-entity removal skipped: {len(stale)} of {len(previous)} entities would be removed "
                f"(> fail_safe_threshold {fail_safe_threshold:g}%); state left unchanged"
            ),
        )
    return StaleCheck(stale, {**current, **kept})


def load(path: Path) -> dict[str, str]:
    """The previous state ({} when there is none); a corrupt file is an error, not an empty state."""
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        if doc.get("version") != VERSION:
            raise ValueError(f"unsupported version {doc.get('version')!r}")
        return {str(e["urn"]): str(e["flow"]) for e in doc["entities"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"state file {path}: unreadable ({exc}); move it away to start afresh") from exc


def save(path: Path, state: dict[str, str]) -> None:
    """Write the state atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": VERSION, "entities": [{"urn": u, "flow": f} for u, f in sorted(state.items())]}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
