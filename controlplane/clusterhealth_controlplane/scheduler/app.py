"""Wire the scheduler process: its metrics and its controller, served by :mod:`process`."""

from __future__ import annotations

from clusterhealth_controlplane.scheduler import controller, metrics
from clusterhealth_controlplane.scheduler import settings as scheduler_settings
from clusterhealth_core import process
from clusterhealth_core.kube import resources

NEEDED = (resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS, resources.CLUSTERS)


async def serve(settings: scheduler_settings.SchedulerSettings) -> None:
    """Run until SIGTERM/SIGINT."""

    async def start(running: process.Process) -> process.Work:
        scheduler_metrics = metrics.SchedulerMetrics(running.registry)
        controller_settings = controller.ControllerSettings(
            plugins=settings.plugins, scheduler_name=settings.scheduler_name,
            workers=settings.workers)
        return running.elect(
            controller.COMPONENT,
            lambda term: controller.Scheduler(term, controller_settings, scheduler_metrics),
            scheduler_metrics.is_leader, readiness="scheduler").run()

    await process.serve(settings, process.Component(
        "scheduler", user_agent=controller.COMPONENT, max_connections=settings.workers * 2 + 4,
        needed=NEEDED), start)
