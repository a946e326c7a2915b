"""Shell completion: bash and zsh scripts, and the candidates they ask the command for.

One source of truth, the argparse parser: the scripts call ``clusterhealth
__complete WORD...`` (what kubectl's own completion does with ``__complete``),
which prints the candidates for the last word, one per line: subcommands,
flags, the choices of a flag, and for a Cluster name (``explain cluster``,
``unjoin``) the Clusters of the current kubeconfig's control plane, read within
two seconds and silently nothing when it cannot be read.  kubectl (>= 1.26)
completes ``kubectl clusterhealth ...`` through the executable
``kubectl_complete-clusterhealth`` on ``PATH``, installed with the package,
which runs the same.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Sequence

from clusterhealth_core import retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config as kubeconfig
from clusterhealth_core.kube import resources

SHELLS = ("bash", "zsh")
NAMES_TIMEOUT = 2.0
"""How long completion may wait for the Cluster names."""
CLUSTER_NAME_COMMANDS = (("explain", "cluster"), ("unjoin",))
_BASH = """# clusterhealth completion for bash: source <(clusterhealth completion bash)
_clusterhealth() {
    local IFS=$'\\n'
    COMPREPLY=( $(clusterhealth __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) )
    if [[ ${#COMPREPLY[@]} -eq 0 ]]; then
        COMPREPLY=( $(compgen -f -- "${COMP_WORDS[COMP_CWORD]}") )
    fi
}
complete -F _clusterhealth clusterhealth kubectl-clusterhealth
"""
_ZSH = """#compdef clusterhealth kubectl-clusterhealth
# clusterhealth completion for zsh: source <(clusterhealth completion zsh)
autoload -U +X bashcompinit && bashcompinit
""" + _BASH.split("\n", 1)[1]


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for ``shell``."""
    return _ZSH if shell == "zsh" else _BASH


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            return {name: sub for name, sub in action.choices.items()
                    if not name.startswith("_")}
    return {}


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def candidates(parser: argparse.ArgumentParser, words: Sequence[str]) -> list[str]:
    """What may come as the last of ``words`` (the words after the program's name)."""
    *before, current = list(words) or [""]
    path: list[str] = []
    node = parser
    skip = False
    for word in before:
        if skip:
            skip = False
            continue
        flags = _flags(node)
        if word in flags:
            skip = flags[word].nargs != 0
            continue
        sub = _subparsers(node)
        if word in sub:
            node = sub[word]
            path.append(word)
    flags = _flags(node)
    if before and before[-1] in flags and flags[before[-1]].nargs != 0:
        choices = flags[before[-1]].choices
        return sorted(c for c in map(str, choices or ()) if c.startswith(current))
    found = [name for name in _subparsers(node) if name.startswith(current)]
    if current.startswith("-"):
        found += [flag for flag in flags if flag.startswith(current)]
    elif not found and tuple(path) in CLUSTER_NAME_COMMANDS:
        found = [name for name in cluster_names() if name.startswith(current)]
    return sorted(found)


def cluster_names() -> list[str]:
    """The Clusters of the default kubeconfig's control plane, or none (quickly)."""
    async def read() -> list[str]:
        credentials = kubeconfig.load_default()
        async with kube.ApiClient(credentials, timeout=NAMES_TIMEOUT,
                                  backoff=retry.Backoff(attempts=1)) as api:
            async with asyncio.timeout(NAMES_TIMEOUT):
                listed = await api.list(resources.CLUSTERS)
        return [str(item["metadata"]["name"]) for item in listed.get("items") or []]
    with contextlib.suppress(Exception):
        return asyncio.run(read())
    return []
