"""Status from the members back to the control plane, in two controllers.

``decision`` is pure (a member object's health and reflected status, the
binding's aggregated status and ``FullyApplied`` condition, a Deployment
template's summed status); ``work`` fills ``Work.status.manifestStatuses``
from the member objects (the ``workStatus`` controller); ``binding`` fills
the binding's ``aggregatedStatus`` from its Works and writes the template's
status in the control plane (the ``bindingStatus`` controller).
"""
