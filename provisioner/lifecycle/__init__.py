"""Realize layer: shell-side orchestration that acts on machines. Never imported by the pure core
(spec, catalog, optimizer, render).

realize (the direct engine: bring_up / tear_down / failover), readiness (control plane says every
node is ready), remote (commands on nodes: OpenSSH with the cluster key, or a stand-in),
bootstrap_ssh, burst (job clusters and their watchdog), pulumi_engine (the stacks/ program through
the Automation API), state (local cluster records), gc, events (rich / JSON lines), interrupts
(SIGINT/SIGTERM held during purchases), cli (the up/down/status/outputs/ssh/burst commands).
"""

from provisioner.lifecycle.bootstrap_ssh import BootstrapError, BootstrapResult, SshBootstrapper, SshTarget

__all__ = ["BootstrapError", "BootstrapResult", "SshBootstrapper", "SshTarget"]
