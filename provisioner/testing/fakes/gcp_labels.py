"""``instances.setLabels`` of the GCP fake (fakes.gcp_compute), as the Compute API documents it.

``POST .../zones/{zone}/instances/{name}/setLabels`` with ``InstancesSetLabelsRequest``
(``labels`` and ``labelFingerprint``) replaces every label of the instance and answers a zonal
operation. The fingerprint must be the one the instance shows now (``labelFingerprint``, which
changes with every label change): a stale or missing one is refused with 412 ``conditionNotMet``
and nothing changes, so two writers cannot overwrite each other's labels unseen.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from provisioner.testing.fakes.gcp_compute import GCPFake


def label_fingerprint(labels: Mapping[str, Any]) -> str:
    """What the fake shows as an instance's ``labelFingerprint``: a hash of its labels (base64)."""
    digest = hashlib.sha256(json.dumps(dict(labels), sort_keys=True).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


class LabelRoutes:
    def __init__(self, fake: GCPFake, base: str) -> None:
        self.fake = fake
        fake.route(
            "POST", f"{base}/zones/{{zone}}/instances/{{name}}/setLabels", self._set, kind="other", name="setLabels"
        )

    def _set(self, request: Request, project: str, zone: str, name: str) -> Response:
        body = self.fake.body(request)
        with self.fake.lock:
            instance = self.fake.instances.get((zone, name))
            if instance is None:
                return self.fake.error_reply(
                    "not_found",
                    message=f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found",
                )
            labels = body.get("labels") if isinstance(body, dict) else None
            if not isinstance(labels, dict):
                return self.fake.error_reply("bad_request", message="Invalid value for field 'labels'")
            if body.get("labelFingerprint") != label_fingerprint(instance.get("labels") or {}):
                return self._stale()
            instance["labels"] = {str(key): str(value) for key, value in labels.items()}
        return self.fake.json(self.fake._operation_body(project, zone, name, "setLabels"))

    def _stale(self) -> Response:
        text = "Labels fingerprint either invalid or resource labels have changed"
        return self.fake.json(
            {
                "error": {
                    "code": 412,
                    "message": text,
                    "errors": [{"message": text, "domain": "global", "reason": "conditionNotMet"}],
                }
            },
            412,
        )


__all__ = ["LabelRoutes", "label_fingerprint"]
