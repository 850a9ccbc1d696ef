"""Engine x provider: the same plan through both engines against each provider's fake.

For each registered provider (the six, and any added later: the cases come from the registry, its
``FACTS.stack`` and its ``CAPABILITIES``) and each case it offers (one node or two, on-demand or spot,
with or without an expiry) the plan is made from the fake's own offers (so it names what the
fake sells) and then realized twice, each time against a fresh fake:

- **direct**: ``bring_up`` (SSH replaced by a stand-in, on a fake clock), ``cluster_nodes``
  (read), ``tear_down``;
- **pulumi**: the Pulumi program's ``GpuCluster`` registered under Pulumi's mock runtime. For
  the neoclouds each dynamic resource it registers (the nodes; Lambda's firewall first) is then
  driven through the dynamic provider's real gRPC server (``python -m pulumi.dynamic``, what the
  engine starts) with the inputs the program registered: Check, Create, Read, then Delete in
  reverse order. AWS and GCP resources are official provider packages that only the mock
  runtime plays here (no pulumi-aws/gcp plugin may reach a cloud): their leg is the create, and
  the instances the program registered are compared with what the direct engine bought.

Both engines must send the same requests: the fakes' logs of every request that is not a read
(not a GET nor a list/get/offers route; method and route, in order) and what each fake sold
(interruptible or not, boot payload, tags, keys) are compared between the two legs.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import functools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dill
import pulumi
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime.config import set_all_config
from pulumi.runtime.proto import provider_pb2

from provisioner.capabilities import Capability
from provisioner.catalog import load_bundled_catalog
from provisioner.catalog_model import Catalog
from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import state
from provisioner.lifecycle.realize import bring_up, cluster_nodes, tear_down
from provisioner.loader import load_spec
from provisioner.optimizer import resolve_plan
from provisioner.plan import Plan, save_plan
from provisioner.providers.base import LEASE_TAG, RUN_TAG, NodeStatus, expiry_text, owner_id
from provisioner.providers.http import RetryPolicy
from provisioner.providers.registry import REGISTRY, capabilities, facts
from provisioner.realize.sshpass import ssh_pass_nodes
from provisioner.secrets import load_or_create_secrets, save_secrets
from provisioner.stacks import program
from provisioner.stacks.topology import ClusterTopologyProvider
from provisioner.testing.fakes.base import Bought, Call, serve
from provisioner.workflow import adapter_capabilities
from tests.file_remote import FileRemote, pushed
from tests.providers.contract import load_harness
from tests.providers.harness import Harness
from tests.test_lifecycle_support import StandInRemote, instant_runtime
from tests.test_render_cloudinit import readable
from tests.test_secrets_over_ssh import _needles
from tests.test_stack_cluster import SECRET_SIG, realize
from tests.test_stack_grpc import dynamic_provider

PROVIDERS = tuple(REGISTRY)
NEOCLOUDS = tuple(name for name, found in facts().items() if found.stack == "neocloud")
SIX = ("aws", "gcp", "lambda", "runpod", "vastai", "fluence")
"""The providers the matrix must hold at least (a floor: a later provider joins through the registry)."""
OWNER = "matrix-owner"
EXPIRES = dt.datetime(2026, 11, 24, 6, 0, tzinfo=dt.UTC)
READS = frozenset({"list", "get", "offers"})
RENEWALS = frozenset({"manage"})
"""The Vast.ai label updates of the direct engine's lease renewal (lifecycle.lease_renewal: renewed after
the purchase, released when up is done); the Pulumi leg here runs the program, not ``pulumi_engine.up``,
whose renewal tests/test_pulumi_real_lease.py covers."""
DYNAMIC = "pulumi-python:dynamic/provisioner:"
LEASE = "<lease>"
"""A leg's lease mark in what the fakes received (the two legs' ``up``s hold different leases)."""


@dataclass(frozen=True)
class Case:
    nodes: int
    spot: bool
    expires: bool

    def __str__(self) -> str:
        return f"{self.nodes}n-{'spot' if self.spot else 'ondemand'}-{'ttl' if self.expires else 'nottl'}"


CASES = (Case(1, False, False), Case(2, False, True), Case(1, True, True), Case(2, True, False))
SPOT = {name for name, declared in capabilities().items() if Capability.SPOT in declared}
"""Providers whose adapters buy interruptible nodes (and whose fakes sell them; Lambda and Fluence sell none)."""
MULTI = {name for name, declared in capabilities().items() if Capability.MULTI_NODE in declared}
INSTANCE = {"pulumi_aws": "aws:ec2/instance:Instance", "pulumi_gcp": "gcp:compute/instance:Instance"}
"""The official Pulumi resource each non-neocloud stack builder registers per node (``FACTS.stack``)."""


def _cases() -> list[tuple[str, Case]]:
    return [(p, c) for p in PROVIDERS for c in CASES if (not c.spot or p in SPOT) and (c.nodes == 1 or p in MULTI)]


def test_the_matrix_has_every_provider_and_both_kinds_of_node() -> None:
    cases = _cases()
    assert {p for p, _ in cases} == set(REGISTRY) >= set(SIX)
    assert {p for p, c in cases if c.spot} == SPOT and {p for p, c in cases if c.nodes > 1} == set(PROVIDERS)
    assert {"aws", "gcp", "runpod", "vastai"} <= SPOT and not SPOT & {"lambda", "fluence"}
    assert set(NEOCLOUDS) >= {"lambda", "runpod", "vastai", "fluence"} and not set(NEOCLOUDS) & {"aws", "gcp"}
    six = [c for c in cases if c[0] in SIX]
    assert len(six) == 20  # 6 providers x (one node, two nodes, expiry or not) + 4 spot providers x 2


# ----- the plan, from the fake's own offers -------------------------------------------------------
@functools.cache
def _offers(name: str) -> tuple[Any, ...]:
    harness = load_harness(name)
    with serve(harness.app) as server:
        adapter = harness.make_provider(
            api_key=harness.api_key, base_url=server.url, limits=harness.scaled_limits, timeout_s=harness.timeout_s
        )
        offers = adapter.list_offers(harness.offer_query)
    # Pods and Vast/Fluence machines are sold one at a time; the catalog says how many are usually
    # rentable together, which the fakes (one listing per machine) cannot: two, for the multi-node case.
    return tuple(o.model_copy(update={"max_nodes": max(o.max_nodes, 2)}) for o in offers)


def _plan(name: str, case: Case, tmp_path: Path, control_planes: tuple[str, ...] = ("slurm", "none")) -> Plan:
    """A plan of ``case`` on ``name`` from the fake's own offers, with the first of ``control_planes``
    that plans (a network without private addresses takes no Slurm cluster)."""
    offers = list(_offers(name))
    first = offers[0]
    bundled = load_bundled_catalog()
    catalog = Catalog(as_of=bundled.as_of, origin="fake", providers=bundled.providers, offers=offers)
    for control_plane in control_planes:
        text = (
            f"name: mx-{name[:4]}-{case.nodes}{'s' if case.spot else 'o'}\n"
            f"gpus: {{model: [{first.gpu_model}], count: {first.gpus * case.nodes}}}\n"
            f"nodes: {{count: {case.nodes}}}\ncontrol_plane: {control_plane}\n"
            f"providers: {{allow: [{name}]}}\npricing: {{mode: {'spot' if case.spot else 'on_demand'}}}\n"
            "workload: {hours: 1}\n" + ("lifetime: {ttl_hours: 2}\n" if case.expires else "")
        )
        path = tmp_path / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            plan = resolve_plan(load_spec(path), catalog, adapter_capabilities(), keep=5).to_plan()
        except Exception:  # the next control plane, else the assert below
            continue
        assert len(plan.nodes) == case.nodes and plan.option.spot is case.spot
        return plan
    raise AssertionError(f"no plan for {name} {case}")


# ----- one fake per engine -----------------------------------------------------------------------
@dataclass
class Fake:
    harness: Harness
    url: str
    env: dict[str, str]

    def adapter(self, **options: Any) -> Any:
        return self.harness.make_provider(
            api_key=self.harness.api_key,
            base_url=self.url,
            limits=self.harness.scaled_limits,
            timeout_s=self.harness.timeout_s,
            retry=RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.1),
            **options,
        )

    def writes(self) -> list[tuple[str, str]]:
        # Reads differ by design (polls, the direct engine's metering on down): writes must not.
        return [
            (c.method, c.route)
            for c in self.harness.app.calls
            if c.kind not in READS and c.route not in RENEWALS and c.method != "GET" and _ours(c)
        ]

    def sold(self, lease: str) -> list[tuple[Any, ...]]:
        return sorted(_sold(b, lease) for b in self.harness.app.bought.values())

    def creates(self, lease: str) -> list[tuple[str, str, Any]]:
        """Every create request the fake received (method, route, body as parsed JSON), with this
        leg's lease mark spelled ``<lease>``: each engine's own mark, which must be there."""
        answered = [c for c in self.harness.app.calls if c.kind != "lost"]
        assert len(answered) == len(self.harness.app.exchanges)
        out, issued = [], set()
        for call, exchange in zip(answered, self.harness.app.exchanges, strict=True):
            if call.kind == "launch" and _ours(call):
                text = exchange.request_body.decode().replace(lease, LEASE)
                for made in sorted(issued, key=len, reverse=True):  # e.g. the firewall ruleset's id
                    text = text.replace(f'"{made}"', '"<issued id>"')
                out.append((call.method, call.route, json.loads(text) if text else None))
            if call.method != "GET":  # made by this call; a listing's ids (RunPod's GPU type ids) are not issued,
                # nor an id the request itself named (RunPod's create answers echo the GPU type id it was sent)
                sent = exchange.request_body.decode(errors="replace")
                issued |= {made for made in _ids(_json(exchange.response_body)) if made not in sent}
        # An adapter may create a cluster's nodes concurrently (Vast.ai): in the order of their bodies.
        return sorted(out, key=lambda c: (c[0], c[1], json.dumps(c[2], sort_keys=True)))


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _ids(value: Any) -> set[str]:
    """The ids a fake issued in one answer (``id`` fields, at any depth): each fake makes its own."""
    if isinstance(value, dict):
        own = {str(value["id"])} if isinstance(value.get("id"), str) and len(value["id"]) >= 8 else set()
        return own.union(*(_ids(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_ids(v) for v in value))
    return set()


def _ours(call: Call) -> bool:
    return not call.path.startswith("/_fake")


def _sold(bought: Bought, lease: str) -> tuple[Any, ...]:
    """What one instance was sold with, its id and this leg's lease mark (each engine writes its own
    ``up``'s: the ``provisioner-lease`` tag, RunPod's ``PROVISIONER_LEASE`` value) spelled out."""
    tags = {k: v.replace(lease, LEASE) for k, v in bought.tags.items() if k != "Name"}
    boot = bought.boot.replace(bought.instance_id, "<id>").replace(lease, LEASE)
    return (bought.interruptible, boot, sorted(tags.items()), bought.ssh_public_keys, bought.cluster_product)


def differing(left: Any, right: Any, at: str = "") -> list[str]:
    """The paths (``a.b[0].c``) where two parsed JSON bodies differ: a field one sets and the other
    does not, or different values. Empty when they are equal."""
    if isinstance(left, dict) and isinstance(right, dict):
        return [p for k in sorted(set(left) | set(right)) for p in differing(left.get(k), right.get(k), f"{at}.{k}")]
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [p for i, (a, b) in enumerate(zip(left, right, strict=True)) for p in differing(a, b, f"{at}[{i}]")]
    return [] if left == right else [f"{at or '.'}: {left!r} != {right!r}"[:300]]


def test_differing_names_each_field_one_body_sets_and_the_other_does_not() -> None:
    direct = {"name": "a", "tags": [{"key": "provisioner-lease", "value": LEASE}], "env": {"X": "1"}}
    other = {"name": "a", "tags": [{"key": "provisioner-lease", "value": "h-1-x"}], "env": {}}
    assert differing(direct, direct) == []
    assert differing(direct, other) == [".env.X: '1' != None", f".tags[0].value: '{LEASE}' != 'h-1-x'"]
    assert differing({"a": [1]}, {"a": [1, 2]}) == [".a: [1] != [1, 2]"]


@contextlib.contextmanager
def served(name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    """A fresh fake of ``name`` on 127.0.0.1, the environment pointing adapters at it."""
    harness = load_harness(name)
    with serve(harness.app) as server:
        prefix = f"PROVISIONER_{name.upper()}"
        env = {f"{prefix}_API_URL": server.url, f"{prefix}_API_KEY": harness.api_key, **dict(harness.env)}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        yield Fake(harness, server.url, env)
    assert harness.app.validation_errors == []


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", OWNER)
    # served() sets what a fake's harness needs (the images the AWS and GCP fakes hold: Harness.env).


# ----- the two legs --------------------------------------------------------------------------------
def _direct(fake: Fake, plan: Plan, expires: dt.datetime | None) -> tuple[str, str]:
    """The direct engine's up, read and down; returns the up's lease mark and run id (its record's)."""
    remote = StandInRemote(nodes=[node.name for node in plan.nodes])
    runtime = instant_runtime(remote, provider_for=lambda _name: fake.adapter())
    record = bring_up(plan, runtime, expires_at=expires)
    assert record.status == "up" and sorted(record.node_ids) == [n.name for n in plan.nodes]
    assert record.lease_id is not None and record.run_id is not None
    _, nodes = cluster_nodes(plan.cluster_id, runtime)
    assert {n.name for n in nodes if n.status is NodeStatus.RUNNING} == {n.name for n in plan.nodes}
    # Every node reads back with its run mark, whatever the provider holds it in (Fluence: nothing).
    carries = facts()[plan.option.provider].run_mark is not None
    assert {n.run for n in nodes} == ({record.run_id} if carries else {None})
    assert fake.harness.instances() == len(plan.nodes)
    tear_down(plan.cluster_id, runtime)
    assert fake.harness.instances() == 0
    return record.lease_id, record.run_id


def _registered(
    fake: Fake, plan: Plan, expires: dt.datetime | None, secrets: Any, folder: Path, lease: str, run: str
) -> Any:
    """``GpuCluster`` under mocks, built by the program's own ``build_args`` from the config ``provisioner
    up`` writes (``lifecycle.pulumi_engine``: the plan file, the secrets file, owner, a pinned expiry,
    the running up's lease mark and its run id): what its nodes carry is the program's choice."""
    kept_file = folder / "cluster.secrets.json"  # down removed the state dir's copy
    save_secrets(kept_file, secrets)
    plan_file = folder / "cluster.plan.json"
    save_plan(plan, plan_file)
    config = {
        "provisioner:plan": str(plan_file),
        "provisioner:secretsFile": str(kept_file),
        "provisioner:owner": owner_id(),
        "provisioner:lease": lease,
        "provisioner:run": run,
    }
    if expires is not None:
        config["provisioner:expiresAt"] = expiry_text(expires)
    set_all_config(config, [])
    try:
        built, args, kept = program.build_args(pulumi.Config("provisioner"))
    finally:
        set_all_config({}, [])
    assert built == plan and kept == secrets
    options = {
        "limits": fake.harness.scaled_limits,
        "poll_interval_s": 0.02,
        "timeout_s": fake.harness.timeout_s,
        "retry": RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.1),
    }
    return realize(args, adapter_options=options, plan=plan, secrets=secrets).recorder


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(props)
    return out


