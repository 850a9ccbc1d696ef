"""Realize layer: shell-side orchestration that acts on machines (bootstrap over SSH, later
up/down/status). Never imported by the pure core (spec, catalog, optimizer, render)."""

from provisioner.lifecycle.bootstrap_ssh import BootstrapError, BootstrapResult, SshBootstrapper, SshTarget

__all__ = ["BootstrapError", "BootstrapResult", "SshBootstrapper", "SshTarget"]
