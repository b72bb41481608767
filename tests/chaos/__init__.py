"""Fault-injection scenarios (``make chaos``): real processes, real servers, faults on purpose.

Each scenario is a function ``scenario(workdir) -> Result`` that prints one summary line such as
``tm-kill: kills=10 lost=0 duplicated=0 partial=0``; :mod:`tests.chaos.run` runs them all and
fails when a count promised to be zero is not.
"""
