"""Package layout: one installed top-level package, ``provisioner``, from four repository folders.

``provisioner.providers`` lives in ``providers/``, ``provisioner.stacks`` in ``stacks/`` and
``provisioner.templates`` in ``templates/``; everything else of ``provisioner`` in ``provisioner/``.
Sub-packages are found on disk, so a new provider package needs no entry here.
"""

from setuptools import find_packages, setup

ROOTS = {
    "provisioner": "provisioner",
    "provisioner.providers": "providers",
    "provisioner.stacks": "stacks",
    "provisioner.templates": "templates",
}

packages = [f"{name}.{sub}" if sub else name for name, folder in ROOTS.items() for sub in ["", *find_packages(folder)]]
setup(packages=packages, package_dir=ROOTS)
