"""A ``Remote`` that records the scripts it is asked to run as files (tests of the stacks'
``ClusterTopology`` step). Standard library only: the gRPC dynamic provider server unpickles it,
importing this module, and a heavy import would be paid in every such test."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class FileRemote:
    """A ``Remote`` that writes every script it is asked to run to ``folder/<node>.<n>.sh``: it
    pickles (plain data, importable class), so the gRPC server process can run it too."""

    folder: str

    def bootstrap(self, target: Any, script: str, *, timeout_s: float = 3600) -> None:
        count = len(list(Path(self.folder).glob(f"{target.node_name}.*.sh")))
        Path(self.folder, f"{target.node_name}.{count}.sh").write_text(f"# {target.user}@{target.host}\n{script}")

    def run(self, target: Any, argv: Any, *, timeout_s: float = 60.0) -> Any:
        raise AssertionError("the topology step only bootstraps")

    def stream(self, target: Any, argv: Any, on_line: Any, *, timeout_s: float | None = None) -> int:
        raise AssertionError("the topology step only bootstraps")


def pushed(folder: Path, node: str) -> list[str]:
    """The scripts run on ``node``, in order, each without the recorder's first line."""
    paths = sorted(folder.glob(f"{node}.*.sh"), key=lambda p: int(p.name.split(".")[-2]))
    return [p.read_text().split("\n", 1)[1] for p in paths]
