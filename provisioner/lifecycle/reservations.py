"""A reservation bought for a cluster before its nodes (an EC2 Capacity Block), for both engines.

A Capacity Block plan (``Offer.block_hours``, ranked under ``pricing.reservations``) is paid
upfront, in full, and cannot be cancelled. Both engines buy it through the same adapter method
(``SupportsReservations.reserve``: adopt the cluster's block by its tag or buy one, then wait
until it is active) and say the same things about it:

- ``block_fields(plan)`` (``provisioner.realize.nodes``): what each ``NodeSpec`` of such a plan asks for.
- ``reserve(plan, runtime, expires_at)``: the pulumi engine's step before ``pulumi up`` (the
  direct engine's ``create_nodes`` takes the same path inside the adapter). Returns the
  reservation, or None for a plan that asks for none.
- ``report_left(runtime, adapter, cluster_id, name)``: after ``down``, one ``reservation`` event
  per reservation that outlives the cluster (what remains, already paid, until when).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from provisioner.errors import PlanError
from provisioner.providers.base import NodeSpec, Provider, Reservation, SupportsReservations, owner_id
from provisioner.realize.inputs import RunFacts, bare_specs
from provisioner.realize.nodes import block_fields

if TYPE_CHECKING:
    from provisioner.lifecycle.realize import Runtime
    from provisioner.plan import Plan


def reservation_specs(plan: Plan, expires_at: dt.datetime | None) -> list[NodeSpec]:
    """The nodes of a Capacity Block plan as the purchase needs them: the realize input's specs less
    boot data and key (``realize.inputs.bare_specs``; the block is bought for the type, zone, count
    and length). Empty for other plans. Pure."""
    if not block_fields(plan):
        return []
    return bare_specs(plan, RunFacts(owner_id(), expires_at))


def reserve(plan: Plan, runtime: Runtime, expires_at: dt.datetime | None) -> Reservation | None:
    """The reservation ``plan`` launches into, adopted or bought through its adapter's ``reserve``;
    None when the plan asks for none (nothing is called then). Blocks until the reservation is
    active (a block that starts later: until its start). Signals are held meanwhile, as during the
    direct engine's purchase. Raises PlanError when the adapter cannot buy reservations, and what
    the adapter raises (PlanError/CapacityError before a purchase, ProviderError saying what was
    bought after one)."""
    specs = reservation_specs(plan, expires_at)
    if not specs:
        return None
    name = plan.option.provider
    adapter = runtime.provider(name)
    if not isinstance(adapter, SupportsReservations):
        raise PlanError(
            f"the plan is a reservation bought upfront but the {name} adapter cannot buy one; nothing was bought"
        )
    offer = plan.option.offer
    runtime.emit(
        "reserve",
        message=f"reserving {len(specs)} x {plan.option.instance_type} on {name} "
        f"{plan.option.region} for {offer.block_hours} h (paid upfront, non-refundable; a block that "
        f"starts later is waited for) for cluster {plan.cluster_id}",
        cluster=plan.cluster_id,
        provider=name,
        hours=offer.block_hours,
        nodes=len(specs),
    )
    runtime.touched.add(name)
    with runtime.held():
        reservation = adapter.reserve(plan.cluster_id, specs)
    runtime.emit(
        "reserved",
        message=f"launching into reservation {reservation.reservation_id}",
        cluster=plan.cluster_id,
        provider=name,
        reservation=reservation.reservation_id,
    )
    return reservation


def report_left(runtime: Runtime, adapter: Provider, cluster_id: str, name: str) -> list[str]:
    """Emit a ``reservation`` event for each reservation of the cluster that outlives its nodes (an
    adapter without reservations has none). Read-only; returns the notes."""
    if not isinstance(adapter, SupportsReservations):
        return []
    notes = adapter.reservations_left(cluster_id)
    for note in notes:
        runtime.emit("reservation", message=note, cluster=cluster_id, provider=name)
    return notes


__all__ = ["block_fields", "report_left", "reservation_specs", "reserve"]
