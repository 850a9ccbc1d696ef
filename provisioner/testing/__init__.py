"""Test support shipped with the package: fake provider servers (``provisioner.testing.fakes``)."""
