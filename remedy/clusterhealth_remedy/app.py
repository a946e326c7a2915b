"""Wire the Remedy controller: its metrics and its controller, served by :mod:`process`."""

from __future__ import annotations

from clusterhealth_core import process
from clusterhealth_core.kube import resources
from clusterhealth_remedy import controller, metrics
from clusterhealth_remedy import settings as remedy_settings


async def serve(settings: remedy_settings.RemedySettings) -> None:
    """Run until SIGTERM/SIGINT."""

    async def start(running: process.Process) -> process.Work:
        remedy_metrics = metrics.RemedyMetrics(running.registry)
        controller_settings = controller.ControllerSettings(
            workers=settings.workers, resync_period=settings.resync_period)
        return running.elect(
            controller.COMPONENT,
            lambda term: controller.RemedyController(term, controller_settings, remedy_metrics),
            remedy_metrics.is_leader, on_stop=remedy_metrics.clear).run()

    await process.serve(settings, process.Component(
        "remedy", user_agent="clusterhealth-remedy", max_connections=settings.workers + 4,
        needed=(resources.REMEDIES, resources.CLUSTERS)), start)
