"""Where a running lab is recorded, and which clusters find it (provisioner.local.lab).

``<state dir>/local/<cluster>.json`` is the lab's own record, under the cluster it was started for
(pid, namespace, each fake's URL, the folder of its nodes' roots and logs). A lab started for
``burst --local --recover anywhere`` also serves the run's later clusters (``NAME-mN``, brought up
by a move): each gets a record of one field, ``{"lab": NAME}``, that ``lab_for`` follows, so
``status``/``ssh``/``down`` of a moved cluster enter the same lab. A record whose process is gone,
or an alias of such a record, is dropped when read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from provisioner.untrusted import loads_bounded


def labs_dir() -> Path:
    from provisioner.dirs import state_dir

    return state_dir() / "local"


def record_path(cluster_id: str) -> Path:
    return labs_dir() / f"{cluster_id}.json"


def alive(pid: int) -> bool:
    """Whether the lab's process ``pid`` still exists on this host."""
    from provisioner.providers.ownership import pid_alive

    return pid_alive(pid)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        found = loads_bounded(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def lab_for(cluster_id: str) -> dict[str, Any] | None:
    """The record of the running lab that serves ``cluster_id`` (its own, or the one an alias names),
    else None."""
    path = record_path(cluster_id)
    record = _read(path)
    if record is None:
        return None
    if "lab" in record:  # a moved cluster of a run: the lab started for the run's first cluster
        found = lab_for(str(record["lab"])) if record["lab"] != cluster_id else None
        if found is None or "lab" in found:
            path.unlink(missing_ok=True)
            return None
        return found
    if not alive(int(record["pid"])):
        path.unlink(missing_ok=True)
        return None
    return record


def fakes_of(record: dict[str, Any]) -> dict[str, str]:
    """Provider -> its fake's URL in the lab ``record`` describes."""
    fakes = record.get("fakes")
    if isinstance(fakes, dict) and fakes:
        return {str(name): str(url) for name, url in fakes.items()}
    return {str(record["provider"]): str(record["url"])}


def adopt(cluster_id: str, lab_cluster: str) -> None:
    """Record that ``cluster_id`` (a moved cluster of the run) lives in the lab started for
    ``lab_cluster``. A no-op for the lab's own cluster."""
    if cluster_id == lab_cluster:
        return
    write(cluster_id, {"lab": lab_cluster})


def served(lab_cluster: str) -> list[str]:
    """The clusters the lab of ``lab_cluster`` serves: its own and every one adopted into it."""
    clusters = [lab_cluster]
    for path in sorted(labs_dir().glob("*.json")):
        record = _read(path)
        if record is not None and record.get("lab") == lab_cluster and path.stem != lab_cluster:
            clusters.append(path.stem)
    return clusters


def forget(lab_cluster: str) -> None:
    """Drop the lab's record and every alias of it (the lab is stopped)."""
    for cluster_id in served(lab_cluster):
        record_path(cluster_id).unlink(missing_ok=True)


def write(cluster_id: str, record: dict[str, Any]) -> None:
    """Save ``record`` under ``cluster_id`` whole (written aside, then renamed)."""
    path = record_path(cluster_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record), encoding="utf-8")
    partial.replace(path)


__all__ = ["adopt", "alive", "fakes_of", "forget", "lab_for", "labs_dir", "record_path", "served", "write"]
