"""The shared core every component builds on, and that imports none of them.

Layers, lowest first (enforced by import-linter): ``clock``/``retry``;
``kube`` (transport, config, client, informer); ``api`` (models of the
Karmada-compatible kinds); ``election``, ``status``, ``serving``, ``events``,
``workqueue``; ``settings``; ``runner`` (a component process's life).
"""
