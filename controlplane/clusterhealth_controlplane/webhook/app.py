"""Wire the webhook process: the HTTPS admission endpoint, served by :mod:`process`."""

from __future__ import annotations

from clusterhealth_controlplane.webhook import metrics, server
from clusterhealth_controlplane.webhook import settings as webhook_settings
from clusterhealth_core import process, runner, serving


async def serve(settings: webhook_settings.WebhookSettings) -> None:
    """Run until SIGTERM/SIGINT; :class:`runner.StartupError` if it cannot listen."""

    async def start(running: process.Process) -> process.Work:
        webhook = server.WebhookServer(
            settings.defaults, settings.webhook_tls, metrics.WebhookMetrics(running.registry),
            host=settings.bind_address, port=settings.secure_port, clock=running.clock)
        running.server.add_readiness("webhook", webhook.ready)
        return run(webhook)

    async def run(webhook: server.WebhookServer) -> None:
        try:
            await webhook.start()
        except (OSError, serving.TLSError) as exc:
            raise runner.StartupError(
                f"cannot serve the webhook on port {settings.secure_port}: {exc}") from exc
        await webhook.serve_until_cancelled()

    await process.serve(settings, process.Component("webhook"), start)
