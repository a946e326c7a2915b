"""The command's exit codes, and the one error type that carries a message and a code.

A CLI used in CI is read by scripts as much as by people: "a test failed" and
"your input is broken" must be told apart without parsing text, and neither
may end in a traceback.  Everything the command refuses is raised as
:class:`CliError` and printed once, on stderr, by the entry point.
"""

from __future__ import annotations

OK = 0
"""Success: every test passed, or the explanation was printed."""
TEST_FAILED = 1
"""``remedy test``: at least one case got other ``remedyActions`` than expected."""
USAGE = 2
"""Bad arguments (argparse's own code)."""
INPUT = 3
"""A file could not be used: unreadable, not YAML, not a test file, an invalid Remedy."""
NOT_FOUND = 4
"""``explain cluster``, ``unjoin``: the control plane has no Cluster of that name."""
API = 5
"""The control plane could not be used: no kubeconfig, unreachable, credentials refused."""
CONFLICT = 6
"""``join``: the member is registered under another name, or the name is another cluster's."""
INTERNAL = 70
"""A bug in the command (EX_SOFTWARE); the message says what happened."""
INTERRUPTED = 130
"""Ctrl-C."""


class CliError(Exception):
    """A refusal to show the user: ``message`` on stderr, ``code`` as the exit status."""

    def __init__(self, message: str, code: int = INPUT) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
