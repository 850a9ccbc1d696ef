"""A fake AWS endpoint for the AWS adapter: EC2 answered by moto, plus what moto lacks.

One WSGI app (a ``FakeApp``) on one URL, like ``endpoint_url`` pointing every boto3 client at
it. Requests are dispatched by action (EC2 ``Action=`` form field, or the JSON protocol's
``X-Amz-Target``):

- EC2 instances, key pairs, instance types and offerings are forwarded to moto's own WSGI
  app in process (moto 5.2.5, ``EC2_ENABLE_INSTANCE_TYPE_VALIDATION`` on), so their
  semantics are moto's. On top the fake adds what the contract suite needs: faults,
  capacity limits (``InsufficientInstanceCapacity``), slow boots (a running instance is shown
  ``pending`` until polled enough), the call log and the ``Bought`` record of each launch;
  a terminated instance's Elastic IP is disassociated, as EC2 does (moto keeps it associated).
  The handlers of what moto lacks (below) are in ``aws_moto_gaps``:
- ``DescribeCapacityBlockOfferings`` (moto has none) from ``capacity_blocks``;
  ``PurchaseCapacityBlock`` buys one of the offerings it answered and ``DescribeCapacityReservations``
  lists what was bought (``scheduled`` until the fake clock ``now`` reaches its start, else
  ``active``); a RunInstances with MarketType capacity-block must target an active block of its
  type and zone with room left (EC2's refusals otherwise), then goes to moto;
- ``CreatePlacementGroup`` / ``DescribePlacementGroups`` / ``DeletePlacementGroup`` (moto 5.2.5 answers
  the first with 500) from ``placement_groups``: tagged at creation, filtered by ``tag:KEY``,
  ``group-name``, ``strategy`` and ``state``; a duplicate name is ``InvalidPlacementGroup.Duplicate``,
  an unknown one ``InvalidPlacementGroup.Unknown``, deleting one a live instance was launched into
  ``InvalidPlacementGroup.InUse`` (EC2's refusals). A RunInstances naming an unknown group is refused
  before moto (which drops ``Placement.GroupName`` and reports every interface as ``interface`` on
  card 0), and ``launch_network`` records each launch's ``Placement``, ``NetworkInterfaces`` and
  ``MetadataOptions`` as sent (decoded against botocore's RunInstances shape);
- ``DescribeInstanceTopology`` (moto has none) is answered from what the fake launched
  (``network_nodes`` overrides the made-up layers);
- ``DescribeSpotPriceHistory`` is answered from ``spot_prices`` (moto's are placeholders,
  ``0.00001`` dated 2006), ``pricing.GetProducts`` from ``on_demand_prices`` (moto has no
  Pricing backend) and ``service-quotas.GetServiceQuota`` from ``quotas`` (moto knows no
  EC2 quota codes), all in the real botocore shapes.

Every request is decoded against botocore's input shape for its operation (unknown
parameters and bad types are validation errors), and every answer the fake writes or moto
returns is parsed by botocore's parser and checked against the output shape
(``aws_shapes``). Authentication is real SigV4: the fake recomputes the signature with
``api_key`` as the secret access key, so a wrong secret is ``AuthFailure``.

Throttling faults answer HTTP 429 (the contract suite's convention); EC2 itself answers
``RequestLimitExceeded`` with 503 (the AWS tests cover that mapping separately).
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import gzip
import json
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes import aws_shapes
from provisioner.testing.fakes.aws_billing import CostExplorer
from provisioner.testing.fakes.aws_moto import STATIC, STATIC_VALID, Moto
from provisioner.testing.fakes.aws_moto_gaps import (
    TOPOLOGY_FAMILIES,
    MotoGaps,
    parse_xml,
    price_list_item,
    xml_text,
)
from provisioner.testing.fakes.aws_protocol import (
    EC2_ERRORS,
    JSON_ERRORS,
    request_region,
    reset_moto,
    sigv4_ok,
    warm_up,
)
from provisioner.testing.fakes.base import Bought, FakeApp, _Route

DEFAULT_ON_DEMAND = {
    ("p5.48xlarge", "us-east-1"): "55.0400000000",
    ("p4d.24xlarge", "us-east-1"): "21.9576000000",
    ("p5en.48xlarge", "us-east-1"): "63.2960000000",
    ("g6e.xlarge", "us-east-1"): "1.8610000000",
    ("p5.48xlarge", "us-west-2"): "55.0400000000",
}
"""USD/hour, Linux, shared tenancy (provider-apis.md 5.1, fixture data, not truth)."""
DEFAULT_SPOT = {
    ("p5.48xlarge", "us-east-1a"): "27.2010",
    ("p5.48xlarge", "us-east-1b"): "29.5000",
    ("p4d.24xlarge", "us-east-1a"): "8.7800",
    ("g6e.xlarge", "us-east-1a"): "0.7702",
}
DEFAULT_QUOTAS = {
    ("us-east-1", "L-417A185B"): 384.0,
    ("us-east-1", "L-DB2E81BA"): 64.0,
    ("us-east-1", "L-C4BD4855"): 0.0,
    ("us-east-1", "L-7212CCBC"): 96.0,
    ("us-east-1", "L-3819A6DF"): 32.0,
}

DEFAULT_BLOCKS = {
    ("p5.48xlarge", "us-east-1a"): "31.464",
    ("p5.48xlarge", "us-east-1b"): "33.10",
    ("p4d.24xlarge", "us-east-1a"): "11.80",
}
"""Capacity Blocks for ML on offer: (type, zone) -> USD per instance-hour (fixture data, not truth)."""
_PLACEMENT_ACTIONS = ("CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup")
_KINDS = {
    "DescribeInstanceTypes": "offers",
    "DescribeInstances": "list",
    "RunInstances": "launch",
    "TerminateInstances": "delete",
    "ImportKeyPair": "keys",
    "DescribeKeyPairs": "keys",
}


class AWSFake(FakeApp):
    """See the module docstring. ``api_key`` is the secret access key requests must be signed with."""

    provider = "aws"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        on_demand_prices: dict[tuple[str, str], str] | None = None,
        spot_prices: dict[tuple[str, str], str] | None = None,
        quotas: dict[tuple[str, str], float] | None = None,
        capacity_blocks: dict[tuple[str, str], str] | None = None,
        block_start: dt.datetime = dt.datetime(2026, 11, 25, 11, 30, tzinfo=dt.UTC),
        now: Callable[[], dt.datetime] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(api_key=api_key, **kwargs)
        self.openapi = object()  # validation is on: botocore shapes, see _validate_request/_validate_response
        self.validation_note = "validating against botocore service models"
        self.on_demand_prices = dict(DEFAULT_ON_DEMAND if on_demand_prices is None else on_demand_prices)
        self.spot_prices = dict(DEFAULT_SPOT if spot_prices is None else spot_prices)
        self.quotas = dict(DEFAULT_QUOTAS if quotas is None else quotas)
        self.capacity_blocks = dict(DEFAULT_BLOCKS if capacity_blocks is None else capacity_blocks)
        self.block_start = block_start
        self.now = now
        """The fake's clock for Capacity Blocks: a bought block is ``scheduled`` until ``now()`` reaches
        its start, then ``active``; None: active at once."""
        self.offerings: dict[str, dict[str, Any]] = {}
        """Capacity Block offerings answered so far, by id (what PurchaseCapacityBlock may buy)."""
        self.reservations: dict[str, dict[str, Any]] = {}
        """Capacity Blocks bought: reservation id -> offering fields, tags, ``used`` instance ids."""
        self.key_material: dict[str, str] = {}
        self.live: set[str] = set()
        self.placement: dict[str, tuple[str, str]] = {}
        """instance id -> (instance type, availability zone), recorded at launch."""
        self.network_nodes: dict[str, list[str]] = {}
        self.placement_groups: dict[tuple[str, str], dict[str, Any]] = {}
        """(region, group name) -> {id, strategy, tags}: the placement groups created here."""
        self.launch_network: dict[str, dict[str, Any]] = {}
        """instance id -> {"placement": RunInstances' Placement, "interfaces": its NetworkInterfaces},
        as the request sent them (moto keeps neither)."""
        """instance id -> NetworkNodes to answer (outermost first); default: three layers from launch order."""
        self.moto = Moto(self.lock)  # fakes.aws_moto: moto's app in process, its addresses masked
        reset_moto()  # a fresh fake is a fresh cloud: no key pairs or instances of earlier fakes
        warm_up()
        self._local = threading.local()
        self.gaps = MotoGaps(self)  # fakes.aws_moto_gaps: the actions moto lacks
        for action, kind in _KINDS.items():
            self.route("POST", "/", self._forward, kind=kind, name=action)
        self.route("POST", "/", self.gaps.spot_history, kind="other", name="DescribeSpotPriceHistory")
        self.route("POST", "/", self.gaps.get_products, kind="other", name="GetProducts")
        self.route("POST", "/", self.gaps.get_service_quota, kind="other", name="GetServiceQuota")
        self.costs = CostExplorer(self)  # fakes.aws_billing: what the clock ran, and GetCostAndUsage
        self.route("POST", "/", self.gaps.instance_topology, kind="list", name="DescribeInstanceTopology")
        self.route("POST", "/", self.gaps.capacity_block_offerings, kind="other", name="DescribeCapacityBlockOfferings")
        self.route("POST", "/", self.gaps.purchase_capacity_block, kind="other", name="PurchaseCapacityBlock")
        self.route("POST", "/", self.gaps.capacity_reservations, kind="list", name="DescribeCapacityReservations")
        for action in _PLACEMENT_ACTIONS:
            self.route("POST", "/", self.gaps.placement_group, kind="other", name=action)
        self.route("POST", "/", self._forward, kind="other", name="ec2")

    # ----- dispatch -------------------------------------------------------------------------
    def _action(self, request: Request) -> tuple[str, str, dict[str, Any]]:
        """(service, action, params) of a request; params decoded per the botocore shape."""
        target = request.headers.get("X-Amz-Target", "")
        if target:
            service = {"AWSPriceListService": "pricing", "AWSInsightsIndexService": "ce"}.get(
                target.split(".", 1)[0], "service-quotas"
            )
            return service, target.rsplit(".", 1)[-1], self.body(request)
        form = dict(parse_qsl(request.get_data(as_text=True), keep_blank_values=True))
        return "ec2", form.get("Action", ""), form

    def _match(self, request: Request) -> tuple[_Route | None, dict[str, str]]:
        service, action, _ = self._action(request)
        self._local.service = service
        wanted = (
            action
            if action in _KINDS
            or action
            in (
                "DescribeSpotPriceHistory",
                "GetProducts",
                "GetCostAndUsage",
                "GetServiceQuota",
                "DescribeInstanceTopology",
                "DescribeCapacityBlockOfferings",
                "PurchaseCapacityBlock",
                "DescribeCapacityReservations",
                *_PLACEMENT_ACTIONS,
            )
            else "ec2"
        )
        for route in self._routes:
            if route.name == wanted:
                return route, {}
        return None, {}

    def auth_ok(self, request: Request) -> bool:
        """Whether the SigV4 signature matches one computed with ``api_key`` as the secret."""
        return self.api_key is None or sigv4_ok(request, self.api_key)

    def _region(self, request: Request) -> str:
        return request_region(request)

    # ----- errors ---------------------------------------------------------------------------
    def error_reply(self, kind: str, *, status: int | None = None, message: str | None = None) -> Response:
        service = getattr(self._local, "service", "ec2")
        if service == "ec2":
            default = EC2_ERRORS.get(
                kind,
                (
                    status or 500,
                    "ServiceUnavailable" if (status or 500) >= 502 else "InternalError",
                    "An internal error has occurred",
                ),
            )
            code_status, code, text = default
            return self.ec2_error(status or code_status, code, message or text)
        code_status, code, text = JSON_ERRORS.get(kind, (status or 500, "ServiceException", "internal error"))
        return self.json(
            {"__type": code, "message": message or text}, status or code_status, headers={"x-amzn-ErrorType": code}
        )

    @staticmethod
    def ec2_error(status: int, code: str, message: str) -> Response:
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
            f"<Message>{xml_text(message)}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
        )
        return Response(body, status=status, mimetype="text/xml")

    # ----- validation (botocore shapes) -------------------------------------------------------
    def _validate_request(self, request: Request) -> str | None:
        service, action, params = self._action(request)
        if not action:
            return self._problem("request", request, "no action")
        try:
            op = aws_shapes.operation(service, action)
        except Exception:
            return self._problem("request", request, f"unknown operation {service}.{action}")
        errors: list[str] = []
        if service == "ec2":
            params, errors = aws_shapes.decode_query(op, params)
        errors += aws_shapes.request_errors(op, params)
        return self._problem("request", request, "; ".join(errors)) if errors else None

    def _validate_response(self, request: Request, response: Response, injected: bool) -> str | None:
        service, action, _ = self._action(request)
        if response.status_code >= 300:
            return None  # errors are parsed by the client's error path; their shape is the code/message pair
        op = aws_shapes.operation(service, action)
        body = response.get_data()
        if action in STATIC and body in STATIC_VALID:
            return None  # these very bytes passed below already
        if service == "ec2":
            parsed = aws_shapes.parse_ec2_response(op, response.status_code, dict(response.headers), body)
        else:
            parsed = json.loads(body or b"{}")
        errors = aws_shapes.output_errors(op, parsed)
        if not errors and action in STATIC:
            STATIC_VALID.add(body)
        return self._problem("response", request, "; ".join(errors)) if errors else None

    def _problem(self, what: str, request: Request, detail: str) -> str:
        message = f"aws {what} {request.method} {request.path} {self._action(request)[1]}: {detail}"[:2000]
        with self.lock:
            self.validation_errors.append(message)
        return message

    def _forward(self, request: Request) -> Response:
        _, action, form = self._action(request)
        if action == "RunInstances":
            return self._run_instances(request, form)
        if action == "ImportKeyPair" and "PublicKeyMaterial" in form:
            self.key_material[form.get("KeyName", "")] = base64.b64decode(form["PublicKeyMaterial"]).decode()
        if action in STATIC:
            return self.moto.static_call(request, self._region(request), form)
        response = self.moto.call(request)
        if action == "TerminateInstances" and response.status_code == 200:
            ids = {v for k, v in form.items() if k.startswith("InstanceId.")}
            self.live -= ids
            self.costs.terminated(ids)
            self.moto.disassociate_addresses(self._region(request), ids)
        if action == "DescribeInstances" and response.status_code == 200:
            response = self._with_boot_states(response)
            response.set_data(self.costs.with_fake_times(response.get_data()))
        return response

    def _run_instances(self, request: Request, form: dict[str, str]) -> Response:
        wanted = int(form.get("MaxCount", "1"))
        block = None
        if form.get("InstanceMarketOptions.MarketType") == "capacity-block":
            block, refusal = self.gaps.block_for(form, wanted)
            if refusal is not None:
                return refusal
        sent, _ = aws_shapes.decode_query(aws_shapes.operation("ec2", "RunInstances"), form)
        group = (sent.get("Placement") or {}).get("GroupName")
        if group and (self._region(request), group) not in self.placement_groups:
            return self.ec2_error(400, "InvalidPlacementGroup.Unknown", f"The Placement Group '{group}' is unknown.")
        granted, _ = self.faults.grant_capacity(wanted, "RunInstances")
        if granted < int(form.get("MinCount", "1")) or granted == 0:
            return self.error_reply("capacity")
        response = self.moto.call(request)
        if response.status_code != 200:
            return response
        root, ns = parse_xml(response.get_data())
        tags = {
            form[k]: form.get(k[:-3] + "Value", "")
            for k in form
            if k.startswith("TagSpecification.")
            and k.endswith(".Key")
            and form.get(k.split(".Tag.")[0] + ".ResourceType") == "instance"
        }
        raw = base64.b64decode(form["UserData"]) if form.get("UserData") else b""
        boot = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode(errors="replace")  # cloud-init gunzips
        key = self.key_material.get(form.get("KeyName", ""))
        ids = []
        for item in root.iter(f"{ns}instancesSet"):
            for instance in item.findall(f"{ns}item"):
                instance_id = instance.findtext(f"{ns}instanceId", "")
                ids.append(instance_id)
                self.launch_network[instance_id] = {
                    "placement": dict(sent.get("Placement") or {}),
                    "region": self._region(request),
                    "interfaces": [dict(nic) for nic in sent.get("NetworkInterfaces") or []],
                    "metadata_options": dict(sent.get("MetadataOptions") or {}),
                }
                self.placement[instance_id] = (
                    instance.findtext(f"{ns}instanceType", ""),
                    instance.findtext(f"{ns}placement/{ns}availabilityZone", ""),
                )
                self.record_bought(
                    Bought(
                        instance_id=instance_id,
                        interruptible=form.get("InstanceMarketOptions.MarketType") == "spot",
                        boot=boot,
                        tags=tags,
                        ssh_public_keys=(key,) if key else (),
                        private_ip=instance.findtext(f"{ns}privateIpAddress"),
                        private_network=instance.findtext(f"{ns}vpcId"),
                    )
                )
        self.record_launch(ids)
        self.live.update(ids)
        self.costs.launched(
            ids,
            form.get("InstanceType", ""),
            self._region(request),
            tags,
            form.get("InstanceMarketOptions.MarketType") == "spot",
            block=block is not None,
        )
        if block is not None:
            block["used"].update(ids)
        return response

    def _with_boot_states(self, response: Response) -> Response:
        root, ns = parse_xml(response.get_data())
        for instance in root.iter(f"{ns}item"):
            instance_id = instance.findtext(f"{ns}instanceId")
            state = instance.find(f"{ns}instanceState")
            if instance_id not in self.live or state is None:
                continue
            name = state.find(f"{ns}name")
            code = state.find(f"{ns}code")
            if name is not None and code is not None and name.text == "running" and not self.booted(instance_id):
                name.text, code.text = "pending", "0"
        return Response(ET.tostring(root, xml_declaration=True, encoding="UTF-8"), status=200, mimetype="text/xml")

    # ----- FakeApp ---------------------------------------------------------------------------
    def instance_count(self) -> int:
        return len(self.live)

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self.live.clear()
            self.key_material.clear()
            self.placement.clear()
            self.network_nodes.clear()
            self.placement_groups.clear()
            self.launch_network.clear()
            self.offerings.clear()
            self.reservations.clear()
            reset_moto()


# ----- the contract suite's view of this fake (provisioner.testing.contract) ---------------------------------------
CONTRACT_SECRET_KEY = "aws-test-secret-key"
CONTRACT_ACCESS_KEY_ID = "AKIAPROVISIONERTEST"
CONTRACT_IMAGE = "ami-12c6146b"
"""An image moto ships in us-east-1."""


@functools.cache
def contract_ssh_key() -> str:
    """A real OpenSSH key: moto's ImportKeyPair refuses malformed material, as EC2 does."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
        + " contract"
    )


