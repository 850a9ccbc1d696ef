"""``pulumi-resource-pulumi-python`` for the Pulumi CLI built by ``.ci/build-pulumi`` (tests and CI only).

The engine starts this plugin for every dynamic resource of a Python program (type
``pulumi-python:dynamic:Resource``). It serves the Python SDK's own dynamic-provider server
(``pulumi.dynamic.__main__``: it unpickles each resource's provider from its ``__provider`` input and
prints its port on stdout) as ``python -m pulumi.dynamic`` does, with the interpreter of the
project's environment (interpreter.sh), so the pickled providers' modules (``provisioner.stacks...``)
import.
"""

import os
import runpy
import sys

# As `python -m pulumi.dynamic` (what Pulumi's own plugin runs): the working directory, which the
# engine sets to the program's, comes first on sys.path, so providers defined in the program's own
# modules unpickle; not this file's folder.
sys.path[0] = os.getcwd()

try:
    import pulumi.dynamic  # noqa: F401
except ImportError as exc:
    print(
        f"pulumi-resource-pulumi-python: {sys.executable} cannot import the Pulumi SDK ({exc}); "
        "activate the project's virtualenv or set PULUMI_PYTHON_CMD",
        file=sys.stderr,
    )
    sys.exit(1)

runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)
