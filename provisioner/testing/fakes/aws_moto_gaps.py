"""What moto lacks, answered by the AWS fake (``aws_ec2.AWSFake``): Spot price history, placement
groups, instance topology, Capacity Blocks (offerings, purchase, reservations), the Pricing API and
Service Quotas, in botocore's shapes. The behaviour is described in ``aws_ec2``'s docstring; the
state (prices, quotas, groups, blocks, live instances) lives on the fake, read through ``fake``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
import xml.etree.ElementTree as ET
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes import aws_shapes

if TYPE_CHECKING:
    from provisioner.testing.fakes.aws_ec2 import AWSFake

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
TOPOLOGY_FAMILIES = ("p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "trn1", "trn1n", "trn2")
"""Families DescribeInstanceTopology answers for (EC2 User Guide, "Amazon EC2 instance topology":
prerequisites; dated 2026-11-23, p6 UNVERIFIED); other instances are left out of its answer."""
PRICING_PAGE = 2
"""Price-list items per GetProducts page (AWS: at most 100), small so listings take several pages."""


class MotoGaps:
    """The handlers of the actions moto 5.2.5 does not answer (or answers wrongly) for ``fake``."""

    def __init__(self, fake: AWSFake) -> None:
        self.fake = fake

    def block_for(self, form: dict[str, str], wanted: int) -> tuple[dict[str, Any] | None, Response | None]:
        """The bought block a capacity-block launch targets, or EC2's refusal: the reservation must
        exist, be active, match the type and zone, and have room for ``wanted`` more instances."""
        fake = self.fake
        target = form.get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId", "")
        block = fake.reservations.get(target)
        if block is None:
            return None, fake.ec2_error(
                400, "InvalidCapacityReservationId.NotFound", f"The capacity reservation '{target}' does not exist"
            )
        zone = form.get("Placement.AvailabilityZone", block["zone"])
        if self.block_state(block) != "active":
            return None, fake.ec2_error(
                400, "InvalidCapacityReservationState", f"The capacity reservation '{target}' is not active"
            )
        if form.get("InstanceType") != block["kind"] or zone != block["zone"]:
            return None, fake.ec2_error(
                400,
                "InvalidParameterCombination",
                f"The instance type or zone does not match capacity reservation '{target}'",
            )
        if len(block["used"] & fake.live) + wanted > block["count"]:
            return None, fake.ec2_error(
                500,
                "InsufficientInstanceCapacity",
                f"There is no remaining capacity in capacity reservation '{target}'",
            )
        return block, None

    def block_state(self, block: dict[str, Any]) -> str:
        fake = self.fake
        now = fake.now() if fake.now is not None else None
        if now is not None and now >= block["end"]:
            return "expired"
        return "scheduled" if now is not None and now < block["start"] else "active"

    def spot_history(self, request: Request) -> Response:
        fake = self.fake
        _, _, form = fake._action(request)
        types = {v for k, v in form.items() if k.startswith("InstanceType.")}
        region = fake._region(request)
        items = "".join(
            f"<item><instanceType>{t}</instanceType><productDescription>Linux/UNIX</productDescription>"
            f"<spotPrice>{price}</spotPrice><timestamp>2026-11-22T00:00:00.000Z</timestamp>"
            f"<availabilityZone>{zone}</availabilityZone></item>"
            for (t, zone), price in sorted(fake.spot_prices.items())
            if (not types or t in types) and zone.startswith(region)
        )
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><DescribeSpotPriceHistoryResponse xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet>"
            "<nextToken></nextToken></DescribeSpotPriceHistoryResponse>"
        )
        return Response(body, status=200, mimetype="text/xml")

    def placement_group(self, request: Request) -> Response:
        """Create/Describe/DeletePlacementGroup (see the module docstring), in botocore's shapes."""
        fake = self.fake
        _, action, form = fake._action(request)
        params, _ = aws_shapes.decode_query(aws_shapes.operation("ec2", action), form)
        region, name = fake._region(request), str(params.get("GroupName", ""))
        key = (region, name)
        with fake.lock:
            if action == "CreatePlacementGroup":
                if key in fake.placement_groups:
                    return fake.ec2_error(
                        400, "InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists."
                    )
                tags = {
                    t["Key"]: t.get("Value", "")
                    for spec in params.get("TagSpecifications", [])
                    if spec.get("ResourceType") == "placement-group"
                    for t in spec.get("Tags", [])
                }
                fake.placement_groups[key] = {
                    "id": f"pg-{uuid.uuid4().hex[:17]}",
                    "name": name,
                    "strategy": params.get("Strategy", "cluster"),
                    "tags": tags,
                }
                found = [fake.placement_groups[key]]
            elif action == "DeletePlacementGroup":
                if key not in fake.placement_groups:
                    return fake.ec2_error(
                        400, "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown."
                    )
                if any(
                    i in fake.live and n["region"] == region and n["placement"].get("GroupName") == name
                    for i, n in fake.launch_network.items()
                ):
                    return fake.ec2_error(
                        400,
                        "InvalidPlacementGroup.InUse",
                        f"The placement group '{name}' is in use and may not be deleted.",
                    )
                del fake.placement_groups[key]
                found = []
            else:
                names, ids = set(params.get("GroupNames", [])), set(params.get("GroupIds", []))
                missing = sorted(names - {n for r, n in fake.placement_groups if r == region})
                if missing:
                    return fake.ec2_error(
                        400, "InvalidPlacementGroup.Unknown", f"The Placement Group '{missing[0]}' is unknown."
                    )
                found = [
                    g
                    for (r, _), g in sorted(fake.placement_groups.items())
                    if r == region
                    and (not names or g["name"] in names)
                    and (not ids or g["id"] in ids)
                    and all(group_field(g, f["Name"]) in f.get("Values", []) for f in params.get("Filters", []))
                ]
        fields = [placement_group_xml(g, region) for g in found]
        inner = {
            "CreatePlacementGroup": "".join(f"<placementGroup>{f}</placementGroup>" for f in fields),
            "DescribePlacementGroups": f"<placementGroupSet>{''.join(f'<item>{f}</item>' for f in fields)}"
            "</placementGroupSet>",
            "DeletePlacementGroup": "<return>true</return>",
        }[action]
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><{action}Response xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId>{inner}</{action}Response>"
        )
        return Response(body, status=200, mimetype="text/xml")

    def instance_topology(self, request: Request) -> Response:
        """DescribeInstanceTopology (moto 5.2.5 has none): live instances of topology families, each
        with ``network_nodes[id]`` or three layers made from its launch order (one spine per zone,
        a switch per four instances, a leaf per two)."""
        fake = self.fake
        _, _, form = fake._action(request)
        wanted = [v for k, v in sorted(form.items()) if k.startswith("InstanceId.")]
        order = list(fake.placement)
        items = []
        for instance_id in wanted or order:
            kind, zone = fake.placement.get(instance_id, ("", ""))
            if instance_id not in fake.live or kind.split(".", 1)[0] not in TOPOLOGY_FAMILIES:
                continue
            n = order.index(instance_id)
            spine = hashlib.sha1(zone.encode()).hexdigest()[:9]
            nodes = fake.network_nodes.get(instance_id) or [
                f"nn-{spine}{0:08x}",
                f"nn-{spine}{1 + n // 4:08x}",
                f"nn-{spine}{0x1000 + n // 2:08x}",
            ]
            layers = "".join(f"<item>{node}</item>" for node in nodes)
            items.append(
                f"<item><instanceId>{instance_id}</instanceId><instanceType>{kind}</instanceType>"
                f"<networkNodeSet>{layers}</networkNodeSet><availabilityZone>{zone}</availabilityZone>"
                f"<zoneId>use1-az{1 + ord(zone[-1:] or 'a') - ord('a')}</zoneId></item>"
            )
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><DescribeInstanceTopologyResponse xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId><instanceSet>{''.join(items)}</instanceSet>"
            "</DescribeInstanceTopologyResponse>"
        )
        return Response(body, status=200, mimetype="text/xml")

    def capacity_block_offerings(self, request: Request) -> Response:
        """DescribeCapacityBlockOfferings (moto has none): one offering per zone of the region in
        ``capacity_blocks`` for the asked type, count and hours, from ``block_start``."""
        fake = self.fake
        _, _, form = fake._action(request)
        kind, region = form.get("InstanceType", ""), fake._region(request)
        count, hours = int(form.get("InstanceCount") or 1), int(form.get("CapacityDurationHours") or 24)
        start = fake.block_start
        end = start + dt.timedelta(hours=hours)
        items = "".join(
            f"<item><capacityBlockOfferingId>cb-{hashlib.sha1(f'{kind}{zone}{count}{hours}'.encode()).hexdigest()[:17]}"
            f"</capacityBlockOfferingId><instanceType>{kind}</instanceType><availabilityZone>{zone}</availabilityZone>"
            f"<instanceCount>{count}</instanceCount><startDate>{start:%Y-%m-%dT%H:%M:%S.000Z}</startDate>"
            f"<endDate>{end:%Y-%m-%dT%H:%M:%S.000Z}</endDate><capacityBlockDurationHours>{hours}"
            f"</capacityBlockDurationHours><upfrontFee>{Decimal(rate) * count * hours}</upfrontFee>"
            f"<currencyCode>USD</currencyCode><tenancy>default</tenancy></item>"
            for (t, zone), rate in sorted(fake.capacity_blocks.items())
            if t == kind and zone.startswith(region)
        )
        for (t, zone), rate in sorted(fake.capacity_blocks.items()):
            if t == kind and zone.startswith(region):
                offering = f"cb-{hashlib.sha1(f'{kind}{zone}{count}{hours}'.encode()).hexdigest()[:17]}"
                fake.offerings[offering] = {
                    "kind": kind,
                    "zone": zone,
                    "region": region,
                    "count": count,
                    "hours": hours,
                    "start": start,
                    "end": end,
                    "fee": Decimal(rate) * count * hours,
                }
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><DescribeCapacityBlockOfferingsResponse '
            f'xmlns="{EC2_NS}"><requestId>{uuid.uuid4()}</requestId><capacityBlockOfferingSet>{items}'
            "</capacityBlockOfferingSet></DescribeCapacityBlockOfferingsResponse>"
        )
        return Response(body, status=200, mimetype="text/xml")

    def purchase_capacity_block(self, request: Request) -> Response:
        """PurchaseCapacityBlock (moto has none): buys an offering this fake answered, once; the block
        is a capacity reservation of type capacity-block carrying the request's tags."""
        fake = self.fake
        _, _, form = fake._action(request)
        offering = fake.offerings.get(form.get("CapacityBlockOfferingId", ""))
        if offering is None or offering["region"] != fake._region(request):
            return fake.ec2_error(
                400,
                "InvalidCapacityBlockOfferingId.NotFound",
                f"The Capacity Block offering '{form.get('CapacityBlockOfferingId', '')}' does not exist",
            )
        tags = {
            form[k]: form.get(k[:-3] + "Value", "")
            for k in form
            if k.startswith("TagSpecification.") and k.endswith(".Key")
        }
        reservation_id = f"cr-{uuid.uuid4().hex[:17]}"
        with fake.lock:
            fake.reservations[reservation_id] = {
                **offering,
                "id": reservation_id,
                "tags": tags,
                "used": set(),
                "block_id": f"cb-{uuid.uuid4().hex[:17]}",
            }
        fake.costs.bought_block(tags, offering["fee"])
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><PurchaseCapacityBlockResponse xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId><capacityReservation>"
            f"{self.reservation_xml(fake.reservations[reservation_id])}</capacityReservation>"
            "</PurchaseCapacityBlockResponse>"
        )
        return Response(body, status=200, mimetype="text/xml")

    def capacity_reservations(self, request: Request) -> Response:
        """DescribeCapacityReservations of the blocks bought here, by id or by the ``tag:KEY`` and
        ``state`` / ``capacity-reservation-id`` filters the adapter sends."""
        fake = self.fake
        _, _, form = fake._action(request)
        filters: dict[str, set[str]] = {}
        for key, name in form.items():
            if key.startswith("Filter.") and key.endswith(".Name"):
                prefix = key[:-5]
                filters[name] = {v for k, v in form.items() if k.startswith(f"{prefix}.Value.")}
        ids = {v for k, v in form.items() if k.startswith("CapacityReservationId.")}
        region = fake._region(request)
        items = []
        for block in list(fake.reservations.values()):
            fields = {
                "state": self.block_state(block),
                "capacity-reservation-id": block["id"],
                **{f"tag:{k}": v for k, v in block["tags"].items()},
            }
            if block["region"] != region or (ids and block["id"] not in ids):
                continue
            if all(fields.get(name) in values for name, values in filters.items()):
                items.append(f"<item>{self.reservation_xml(block)}</item>")
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><DescribeCapacityReservationsResponse '
            f'xmlns="{EC2_NS}"><requestId>{uuid.uuid4()}</requestId><capacityReservationSet>{"".join(items)}'
            "</capacityReservationSet></DescribeCapacityReservationsResponse>"
        )
        return Response(body, status=200, mimetype="text/xml")

    def reservation_xml(self, block: dict[str, Any]) -> str:
        fake = self.fake
        used = len(block["used"] & fake.live)
        tags = "".join(
            f"<item><key>{xml_text(k)}</key><value>{xml_text(v)}</value></item>"
            for k, v in sorted(block["tags"].items())
        )
        return (
            f"<capacityReservationId>{block['id']}</capacityReservationId><ownerId>123456789012</ownerId>"
            f"<instanceType>{block['kind']}</instanceType><instancePlatform>Linux/UNIX</instancePlatform>"
            f"<availabilityZone>{block['zone']}</availabilityZone><tenancy>default</tenancy>"
            f"<totalInstanceCount>{block['count']}</totalInstanceCount>"
            f"<availableInstanceCount>{block['count'] - used}</availableInstanceCount>"
            f"<state>{self.block_state(block)}</state>"
            f"<startDate>{block['start']:%Y-%m-%dT%H:%M:%S.000Z}</startDate>"
            f"<endDate>{block['end']:%Y-%m-%dT%H:%M:%S.000Z}</endDate><endDateType>limited</endDateType>"
            f"<instanceMatchCriteria>targeted</instanceMatchCriteria><reservationType>capacity-block"
            f"</reservationType><capacityBlockId>{block['block_id']}</capacityBlockId><tagSet>{tags}</tagSet>"
        )

    def get_products(self, request: Request) -> Response:
        fake = self.fake
        body = fake.body(request)
        if body.get("ServiceCode") != "AmazonEC2":
            return fake.error_reply("not_found")
        terms = {f["Field"]: f["Value"] for f in body.get("Filters", []) if f.get("Type") == "TERM_MATCH"}
        items = [
            price_list_item(t, r, Decimal(p))
            for (t, r), p in sorted(fake.on_demand_prices.items())
            if terms.get("instanceType", t) == t and terms.get("regionCode", r) == r
        ]
        start = int(body.get("NextToken") or 0)
        size = min(int(body.get("MaxResults") or PRICING_PAGE), PRICING_PAGE)
        answer: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": items[start : start + size]}
        if start + size < len(items):
            answer["NextToken"] = str(start + size)
        return fake.json(answer, headers={"x-amzn-RequestId": str(uuid.uuid4())})

    def get_service_quota(self, request: Request) -> Response:
        fake = self.fake
        body = fake.body(request)
        region, code = fake._region(request), str(body.get("QuotaCode", ""))
        if body.get("ServiceCode") != "ec2" or (region, code) not in fake.quotas:
            return fake.error_reply("not_found", message=f"quota {code} not found in {region}")
        return fake.json(
            {
                "Quota": {
                    "ServiceCode": "ec2",
                    "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                    "QuotaCode": code,
                    "QuotaArn": f"arn:aws:servicequotas:{region}:123456789012:ec2/{code}",
                    "QuotaName": code,
                    "Value": fake.quotas[(region, code)],
                    "Unit": "None",
                    "Adjustable": True,
                    "GlobalQuota": False,
                }
            }
        )


