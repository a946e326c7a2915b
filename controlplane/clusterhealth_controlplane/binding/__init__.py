"""The binding controller: a scheduled binding made into one Work per target cluster.

``decision`` is pure (the Works a binding and its template ask for, which
existing Works are orphans); ``controller`` reads bindings, templates and
Works through informers and writes the Works and their namespaces.
"""
