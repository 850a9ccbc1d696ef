"""The realize core: what both engines (``lifecycle`` direct, ``stacks`` Pulumi) build a cluster with.

Sits below both: it imports the pure core and ``provisioner.providers``, never ``lifecycle``
or ``stacks`` (tests/test_boundaries.py checks it).

- ``nodes``: the one PlanNode -> NodeSpec builder, the expiry, which rendered file a node boots
  with and the login user;
- ``launch``: create the nodes and wait until every one runs (rolling back on request).
"""
