"""Tiny PyFlink jobs the harvester tests submit to a real standalone cluster (``flink run -py``).

Each module has ``submit(...)`` (asynchronous: returns once the job is submitted) and runs alone
with ``flink run -py <module>.py ARGS``; ``submit_all.py`` submits the whole set from one client.
"""
