"""Benchmarks: figures measured on a real local environment, reported with their spread.

Each module is runnable (``python -m bench.<name>``), prints a plain-text table
and can write its section of ``docs/benchmarks.md``.  Nothing here is a test:
timings on small, noisy machines are recorded, never asserted.
"""
