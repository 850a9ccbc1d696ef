"""The Pulumi engine's entry point for this project (Python runs a folder's ``__main__.py``)."""

from provisioner.stacks.program import main

main()
