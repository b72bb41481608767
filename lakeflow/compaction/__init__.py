"""Compaction: a raw generic table's JSON-array part files → one Iceberg table, exactly once.

An engine — ``arrow`` (pyarrow in the driver) or ``spark`` — reads the part files and writes Parquet
behind one contract (``engine``); pyiceberg registers the Parquet files and the ledger of consumed
raw files in one commit (``commit``, ``ledger``); ``recovery`` removes what a crashed run left
behind; ``maintain`` merges the table's small files, expires snapshots and removes orphan files.
``jobs/compact.py`` strings the stages (``run``) together; docs/compaction.md maps the modules.
"""
