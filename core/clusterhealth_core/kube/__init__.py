"""The one place that talks to Kubernetes API servers.

A thin asyncio layer on httpx (see ``docs/decisions/0002-http-library.md``):
kubeconfigs and credentials (exec plugins included), proxies, typed errors,
resource descriptors, a client with get/list/watch/create/update/patch/apply/
delete that retries only what is safe, and informers.
"""