def _pulumi_neocloud(fake: Fake, recorder: Any, plan: Plan, tmp_path: Path) -> Path:
    """Every dynamic resource the program registered, through the engine's gRPC dynamic provider: the
    firewall, the nodes, then the SSH pass (``ClusterTopology``), wired to the nodes' real ids and
    addresses as the engine wires it, with a ``FileRemote`` for SSH. Returns the folder where the
    scripts the SSH pass ran are kept (``tests.file_remote.pushed``)."""
    order = [
        r
        for kind in ("NeocloudFirewall", "NeocloudNodes", "ClusterTopology")
        for r in recorder.resources
        if r.typ == DYNAMIC + kind
    ]
    assert [r.typ for r in order if r.typ != DYNAMIC + "ClusterTopology"][-1] == DYNAMIC + "NeocloudNodes"
    pushed_to = tmp_path / "pushed"
    pushed_to.mkdir(exist_ok=True)
    made: list[tuple[str, Any]] = []
    tests_root = os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])
    with dynamic_provider(tmp_path, {**fake.env, "PYTHONPATH": tests_root}) as server:
        for resource in order:
            urn = f"urn:pulumi:test::gpu-cluster::{resource.typ}::{resource.name}"
            # The dynamic provider's Configure answers acceptSecrets=False: the engine sends plain values.
            props = _unsecret(resource.inputs)
            if resource.typ == DYNAMIC + "ClusterTopology":
                props = wired_step(props, made[-1][1], FileRemote(str(pushed_to)))
            checked = server.Check(provider_pb2.CheckRequest(urn=urn, olds=_struct({}), news=_struct(props)))
            assert list(checked.failures) == []
            created = server.Create(provider_pb2.CreateRequest(urn=urn, properties=checked.inputs))
            made.append((urn, created))
        assert fake.harness.instances() == len(plan.nodes)
        urn, nodes = next((u, c) for u, c in made if "NeocloudNodes" in u)
        read = server.Read(provider_pb2.ReadRequest(id=nodes.id, urn=urn, properties=nodes.properties))
        assert read.id == nodes.id
        assert sorted(
            read.properties.fields["node_names"].list_value.values[i].string_value for i in range(len(plan.nodes))
        ) == [n.name for n in plan.nodes]
        for urn, created in reversed(made):
            server.Delete(provider_pb2.DeleteRequest(id=created.id, urn=urn, properties=created.properties))
    assert fake.harness.instances() == 0
    return pushed_to


