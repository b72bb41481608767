"""What lakeflow drives: where Flink and Spark are installed, the jars and plugins it fetches, the
processes it starts and stops, the memory it may use, the Spark driver's class archive.

A leaf layer: modules here import no lakeflow module outside ``lakeflow.runtime``
(tests/unit/test_layout.py)."""
