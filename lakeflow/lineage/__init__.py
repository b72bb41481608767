"""Lineage: the Flink metadata harvester, the shared dataset identities, and the emitters."""