def wired_step(props: dict[str, Any], nodes: Any, remote: Any) -> dict[str, Any]:
    """The SSH pass's inputs as the engine resolves them once ``NeocloudNodes`` exists (``nodes``: its
    CreateResponse; the mocks only made up ids and addresses), its pickled provider given ``remote``."""
    outs = json_format.MessageToDict(nodes.properties)
    names = outs["node_names"]
    options = dill.loads(base64.b64decode(props["__provider"])).adapter_options
    return {
        **props,
        "node_ids": dict(zip(names, outs["node_ids"], strict=True)),
        "public_ips": dict(zip(names, outs["public_ips"], strict=True)),
        "__provider": serialize_provider(ClusterTopologyProvider(options, remote=remote)),
    }


def _secrets_only_over_ssh(fake: Fake, plan: Plan, secrets: Any, pushed_to: Path) -> None:
    """The canary (issue 16): no secret in any request or response the fake logged while the Pulumi
    engine made, listed and deleted the nodes, nor in what it sold; the stack's SSH pass carried the
    control plane's secret to every node (the nodes it serves: every one here)."""
    needles = [needle for value in secrets.values() for needle in _needles(value)]
    assert len(fake.harness.app.exchanges) > len(plan.nodes)  # the search has something to search
    for exchange in fake.harness.app.exchanges:
        for text in exchange.texts():
            assert not any(n in text for n in needles), f"a secret crossed {exchange.method} {exchange.path}"
    assert not any(n in bought.boot for bought in fake.harness.app.bought.values() for n in needles)
    served_nodes = [node.name for node in ssh_pass_nodes(plan)]
    assert served_nodes == [node.name for node in plan.nodes]  # every case here: several nodes or Slurm
    control = plan.spec.control_plane.value
    shared = {"slurm": secrets.munge_key_b64, "kubernetes": secrets.k3s_token}.get(control)
    for name in served_nodes:
        scripts = pushed(pushed_to, name)
        assert scripts, f"the SSH pass never reached {name}"
        if shared is not None:
            assert shared.get_secret_value() in readable(scripts[-1])


