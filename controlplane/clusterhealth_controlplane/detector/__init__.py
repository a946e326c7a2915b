"""The detector: resource templates matched to propagation policies, made into bindings.

``decision`` is pure (which policy claims a template, what binding it gets);
``controller`` reads templates and policies through informers and writes the
bindings and the claim on the template.
"""
