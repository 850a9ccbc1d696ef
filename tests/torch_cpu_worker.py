"""Run the burn-in's torch path on a real CPU build of torch; print what it measured as JSON.

Not a test module: tests/test_validation_burnin.py runs it with the system interpreter that
has Debian's ``python3-torch`` (PyPI's Linux wheel pulls gigabytes of CUDA libraries), because
the test venv is a plain venv without system site-packages. Usage:

    /usr/bin/python3 -I tests/torch_cpu_worker.py REPO VENV_SITE_PACKAGES...

Import order is deliberate. The project's libraries (pydantic and the typing_extensions it
needs, newer than Debian's) come from the test venv; torch and numpy come from the system,
since Debian's torch was built against Debian's numpy. So: the venv first while importing
pydantic, then the venv out of the path while importing torch, then the venv back at the end.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def _load(repo: str, venv_sites: list[str]) -> object:
    sys.path[:0] = [repo, *venv_sites]
    import pydantic  # noqa: F401  (from the venv)
    import typing_extensions  # noqa: F401

    for path in venv_sites:
        sys.path.remove(path)
    import torch  # from the system (python3-torch), with the system's numpy

    sys.path.extend(venv_sites)
    return torch


def main() -> int:
    repo, *venv_sites = sys.argv[1:]
    torch = _load(repo, venv_sites)
    from provisioner.validation.burnin import BurnInConfig, multinode_allreduce_busbw, run_burnin
    from provisioner.validation.reference import judge_burnin

    probes: list[int] = []
    tiny = BurnInConfig().tiny()
    cpu = run_burnin(tiny, probe=lambda: probes.append(1))
    no_cuda = run_burnin(BurnInConfig(sustained_s=1))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    gloo = multinode_allreduce_busbw(nbytes=1 << 12, repeats=2, backend="gloo")
    print(
        json.dumps(
            {
                "torch_version": torch.__version__,  # type: ignore[attr-defined]
                "torch_file": torch.__file__,  # type: ignore[attr-defined]
                "cpu": cpu.model_dump(mode="json"),
                "probes": len(probes),
                "cpu_findings": [f.model_dump(mode="json") for f in judge_burnin(cpu, "NVIDIA H100 80GB HBM3")],
                "no_cuda": no_cuda.model_dump(mode="json"),
                "gloo_busbw": gloo,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
