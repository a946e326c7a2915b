"""Control-plane tests: this folder is on ``sys.path`` for ``cpkit`` (the shared helpers)."""
