"""The execution controller: a Work's manifests applied in its member cluster.

``decision`` is pure (the object as applied, the ``Applied`` condition,
whether a member object is the Work's, whether a change needs re-applying);
``controller`` applies through the member clients, keeps the Work's
finalizer, and re-applies when a member object is changed or deleted.
"""
