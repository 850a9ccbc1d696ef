"""The boot tests' node-backed fakes: provisioner.local.backed (``provisioner up --local`` uses them too)."""

from provisioner.local.backed import BackedFluenceFake, BackedLambdaFake, BackedRunPodFake, Machines

__all__ = ["BackedFluenceFake", "BackedLambdaFake", "BackedRunPodFake", "Machines"]
