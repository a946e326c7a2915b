"""Wire the webhook process: settings, the HTTPS admission endpoint, the health server."""

from __future__ import annotations

import prometheus_client

from clusterhealth_controlplane.webhook import metrics, server
from clusterhealth_controlplane.webhook import settings as webhook_settings
from clusterhealth_core import buildinfo, runner, serving
from clusterhealth_core import clock as clocks


async def serve(settings: webhook_settings.WebhookSettings) -> None:
    """Run until SIGTERM/SIGINT; :class:`runner.StartupError` if it cannot listen."""
    registry = prometheus_client.CollectorRegistry()
    buildinfo.register(registry, "webhook", elected=False)
    clock = clocks.Clock()
    webhook = server.WebhookServer(
        settings.defaults, settings.webhook_tls, metrics.WebhookMetrics(registry),
        host=settings.bind_address, port=settings.secure_port, clock=clock)
    health = serving.HealthServer(registry, host=settings.bind_address,
                                  port=settings.healthz_port, tls=settings.tls, clock=clock)
    health.add_readiness("webhook", webhook.ready)

    async def run() -> None:
        try:
            await webhook.start()
        except (OSError, serving.TLSError) as exc:
            raise runner.StartupError(
                f"cannot serve the webhook on port {settings.secure_port}: {exc}") from exc
        await webhook.serve_until_cancelled()

    await runner.run_until_signalled(run(), health)
