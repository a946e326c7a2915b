"""Dashboard tests: this folder is on ``sys.path`` for ``dashkit`` (the shared helpers).

They need promtool (the ``promtool`` fixture of tests/conftest.py: missing, they
fail, never skip).
"""
