"""RunPod's GraphQL endpoint in the RunPod fake (``runpod.RunPodFake``), executed by graphql-core.

The schema is ``runpod_schema`` (the operations the official SDK, dstack, gpuhunt and this
project send); graphql-core parses, validates and executes each request, so arguments written
inline (as the SDK writes its mutations) and passed as variables (as the adapter does) are the
same thing, filters such as ``gpuTypes(input: {id})`` apply, and every field a client selects is
answered. GraphQL is not in RunPod's OpenAPI file: a request the schema refuses is recorded in
``fake.validation_errors`` and answered 400 ``GRAPHQL_VALIDATION_FAILED`` (Apollo's code, which
RunPod's server uses); an answer graphql-core cannot shape to the schema (a bug of the fake) is
recorded too. Refusals of the service itself (no capacity, unknown pod) are GraphQL errors with
``extensions.code`` at HTTP 200, as RunPod sends them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from graphql import GraphQLError, graphql_sync
from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes import runpod_views
from provisioner.testing.fakes.runpod_schema import schema

if TYPE_CHECKING:
    from provisioner.testing.fakes.runpod import RunPodFake

NO_CAPACITY = "There are no longer any instances available with the requested specifications."
ACCOUNT_ID = "user_2PyTJrLzeuwfZilRZ7JhCQDuSqo"


class Refusal(GraphQLError):
    """A refusal of the service (not of the schema): answered at HTTP 200 with its code."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, extensions={"code": code})


class GraphqlRoutes:
    """The GraphQL half of ``RunPodFake`` (its one route is registered here)."""

    def __init__(self, fake: RunPodFake) -> None:
        self.fake = fake
        fake.route(
            "POST",
            "/graphql",
            self.graphql,
            kind="other",
            name="graphql",
            validate=False,
            reason="GraphQL is not in the OpenAPI spec; checked against runpod_schema by graphql-core",
        )

    def graphql(self, request: Request) -> Response:
        payload = self.fake.body(request)
        query = payload.get("query") if isinstance(payload, dict) else None
        if not isinstance(query, str):
            return self.invalid("body needs a string 'query'")
        variables = payload.get("variables")
        if variables is not None and not isinstance(variables, dict):
            return self.invalid("'variables' must be an object")
        result = graphql_sync(
            schema(),
            query,
            root_value=Root(self.fake),
            variable_values=variables,
            operation_name=payload.get("operationName"),
        )
        if result.errors and result.data is None:  # parse, validation or variable coercion: refused whole
            return self.invalid("; ".join(error.message for error in result.errors))
        errors = [error.formatted for error in result.errors or []]
        for error in result.errors or []:
            if not isinstance(error.original_error, Refusal):
                self.record(f"answer breaks the schema: {error.message}")
        body: dict[str, Any] = {"data": result.data}
        if errors:
            body["errors"] = errors
        return self.fake.json(body)

    def record(self, why: str) -> None:
        with self.fake.lock:
            self.fake.validation_errors.append(f"runpod request POST /graphql: {why}")

    def invalid(self, why: str) -> Response:
        self.record(f"GraphQL schema refuses it: {why}")
        return self.fake.json({"errors": [{"message": why, "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"}}]}, 400)


class Root:
    """Query and mutation resolvers (graphql-core calls ``field(info, **arguments)`` on the root)."""

    def __init__(self, fake: RunPodFake) -> None:
        self.fake = fake

    # ----- queries ---------------------------------------------------------------------------
    def gpuTypes(self, _info: Any, input: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        wanted = input or {}
        ids = set(wanted.get("ids") or []) | ({wanted["id"]} if wanted.get("id") else set())
        gpus = [g for g in self.fake.gpus if not ids or g["id"] in ids]
        if wanted.get("cluster"):
            gpus = [g for g in gpus if g["secure"]]
        return [runpod_views.gpu_type(g) for g in gpus]

    def dataCenters(self, _info: Any) -> list[dict[str, Any]]:
        return [{"id": dc, "name": name, "listed": True} for dc, name in self.fake.data_center_names.items()]

    def countryCodes(self, _info: Any) -> list[str]:
        return sorted({dc.split("-", 1)[0] for dc in self.fake.data_center_names})

    def myself(self, _info: Any) -> dict[str, Any]:
        fake = self.fake
        return {
            "id": ACCOUNT_ID,
            "pubKey": "\n".join(fake.ssh_keys),
            "clientBalance": fake.balance_usd,
            "pods": [runpod_views.pod(fake, stored) for stored in list(fake.pods.values())],
            "networkVolumes": [],
        }

    def pod(self, _info: Any, input: dict[str, Any] | None = None) -> dict[str, Any] | None:
        stored = self.fake.pods.get((input or {}).get("podId", ""))
        return runpod_views.pod(self.fake, stored) if stored else None

    # ----- mutations -------------------------------------------------------------------------
    def podFindAndDeployOnDemand(self, _info: Any, input: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._deploy(input or {}, bid=None)

    def podRentInterruptable(self, _info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self._deploy(input, bid=float(input["bidPerGpu"]))

    def podTerminate(self, _info: Any, input: dict[str, Any]) -> None:
        refused = self.fake.remove_pod(input["podId"])
        if refused:
            raise Refusal(refused, "BAD_REQUEST")

    def updateUserSettings(self, _info: Any, input: dict[str, Any] | None = None) -> dict[str, Any]:
        pub_key = (input or {}).get("pubKey")
        if pub_key is not None:
            self.fake.ssh_keys = [line.strip() for line in pub_key.splitlines() if line.strip()]
        return self.myself(None)

    def _deploy(self, spec: dict[str, Any], *, bid: float | None) -> dict[str, Any]:
        fake = self.fake
        if not spec.get("gpuTypeId"):
            raise Refusal("this fake sells GPU pods only: gpuTypeId is required", "BAD_REQUEST")
        if not spec.get("imageName"):
            raise Refusal("imageName is required", "BAD_REQUEST")
        gpu = next((g for g in fake.gpus if g["id"] == spec["gpuTypeId"]), None)
        asked = spec.get("cloudType") or "ALL"
        cloud = asked if asked != "ALL" else "SECURE" if gpu is None or gpu["secure"] else "COMMUNITY"
        count = int(spec.get("gpuCount") or 1)
        centers = [spec["dataCenterId"]] if spec.get("dataCenterId") else []
        refusal, center = fake._place(spec["gpuTypeId"], count, cloud, centers)
        if refusal is not None:
            detail = json.loads(refusal.get_data()).get("detail", "")
            raise Refusal(detail, "SUPPLY_CONSTRAINT" if detail == NO_CAPACITY else "BAD_REQUEST")
        env = spec.get("env") or []
        stored = fake._new_pod(
            name=spec.get("name") or "",
            image=spec["imageName"],
            gpu_id=spec["gpuTypeId"],
            count=count,
            cloud=cloud,
            center=center,
            disk=int(spec.get("containerDiskInGb") or 50),
            env={e["key"]: e["value"] for e in env if e},
            ports=[p for p in str(spec.get("ports") or "").split(",") if p],
            args=spec.get("dockerArgs") or "",
            start_ssh=bool(spec.get("startSsh")),
            interruptible=bid is not None,
        )
        if bid is not None:
            fake.bids[stored["id"]] = bid
        return runpod_views.pod(fake, stored)


__all__ = ["NO_CAPACITY", "GraphqlRoutes", "Refusal", "Root"]