def _unsecret(value: Any) -> Any:
    if isinstance(value, dict):
        return _unsecret(value["value"]) if value.get(SECRET_SIG) else {k: _unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unsecret(v) for v in value]
    return value


def _instances(recorder: Any, provider: str) -> list[dict[str, Any]]:
    typ = INSTANCE[facts()[provider].stack]
    return [_unsecret(r.inputs) for r in recorder.of(typ)]


@pytest.mark.parametrize(("provider", "case"), _cases(), ids=lambda v: str(v))
def test_both_engines_send_the_same_requests(
    provider: str, case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(provider, case, tmp_path)
    expires = EXPIRES if case.expires else None
    assert (plan.spec.lifetime.ttl_hours is not None) is case.expires
    secrets, _ = load_or_create_secrets(state.secrets_path(plan.cluster_id))  # what both legs render with
    with served(provider, monkeypatch) as direct:
        direct_lease, run = _direct(direct, plan, expires)  # the pulumi leg is given the same run
        direct_writes, direct_sold = direct.writes(), direct.sold(direct_lease)
        direct_creates = direct.creates(direct_lease) if provider in NEOCLOUDS else []  # JSON APIs
    assert len(direct_sold) == case.nodes and {s[0] for s in direct_sold} == {case.spot}
    with served(provider, monkeypatch) as other, cluster_lease.hold(plan.cluster_id, "up") as mark:
        lease = mark.token()  # what lifecycle.pulumi_engine passes the program (provisioner:lease)
        recorder = _registered(other, plan, expires, secrets, tmp_path, lease, run)
        if provider in NEOCLOUDS:
            pushed_to = _pulumi_neocloud(other, recorder, plan, tmp_path)
            _secrets_only_over_ssh(other, plan, secrets, pushed_to)
            creates = other.creates(lease)
            # Each node's create request, field by field: one engine setting a field the other does not fails.
            assert [c[:2] for c in creates] == [c[:2] for c in direct_creates]
            for (method, route, body), (_, _, expected) in zip(creates, direct_creates, strict=True):
                assert differing(expected, body) == [], f"{provider} {method} {route}: the engines' creates differ"
            assert other.writes() == direct_writes
            assert other.sold(lease) == direct_sold
            return
    # AWS/GCP: the program's instances under the mock runtime match what the direct engine bought.
    instances = _instances(recorder, provider)
    assert len(instances) == case.nodes
    expected_spot = [s[0] for s in direct_sold]
    if facts()[provider].stack == "pulumi_aws":  # the market: the launch template every instance launches from
        (template,) = [_unsecret(r.inputs) for r in recorder.of("aws:ec2/launchTemplate:LaunchTemplate")]
        market = (template.get("instanceMarketOptions") or {}).get("marketType")
        spot = [market == "spot"] * len(instances)
        tags = [i["tags"] for i in instances]
    else:
        spot = [bool((i.get("scheduling") or {}).get("provisioningModel") == "SPOT") for i in instances]
        tags = [i["labels"] for i in instances]
    assert sorted(spot) == sorted(expected_spot)
    # Every tool tag the direct engine's adapter wrote (cluster, owner, expiry, node, role, lease), each
    # engine's own lease spelled <lease>; GCP labels carry the expiry in their own form.
    sold_tags = [{k: v for k, v in s[2] if k.startswith("provisioner-")} for s in direct_sold]
    made = [{k: str(v).replace(lease, LEASE) for k, v in t.items() if k.startswith("provisioner-")} for t in tags]
    assert sorted(sorted(t.items()) for t in made) == sorted(sorted(t.items()) for t in sold_tags)
    assert all(t.get(LEASE_TAG) == LEASE for t in made)
    assert all(t.get(RUN_TAG) == run for t in made)  # both engines mark each node with the run
