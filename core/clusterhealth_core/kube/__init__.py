"""The one place that talks to Kubernetes API servers.

A thin asyncio layer on aiohttp (see ``docs/decisions/0001-kube-client.md``):
kubeconfig loading, typed errors, resource descriptors, and a client with
get/list/watch/create/update/patch/apply/delete and retry with backoff.
"""
