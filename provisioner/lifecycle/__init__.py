"""Realize layer: shell-side orchestration that acts on machines. Never imported by the pure core
(spec, catalog, optimizer, render).

realize (the direct engine: bring_up / tear_down / failover, with local records), burst (job
clusters and their watchdog), pulumi_engine (the stacks/ program through the Automation API), state
(local cluster records), gc, cli (registers the up/down/status/outputs/ssh/burst commands of
up_command, down_command and look_commands). What both engines
build with (the NodeSpec builder, launch-and-wait, the SSH pass, readiness, remote commands, events,
held signals) is the realize core below, ``provisioner.realize``, which never imports this package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BootstrapError", "BootstrapResult", "SshBootstrapper", "SshTarget"]


def __getattr__(name: str) -> Any:
    # Lazy: `provisioner plan` registers the lifecycle commands without paying for their imports.
    if name in __all__:
        from provisioner.realize import bootstrap_ssh

        return getattr(bootstrap_ssh, name)
    raise AttributeError(f"module 'provisioner.lifecycle' has no attribute {name!r}")
