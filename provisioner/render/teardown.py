"""What ends a cluster's bill: one table, per provider, and the node scripts rendered from it.

A TTL (``lifetime.ttl_hours``) or an idle timeout (``lifetime.idle_timeout_minutes``) is only
worth something if reaching it stops the bill. A plain ``poweroff`` does that on AWS only (the
adapter launches with ``InstanceInitiatedShutdownBehavior=terminate``); on Lambda, RunPod,
Vast.ai and Fluence a powered-off machine keeps billing until it is deleted through the API.
``TEARDOWN`` says, for every provider, what the node itself does and what else enforces each
limit; docs/teardown.md is this table in prose (a test keeps the two equal).

Node side (rendered here, run on every node):

* ``provisioner-teardown REASON`` does the provider's ``node_action``:
  ``poweroff`` (AWS, GCP, Lambda, Fluence), or deletes this very instance through the
  provider's API with the credential the platform injects into the container and that is
  scoped to it: RunPod's pod-scoped ``RUNPOD_API_KEY`` + ``RUNPOD_POD_ID``
  (``DELETE /v2/pods/{id}``), Vast.ai's ``CONTAINER_API_KEY`` + ``CONTAINER_ID``
  (``DELETE /api/v0/instances/{id}/``). The user's account key is never placed on a node.
  The credential goes to curl on stdin (``-K -``), never in argv or a log. When the API
  refuses, the node powers off anyway (no GPU keeps working) and the client's watchdog and
  ``provisioner gc`` remain what deletes it.
* ``provisioner-deadman`` (every minute): once the deadline fixed at first boot passes,
  ``provisioner-teardown ttl``.
* ``provisioner-idle`` (every minute, when an idle timeout is set): idle means no scheduler
  job (``squeue`` empty; no running or pending GPU pod where this node can ask Kubernetes)
  AND every GPU at 0 % utilization (``nvidia-smi``); after that many minutes in a row,
  ``provisioner-teardown idle``. A check that cannot answer counts as busy: an unknown state
  never tears a cluster down (the TTL still bounds it).

Under cloud-init these run from systemd timers; under the script bootstrap (containers, SSH)
from background loops the bootstrap starts. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from provisioner.errors import PlanError
from provisioner.providers.descriptor import Teardown
from provisioner.providers.registry import facts
from provisioner.render.views import ClusterView, render_template

RUNPOD_API_URL = "https://api.runpod.io"
VASTAI_API_URL = "https://console.vast.ai"

TEARDOWN: Mapping[str, Teardown] = {name: found.teardown for name, found in facts().items()}
"""How each provider's clusters end (each provider package's ``FACTS.teardown``)."""


def teardown_for(provider: str) -> Teardown:
    """The row for ``provider``. PlanError for a provider the table does not know."""
    try:
        return TEARDOWN[provider]
    except KeyError:
        raise PlanError(f"no teardown mechanism is known for provider {provider!r}") from None


def render_teardown_scripts(view: ClusterView) -> dict[str, str]:
    """``{script name: text}``: ``teardown`` always; ``deadman`` with a TTL; ``idle`` with an idle timeout.

    Pure. Raises PlanError for a provider with no row in ``TEARDOWN``.
    """
    mechanism = teardown_for(view.provider)
    scripts = {
        "teardown": render_template(
            "cloud-init/teardown.sh.j2", c=view, t=mechanism, runpod_url=RUNPOD_API_URL, vastai_url=VASTAI_API_URL
        ),
    }
    if view.ttl_minutes:
        scripts["deadman"] = render_template("cloud-init/deadman.sh.j2", c=view)
    if view.idle_minutes:
        scripts["idle"] = render_template("cloud-init/idle.sh.j2", c=view)
    return scripts


__all__ = [
    "RUNPOD_API_URL",
    "TEARDOWN",
    "VASTAI_API_URL",
    "Teardown",
    "render_teardown_scripts",
    "teardown_for",
]
