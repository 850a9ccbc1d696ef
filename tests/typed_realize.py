"""What must never be ``Any`` in the realize core: checked by mypy (``python -m tests.typecheck``, run by
tests/test_style.py), never run. ``assert_type`` fails when an expression is ``Any`` (an import mypy
could not follow, an untyped function), which is how ``NodeSpec`` went unnoticed as ``Any`` when
mypy saw ``provisioner/`` without ``providers/``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Literal, assert_type

from provisioner.catalog_model import Catalog
from provisioner.offer import Offer
from provisioner.plan import Option, Plan, PlanNode
from provisioner.providers.aws.provider import AWSProvider
from provisioner.providers.base import Node, NodeSpec, OfferQuery, Provider
from provisioner.providers.fluence.provider import FluenceProvider
from provisioner.providers.gcp.provider import GCPProvider
from provisioner.providers.lambda_.provider import LambdaProvider
from provisioner.providers.runpod.provider import RunPodProvider
from provisioner.providers.vastai.provider import VastAIProvider
from provisioner.realize.nodes import block_fields, boot_text, expiry_for, node_spec, node_specs
from provisioner.spec import ClusterSpec

Adapter = AWSProvider | GCPProvider | LambdaProvider | RunPodProvider | VastAIProvider | FluenceProvider


def plan_and_nodes(plan: Plan, node: PlanNode, rendered: Mapping[str, str], now: dt.datetime) -> None:
    assert_type(plan.nodes, tuple[PlanNode, ...])
    assert_type(plan.spec, ClusterSpec)
    assert_type(plan.option, Option)
    assert_type(plan.cluster_id, str)
    assert_type(node.name, str)
    assert_type(node.role, Literal["head", "worker"])
    assert_type(node.gpus, int)
    assert_type(expiry_for(plan, now), dt.datetime | None)
    assert_type(boot_text(node, "x"), str)
    specs = node_specs(plan, rendered, ssh_public_key=None, expires_at=None)
    assert_type(specs, list[NodeSpec])
    assert_type(
        node_spec(node, user_data=None, ssh_public_key=None, expires_at=None, block=block_fields(plan)), NodeSpec
    )


def node_spec_fields(spec: NodeSpec) -> None:
    assert_type(spec.name, str)
    assert_type(spec.instance_type, str)
    assert_type(spec.region, str)
    assert_type(spec.gpus, int)
    assert_type(spec.spot, bool)
    assert_type(spec.user_data, str | None)
    assert_type(spec.capacity_block_usd_per_hour, Decimal | None)


def through_the_protocol(provider: Provider, spec: NodeSpec, query: OfferQuery) -> None:
    assert_type(provider.list_offers(query), list[Offer])
    assert_type(provider.create_nodes("c", [spec]), list[Node])
    assert_type(provider.get_nodes("c"), list[Node])
    assert_type(provider.delete_nodes("c"), None)
    assert_type(provider.check_credentials(), None)


def through_each_adapter(adapter: Adapter, spec: NodeSpec, query: OfferQuery) -> None:
    """The union of the six classes: one of them returning Any makes the union's result Any-bearing."""
    assert_type(adapter.list_offers(query), list[Offer])
    assert_type(adapter.create_nodes("c", [spec]), list[Node])
    assert_type(adapter.get_nodes("c"), list[Node])
    assert_type(adapter.delete_nodes("c"), None)
    assert_type(adapter.check_credentials(), None)
    protocol: Provider = adapter  # each class satisfies the Protocol
    assert_type(protocol, Provider)


def catalog(found: Catalog) -> None:
    assert_type(found.offers, list[Offer])
