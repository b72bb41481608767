"""The local Kafka broker's parts that need no JVM (lakeflow/runtime/kafka.py)."""

from lakeflow.runtime.kafka import new_cluster_id


def test_cluster_ids_never_look_like_an_option() -> None:
    """URL-safe base64 starts with ``-`` once in 64 ids; the storage tool would read that as a flag."""
    ids = [new_cluster_id() for _ in range(2_000)]
    assert not [i for i in ids if i.startswith("-")]
    assert {len(i) for i in ids} == {22} and len(set(ids)) == len(ids)
