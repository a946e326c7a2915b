"""The controller manager's failover flags: Karmada's names and defaults, bad values refused."""

from __future__ import annotations

import pytest

from clusterhealth_controlplane import options
from clusterhealth_controlplane import settings as cp_settings
from clusterhealth_core import settings


def test_defaults_are_karmadas(kubeconfig: str) -> None:
    loaded = cp_settings.load(["--leader-elect=false", f"--kubeconfig={kubeconfig}"], environ={})
    assert loaded.options == options.Options()
    assert loaded.options.health.update_frequency == 10.0
    assert loaded.options.taints.failover_eviction_timeout == 300.0
    assert loaded.options.eviction.graceful_eviction_timeout == 600.0


def test_flags_and_environment_set_each_group(kubeconfig: str) -> None:
    loaded = cp_settings.load(
        ["--leader-elect=false", f"--kubeconfig={kubeconfig}",
         "--cluster-failure-threshold=5s", "--eviction-rate=0",
         "--secondary-eviction-rate=0", "--unhealthy-cluster-threshold=0.5",
         "--failback-stabilization-window=1m"],
        environ={"CLUSTERHEALTH_CONTROLPLANE_FAILOVER_EVICTION_TIMEOUT": "2s"})
    assert loaded.options.health.failure_threshold == 5.0
    assert loaded.options.taints.failover_eviction_timeout == 2.0
    assert loaded.options.eviction.rate == 0.0
    assert loaded.options.eviction.secondary_rate == 0.0
    assert loaded.options.eviction.unhealthy_cluster_threshold == 0.5
    assert loaded.options.failback.window == 60.0


@pytest.mark.parametrize(("flag", "message"), [
    ("--failover-eviction-timeout=-5s", "is not a duration"),
    ("--cluster-status-update-frequency=0s", "must be > 0"),
    ("--eviction-rate=-1", "must be a number >= 0"),
    ("--eviction-rate=fast", "is not a number"),
    ("--unhealthy-cluster-threshold=1.5", "must be in (0, 1]"),
    ("--failback-batch=0", "workers must be a whole number"),
])
def test_bad_values_are_refused_with_the_flag_named(
        kubeconfig: str, flag: str, message: str) -> None:
    with pytest.raises(settings.SettingsError) as raised:
        cp_settings.load([f"--kubeconfig={kubeconfig}", flag], environ={})
    assert flag.split("=")[0] in str(raised.value)
    assert message in str(raised.value)
