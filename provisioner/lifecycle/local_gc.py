"""``provisioner gc --cluster NAME`` of a local dry run (``up --local``): never a real provider.

While its lab runs, gc looks through the lab's fake only (the process is sealed to it,
providers.seal); once the lab is gone nothing of the cluster exists (its nodes were this machine's
containers), so gc only says so and, with ``--yes``, forgets the record.
"""

from __future__ import annotations

from provisioner.termtext import printable


def local_gc(cluster_id: str, delete: bool) -> int | None:
    """The exit code of ``gc --cluster cluster_id`` when it is a local dry run; None when it is not."""
    from provisioner.lifecycle import command_support, state

    if not command_support.is_local(cluster_id):
        return None
    if command_support.enter_lab(cluster_id):
        from provisioner.lifecycle.gc import collect_garbage
        from provisioner.providers.seal import sealed

        seal = sealed()
        report = collect_garbage(provider=seal.provider if seal else None, cluster_id=cluster_id, delete=delete)
        print(printable(report.render(), keep_newlines=True))
        return report.exit_code
    record = state.load_record(cluster_id)
    said = f"cluster {cluster_id} is a local dry run whose lab is not running: nothing of it exists at any provider"
    if record is not None and delete:
        state.remove_record(cluster_id)
        said += "; its record is forgotten"
    elif record is not None:
        said += f"; provisioner gc --cluster {cluster_id} --yes forgets its record"
    print(printable(said))
    return 0


__all__ = ["local_gc"]
