"""The Vast.ai instance label, the only mark an instance carries: ``<cluster>/<node>`` then
``/owner=<owner>``, ``/lease=<lease mark>``, ``/renewed=<stamp>`` (providers.ownership) and
``/run=<run id>`` (the bring-up that bought it, providers.base.RUN_TAG). Read
strictly: a label this module did not write parses as None, so a user's instance is never claimed.
"""

from __future__ import annotations

import datetime as dt
import re

from provisioner.providers.base import parse_expiry

_PART = r"[A-Za-z0-9][A-Za-z0-9._:+@-]{0,127}"
_LABEL = re.compile(
    rf"^(?P<cluster>{_PART})/(?P<node>{_PART})"
    r"(?:/owner=(?P<owner>[a-z0-9_-]{1,63})(?:/lease=(?P<lease>[a-z0-9-]{1,63})"
    r"(?:/renewed=(?P<renewed>[0-9]{8}t[0-9]{6}z))?)?"
    r"(?:/run=(?P<run>[0-9]{8}-[0-9]{6}-[0-9a-f]{6}))?)?$"
)


def cluster_label(
    cluster_id: str,
    name: str,
    owner: str | None = None,
    lease: str | None = None,
    renewed: str | None = None,
    run: str | None = None,
) -> str:
    """``<cluster>/<node>`` then ``/owner=<owner>``, ``/lease=<lease>``, ``/renewed=<stamp>``
    (``expiry_label`` form: when the lease was last renewed) and ``/run=<run id>`` when given."""
    label = f"{cluster_id}/{name}"
    if owner:
        label += f"/owner={owner}"
        if lease:
            label += f"/lease={lease}"
            if renewed:
                label += f"/renewed={renewed}"
        if run:
            label += f"/run={run}"
    return label


def label_run(label: str | None) -> str | None:
    """The run id a label ``cluster_label`` wrote carries (None: none, or not such a label)."""
    found = _LABEL.match(label or "")
    return found["run"] if found else None


def label_renewed(label: str | None) -> dt.datetime | None:
    """When the lease of a label ``cluster_label`` wrote was last renewed; None when it says not."""
    found = _LABEL.match(label or "")
    return parse_expiry(found["renewed"]) if found and found["renewed"] else None


def parse_label(label: str | None) -> tuple[str, str, str | None, str | None] | None:
    """(cluster, node, owner, lease) of a label ``cluster_label`` wrote; None for any other label.
    A bare ``<cluster>/<node>`` parses with owner and lease None: it carries no owner mark."""
    found = _LABEL.match(label or "")
    if not found:
        return None
    return found["cluster"], found["node"], found["owner"], found["lease"]


__all__ = ["cluster_label", "label_renewed", "label_run", "parse_label"]
