"""Compaction: a raw generic table's JSON-array part files → one Iceberg table, exactly once.

Spark reads and writes the data (``read``, ``write``); pyiceberg registers the Parquet files and
the ledger of consumed raw files in one commit (``commit``, ``ledger``); ``recovery`` removes
what a crashed run left behind. ``jobs/compact.py`` strings the stages together.
"""