def contract_node_specs(n: int, prefix: str = "n") -> list[Any]:
    from provisioner.providers.base import NodeSpec

    return [
        NodeSpec(
            name=f"{prefix}{i}",
            instance_type="p5.48xlarge",
            region="us-east-1",
            gpus=8,
            image=CONTRACT_IMAGE,
            ssh_public_key=contract_ssh_key(),
            bootstrap="cloud_init",
            user_data="#cloud-config\n{}\n",
        )
        for i in range(n)
    ]


def contract_provider(*, api_key: str, base_url: str, transport: Any = None, **kwargs: Any) -> Any:
    import boto3

    from provisioner.providers.aws.provider import AWSProvider

    session = boto3.Session(
        aws_access_key_id=CONTRACT_ACCESS_KEY_ID, aws_secret_access_key=str(api_key), region_name="us-east-1"
    )
    if transport is not None:
        from provisioner.testing.in_process import on_botocore

        on_botocore(session, transport)
    return AWSProvider(session, regions=["us-east-1"], endpoint_url=base_url, **kwargs)


def contract_harness() -> Any:
    """Quotas that never refuse (the suite buys many p5 nodes, spot ones too; test_aws*.py covers
    refusals); a 3 s timeout, as moto builds ~900 instance types per DescribeInstanceTypes."""
    from provisioner.providers.aws.client import LIMITS
    from provisioner.providers.base import OfferQuery
    from provisioner.testing.contract import Harness

    app = AWSFake(api_key=CONTRACT_SECRET_KEY, quotas={key: 100_000.0 for key in DEFAULT_QUOTAS})
    return Harness(
        name="aws",
        app=app,
        make_provider=contract_provider,
        api_key=CONTRACT_SECRET_KEY,
        node_specs=contract_node_specs,
        published_limits=LIMITS,
        scale=20.0,
        offer_query=OfferQuery(gpu_models=("H100",), regions=("us-east-1",)),
        launch_route="RunInstances",
        list_route="DescribeInstances",
        offers_route="DescribeInstanceTypes",
        balance_fault_route="RunInstances",
        timeout_s=3.0,
        env=(("PROVISIONER_AWS_IMAGE_ID", CONTRACT_IMAGE),),
    )


__all__ = [
    "CONTRACT_ACCESS_KEY_ID",
    "CONTRACT_IMAGE",
    "CONTRACT_SECRET_KEY",
    "DEFAULT_BLOCKS",
    "DEFAULT_ON_DEMAND",
    "DEFAULT_QUOTAS",
    "DEFAULT_SPOT",
    "TOPOLOGY_FAMILIES",
    "AWSFake",
    "contract_harness",
    "contract_node_specs",
    "contract_provider",
    "contract_ssh_key",
    "price_list_item",
]
