"""The install runs the docs' commands: each one it runs is written so in its page.

:func:`clusterhealth_localenv.fleet.install_steps` is what the live tests run
(``helm``, ``kubectl``); here each command is looked up in the page it names
(``\\`` continuations joined, spaces collapsed), so a doc change that the install
does not follow, or the reverse, fails.  What the local environment adds or leaves
out is listed per step (``local``, ``drop``) and checked to be only that.
"""

from __future__ import annotations

import re

import pytest

from clusterhealth_localenv import environment, fleet

STEPS = fleet.install_steps(["member1"])
UNINSTALL = fleet.uninstall_steps(["member1"])


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\\\n", " "))


@pytest.mark.parametrize("step", STEPS + UNINSTALL, ids=lambda s: s.text[:60])
def test_the_command_is_written_so_in_its_page(step: fleet.Step) -> None:
    page = _normalized((fleet.REPO / step.doc).read_text())
    text = step.text if step.decode_to is None else f"{step.text} | base64 -d > {step.decode_to}"
    assert _normalized(text) in page, f"{step.doc} no longer says: {text}"
    if step.stdin is not None:
        assert _normalized(step.stdin) in page, f"{step.doc} no longer feeds:\n{step.stdin}"


def test_what_the_local_environment_changes_is_only_images_timers_and_timeouts() -> None:
    for step in STEPS:
        local = [w for w in step.local if w != "--set"]
        allowed = {"image.pullPolicy=Never", "haproxy.sidecar.image.pullPolicy=Never",
                   *fleet.AGENT_TIMERS}
        assert all(w in allowed or w.startswith("--timeout=") for w in local), step
        assert set(step.drop) <= {"global.imageRegistry=registry.example.org/clusterhealth"}


def test_the_steps_follow_the_operations_order() -> None:
    """CRDs, control plane, remedy controller, MCI provider (its member identities and
    their credentials before its chart), agents; checks last."""
    charts = [re.search(r"charts/([a-z-]+)", s.text) for s in STEPS
              if s.text.startswith("helm install")]
    order = [m.group(1) for m in charts if m]
    assert order == ["clusterhealth-crds", "controlplane", "remedy", "mci-provider",
                     "mci-provider", "agent", "agent"]
    checks = fleet.rollout_steps(["member1"], 1)
    assert [s.text for s in STEPS[-len(checks):]] == [s.text for s in checks]
    assert all("rollout status" in s.text for s in checks)


def test_placeholders_are_replaced() -> None:
    step = next(s for s in STEPS if "set-cluster" in s.text)
    argv = step.argv({fleet.CP_URL_PLACEHOLDER: "https://198.18.64.16:6443",
                      fleet.CA_PLACEHOLDER: "/tmp/ca.crt"})
    assert "--server=https://198.18.64.16:6443" in argv
    assert "--certificate-authority=/tmp/ca.crt" in argv
    mci = next(s for s in STEPS if s.text.startswith("helm install clusterhealth-mci-provider ")
               and s.cluster == environment.CONTROL_PLANE)
    words = mci.argv({})
    assert not any("registry.example.org" in w for w in words)
    assert words[-4:] == ["--set", "image.pullPolicy=Never", "--set",
                          "haproxy.sidecar.image.pullPolicy=Never"]
