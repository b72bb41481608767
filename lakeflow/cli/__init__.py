"""The ``lakeflow`` command line: the only code that parses arguments and prints for people.

:mod:`~lakeflow.cli.main` holds the root parser, the dispatch and the one mapping of errors to exit
codes; each command group has its module (``catalog``, ``flink``, ``spark``, ``compact``,
``maintain``, ``query``, ``lineage``, ``stack``, ``aws_profile``, ``demo``, ``tools``), which turns its
arguments into the typed values the domain packages take. :mod:`~lakeflow.cli.output` is the one way
to print a result (text, or JSON with ``--json``); :mod:`~lakeflow.cli.reference` writes docs/cli.md,
:mod:`~lakeflow.cli.env_example` writes ``.env.example``.
"""
