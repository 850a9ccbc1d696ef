"""The realize core: what both engines (``lifecycle`` direct, ``stacks`` Pulumi) build a cluster with.

Sits below both: it imports the pure core and ``provisioner.providers``, never ``lifecycle``
or ``stacks`` (tests/test_boundaries.py checks it).

- ``nodes``: the one PlanNode -> NodeSpec builder, the expiry, which rendered file a node boots
  with and the login user;
- ``launch``: waiting until a cluster's nodes run, or are gone;
- ``sshpass``: the SSH pass once every node runs (re-render with addresses and switch topology);
- ``readiness``: the control plane (sinfo / kubectl / SSH) lists every node ready;
- ``remote``, ``bootstrap_ssh``: commands and bootstrap scripts on nodes over OpenSSH;
- ``runtime``: the injectable effects (adapters, remote, events, clocks, held signals);
- ``events`` (progress as rich or JSON lines) and ``interrupts`` (signals held during a purchase).

The direct engine (``lifecycle.realize``) and the Pulumi program's dynamic resources
(``stacks.neocloud``, ``stacks.topology``) both call these.
"""
