"""The one PlanNode -> NodeSpec builder both engines use, and the facts it rests on. Pure.

``node_specs(plan, rendered, ...)`` builds the specs ``realize.inputs.realize_input`` gives
both engines: what the direct engine hands ``create_nodes`` and what the Pulumi stack's
``NeocloudNodes`` resource sends through the same adapter, so both engines buy the same nodes
with the same requests (tests/test_engine_matrix.py compares the create requests field by
field). Every NodeSpec carries the node's role and bootstrap method as typed fields: an adapter
never guesses them from the user data's first bytes.

- ``expiry_for(plan, now, ttl_s)``: now + the TTL (whole seconds, rounded up), or None;
- ``user_data_path(bootstrap, role)``: the rendered file a node boots with (None: over SSH);
- ``boot_text(node, text)``: that file as the node gets it (a script exports the node's name);
- ``login_user(provider)``: who the provider's image lets in first (root in containers).
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from provisioner.capabilities import Bootstrap
from provisioner.plan import Plan, PlanNode
from provisioner.providers.base import NodeSpec
from provisioner.providers.registry import facts
from provisioner.render.cloudinit import HOSTKEY_TOKEN_SLOT


def login_user(provider: str) -> str:
    """Who ``provider``'s images let in first (its ``FACTS.login_user``); ``ubuntu`` for an unknown name."""
    found = facts().get(provider)
    return found.login_user if found is not None else "ubuntu"


def expiry_for(plan: Plan, now: dt.datetime, ttl_s: float | None = None) -> dt.datetime | None:
    """``now`` + ``ttl_s`` (else the spec's ``lifetime.ttl_hours``), whole seconds rounded up; None without."""
    if ttl_s is None and plan.spec.lifetime.ttl_hours is not None:
        ttl_s = plan.spec.lifetime.ttl_hours * 3600
    return None if ttl_s is None else now + dt.timedelta(seconds=math.ceil(ttl_s))


def user_data_path(bootstrap: Bootstrap, role: str) -> str | None:
    """Which rendered file a node of ``role`` boots with, or None (bootstrapped over SSH)."""
    if bootstrap is Bootstrap.CLOUD_INIT:
        return f"cloud-init/{role}.yaml"
    if bootstrap is Bootstrap.SCRIPT:
        return f"bootstrap/{role}.sh"
    return None


def boot_text(node: PlanNode, text: str, hostkey_token: str | None = None) -> str:
    """``text`` (the file ``user_data_path`` names) as ``node`` boots with it: an entrypoint script
    gets the node's name exported after its first line (a container learns it nowhere else; names
    are SAFE_IDs, so no quoting is needed); ``hostkey_token`` (``realize.hostkeys``: 64 hex digits)
    fills the host key token slot. ValueError for a malformed token or a text without one slot."""
    if hostkey_token is not None:
        text = _fill_slot(node, text, hostkey_token)
    if node.bootstrap is not Bootstrap.SCRIPT:
        return text
    first, _, rest = text.partition("\n")
    return f'{first}\nexport PROVISIONER_NODE_NAME="${{PROVISIONER_NODE_NAME:-{node.name}}}"\n{rest}'


def _fill_slot(node: PlanNode, text: str, token: str) -> str:
    if len(token) != 64 or any(c not in "0123456789abcdef" for c in token):
        raise ValueError("a host key token is 64 lower-case hex digits")
    slot, filled = HOSTKEY_TOKEN_SLOT, token
    if node.bootstrap is Bootstrap.SCRIPT:  # the script embeds each file in base64, one line
        slot, filled = (f"\n{base64.b64encode(value.encode()).decode()}\n" for value in (slot, token))
    if text.count(slot) != 1:
        raise ValueError(f"the boot file of {node.name} has no host key token slot")
    return text.replace(slot, filled)


def block_fields(plan: Plan) -> dict[str, Any]:
    """What a node of a Capacity Block plan asks its adapter for: the block's length and the planned
    price per node-hour (the most the purchase may cost). Empty for other plans."""
    offer = plan.option.offer
    if not offer.block_hours:
        return {}
    return {"capacity_block_hours": offer.block_hours, "capacity_block_usd_per_hour": offer.price_per_hour_usd}


def node_spec(
    node: PlanNode,
    *,
    user_data: str | None,
    ssh_public_key: str | None,
    expires_at: dt.datetime | None,
    owner: str | None = None,
    block: Mapping[str, Any] | None = None,
    lease: str | None = None,
    run: str | None = None,
) -> NodeSpec:
    """The NodeSpec of one planned node. ``user_data`` is the node's ``boot_text`` (None for an SSH
    bootstrap); ``owner`` None lets the adapter use ``owner_id()``; ``block``: ``block_fields(plan)``;
    ``lease``: the create's lease mark (``providers.ownership.LeaseMark.token()``); ``run``: the
    bring-up's run id (``lifecycle.state.new_run_id``), the node's run mark."""
    return NodeSpec(
        name=node.name,
        role=node.role,
        bootstrap=node.bootstrap,
        instance_type=node.instance_type,
        region=node.region,
        zone=node.zone,
        offer_id=node.offer_id,
        gpus=node.gpus,
        spot=node.spot,
        ssh_public_key=ssh_public_key,
        user_data=user_data,
        expires_at=expires_at,
        owner=owner,
        lease=lease,
        run=run,
        **(block or {}),
    )


def node_specs(
    plan: Plan,
    rendered: Mapping[str, str],
    *,
    ssh_public_key: str | None,
    expires_at: dt.datetime | None,
    owner: str | None = None,
    hostkey_tokens: Mapping[str, str] | None = None,
    lease: str | None = None,
    run: str | None = None,
) -> list[NodeSpec]:
    """One NodeSpec per planned node, in plan order (head first), with the user data its bootstrap
    method needs from ``rendered`` (path -> text) and its host key token (``hostkey_tokens``, node
    name -> token; ``realize.hostkeys``). KeyError when a needed file is missing. The engines build
    their specs through ``realize.inputs.realize_input``, which renders and calls this."""
    specs = []
    tokens = hostkey_tokens or {}
    for node in plan.nodes:
        path = user_data_path(node.bootstrap, node.role)
        text = boot_text(node, rendered[path], tokens.get(node.name)) if path else None
        specs.append(
            node_spec(
                node,
                user_data=text,
                ssh_public_key=ssh_public_key,
                expires_at=expires_at,
                owner=owner,
                block=block_fields(plan),
                lease=lease,
                run=run,
            )
        )
    return specs


__all__ = ["block_fields", "boot_text", "expiry_for", "login_user", "node_spec", "node_specs", "user_data_path"]