def price_list_item(instance_type: str, region: str, usd_per_hour: Decimal) -> str:
    """One Pricing API ``PriceList`` entry (a JSON string) for a Linux on-demand price."""
    sku = hashlib.sha1(f"{instance_type}{region}".encode()).hexdigest()[:16].upper()
    term = f"{sku}.JRTCKXETXF"
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "sku": sku,
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": region,
                    "operatingSystem": "Linux",
                    "tenancy": "Shared",
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                    "marketoption": "OnDemand",
                },
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    term: {
                        "offerTermCode": "JRTCKXETXF",
                        "sku": sku,
                        "effectiveDate": dt.date(2026, 11, 1).isoformat(),
                        "priceDimensions": {
                            f"{term}.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": f"{usd_per_hour:.10f}"},
                                "description": f"${usd_per_hour} per On Demand Linux {instance_type}",
                            }
                        },
                    }
                }
            },
            "version": "20261101000000",
            "publicationDate": "2026-11-01T00:00:00Z",
        }
    )


def parse_xml(body: bytes) -> tuple[ET.Element, str]:
    """The XML root and its namespace as an ElementTree prefix (``{uri}``); the namespace is
    registered as the default so the document serializes back without ``ns0:`` prefixes."""
    root = ET.fromstring(body)
    uri = root.tag[1:].split("}", 1)[0] if root.tag.startswith("{") else ""
    ET.register_namespace("", uri)
    return root, f"{{{uri}}}" if uri else ""


def placement_group_xml(group: dict[str, Any], region: str) -> str:
    """The fields of one ``PlacementGroup`` in EC2's XML."""
    tags = "".join(
        f"<item><key>{xml_text(k)}</key><value>{xml_text(v)}</value></item>" for k, v in sorted(group["tags"].items())
    )
    return (
        f"<groupName>{xml_text(group['name'])}</groupName><state>available</state><strategy>{group['strategy']}"
        f"</strategy><groupId>{group['id']}</groupId><tagSet>{tags}</tagSet>"
        f"<groupArn>arn:aws:ec2:{region}:123456789012:placement-group/{xml_text(group['name'])}</groupArn>"
    )


def group_field(group: dict[str, Any], name: str) -> str | None:
    """A placement group's value for a DescribePlacementGroups filter name."""
    if name.startswith("tag:"):
        tag: str | None = group["tags"].get(name[4:])
        return tag
    return {"group-name": group["name"], "strategy": group["strategy"], "state": "available", "group-arn": None}.get(
        name
    )


def xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


__all__ = ["EC2_NS", "PRICING_PAGE", "TOPOLOGY_FAMILIES", "MotoGaps", "parse_xml", "price_list_item", "xml_text"]
