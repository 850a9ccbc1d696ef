"""Witness: google-cloud-compute (and google-cloud-billing's SKU listing), Google's official clients,
for every call the GCP adapter makes, against the GCP REST fake on 127.0.0.1 (each request and
answer checked against the clients' own compute_v1 message types).

The adapter is built on those clients, so its calls are theirs: the test runs a cluster's whole
life through the adapter with AnonymousCredentials (no token, no metadata server: tests/conftest.py
points GCE_METADATA_HOST at loopback) and pins the REST routes the fake answered, each with a 2xx.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from provisioner.testing.fakes.base import FakeApp, RunningServer
from tests.conftest import ROOT
from tests.providers.official.support import need_client

# Routes of the GCP fake the adapter calls in a cluster's life: offers (machine and accelerator
# types, the region's quotas, the SKUs), create (insert; its operation is done at once here),
# list (aggregated), delete, and the cluster's firewall rules looked up at delete (none were made
# for a cluster without exposure), and the lease renewal (setLabels). docs/providers.md lists the same.
GCP_ROUTES = {
    "machineTypes",
    "acceleratorTypes",
    "region",
    "skus",
    "insert",
    "aggregated",
    "delete",
    "firewall",
    "setLabels",
}


def test_google_cloud_compute_answers_every_call_the_gcp_adapter_makes(
    serve_fake: Callable[[FakeApp], RunningServer],
) -> None:
    need_client("google-cloud-compute")
    from google.auth.credentials import AnonymousCredentials

    from provisioner.providers.base import owner_id
    from provisioner.providers.gcp.client import LIMITS
    from provisioner.providers.gcp.provider import GCPProvider
    from provisioner.testing.fakes.gcp_compute import CONTRACT_PROJECT, GCPFake, contract_harness

    harness = contract_harness()
    app = GCPFake(quotas=harness.app.quotas)  # no token: AnonymousCredentials send none
    url = serve_fake(app).url
    gcp = GCPProvider(
        CONTRACT_PROJECT, AnonymousCredentials(), zones=["us-central1-a"], endpoint=url, limits=LIMITS.scaled(100)
    )
    offers = gcp.list_offers(harness.offer_query)
    gcp.check_credentials()
    lease = "witness-4242-20261126t100000z"
    gcp.create_nodes("c1", [s.model_copy(update={"lease": lease}) for s in harness.node_specs(1)])
    assert gcp.renew_lease("c1", lease, owner_id(), dt.datetime.now(dt.UTC)) == 1  # renewed, then released
    assert gcp.renew_lease("c1", lease, owner_id(), None) == 1
    assert [n.name for n in gcp.get_nodes("c1")] == ["n0"]
    gcp.delete_nodes("c1")
    assert {o.instance_type for o in offers} >= {"a3-highgpu-8g"}
    # A firewall rule is looked up before it is made: the client's NotFound (404) means "absent".
    failed = [(c.route, c.status) for c in app.calls if not 200 <= c.status < 300]
    assert failed == [("firewall", 404)] * 3, failed
    made = {c.route for c in app.calls}
    assert made == GCP_ROUTES, (sorted(made - GCP_ROUTES), sorted(GCP_ROUTES - made))


# The fake's route names as docs/providers.md spells their paths.
GCP_DOC_PATHS = {
    "machineTypes": "/machineTypes`",
    "acceleratorTypes": "/acceleratorTypes`",
    "region": "/regions/{region}`",
    "skus": "/skus`",
    "insert": "POST .../zones/{zone}/instances`",
    "aggregated": "/aggregated/instances`",
    "delete": "DELETE .../zones/{zone}/instances/{name}`",
    "firewall": "GET .../global/firewalls/{name}`",
    "setLabels": "POST .../zones/{zone}/instances/{name}/setLabels`",
}


def test_docs_name_every_gcp_route() -> None:
    text = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    gcp = text[text.index("## GCP") : text.index("## RunPod")]
    assert set(GCP_DOC_PATHS) == GCP_ROUTES
    assert [route for route, path in sorted(GCP_DOC_PATHS.items()) if path not in gcp] == []


__all__ = [
    "GCP_ROUTES",
    "test_docs_name_every_gcp_route",
    "test_google_cloud_compute_answers_every_call_the_gcp_adapter_makes",
]
