"""Where Vast.ai's real API accepts or answers more than its OpenAPI file says, and the patch that
makes the fake's spec checks follow the real server (the file in ../shared is never changed).

Evidence is the official client ``vastai`` 1.9.1 (pinned in the ``test`` extra): it is what Vast's
users run against the live API, so what it sends the live API accepts, and what it reads from an
answer the live API sends. Each entry of ``DIFFERENCES`` is (where, what the spec file says, what the
client does, where in the client). docs/providers.md carries the same table for readers.
"""

from __future__ import annotations

from typing import Any

# Spec path -> the path the official client calls (``vastai/api/*.py``). The client spells every
# endpoint we use with a trailing slash except ``/users/current``; the spec spells none with one.
CLIENT_PATHS: dict[str, str] = {
    "/api/v0/bundles": "/api/v0/bundles/",  # offers.search_offers
    "/api/v0/asks/{id}": "/api/v0/asks/{id}/",  # instances.create_instance_from_payload
    "/api/v1/instances": "/api/v1/instances/",  # instances.show_instances_v1
    "/api/v0/instances/{id}": "/api/v0/instances/{id}/",  # instances.show_instance, destroy_instance
    "/api/v0/ssh": "/api/v0/ssh/",  # keys.show_ssh_keys, keys.create_ssh_key
    "/api/v0/charges": "/api/v0/charges/",  # billing.show_invoices_v1(charges=True)
    "/api/v1/invoices": "/api/v1/invoices/",  # billing.show_invoices_v1
}

# Runtypes the client builds from its ssh/jupyter/direct flags (instances.resolve_runtype): space-joined,
# and "direc" where the spec's enum says "direct" (dstack sends "ssh_direc" too).
CLIENT_RUNTYPES = ("ssh_proxy", "ssh_direc ssh_proxy", "jupyter_proxy ssh_proxy", "jupyter_direc ssh_direc ssh_proxy")

# Fields of the create-instance body the client sends as JSON null when unset
# (instances.build_create_instance_payload writes every key, set or not).
NULLABLE_CREATE_FIELDS = (
    "image",
    "price",
    "label",
    "onstart",
    "image_login",
    "jupyter_dir",
    "template_hash_id",
    "user",
)

DIFFERENCES: tuple[tuple[str, str, str, str], ...] = (
    (
        "every path we use",
        "no trailing slash (`/api/v0/bundles`)",
        "trailing slash (`/api/v0/bundles/`), except `/api/v0/users/current`",
        "vastai/api/offers.py, instances.py, keys.py, billing.py",
    ),
    (
        "POST bundles: `type`",
        "enum ondemand|bid|reserved",
        'sends "on-demand" by default (the spec\'s own example says on-demand too)',
        "vastai/api/offers.py search_offers(offer_type='on-demand')",
    ),
    (
        "POST bundles: `order`",
        "the list holds exactly 2 entries",
        "a list of [field, direction] pairs, usually one: [['score', 'desc']]",
        "vastai/api/offers.py, query.parse_order",
    ),
    (
        "POST bundles: filter values",
        "numbers (`num_gpus.in` items integer)",
        'strings as typed on the command line: {"eq": "1"}, {"gt": "0.99"}, {"in": ["1", "2"]}',
        "vastai/api/query.py parse_query (only cpu_ram, gpu_ram, gpu_total_ram, duration become numbers)",
    ),
    (
        "PUT asks/{id}: `env`",
        "string in docker flag form",
        'an object ({"K": "V", "-p 22:22": "1"}), always',
        "vastai/api/instances.py build_create_instance_payload, vastai.utils.parse_env",
    ),
    (
        "PUT asks/{id}: `runtype`",
        "enum ssh, jupyter, args, ssh_proxy, ssh_direct, jupyter_proxy, jupyter_direct",
        "also " + ", ".join(f'"{r}"' for r in CLIENT_RUNTYPES[1:]) + " (its ssh/jupyter/direct flags)",
        "vastai/api/instances.py resolve_runtype",
    ),
    (
        "PUT asks/{id}: unset fields",
        "strings or numbers",
        "JSON null: " + ", ".join(NULLABLE_CREATE_FIELDS),
        "vastai/api/instances.py build_create_instance_payload",
    ),
    (
        "GET instances/{id}: `ports`, `extra_env`",
        "Instance schema: ports an array of integers, extra_env an array of strings",
        'ports {"22/tcp": [{"HostIp", "HostPort"}]} and extra_env [[name, value]], as the spec\'s '
        "own /api/v1/instances schema says; the client reads extra_env as pairs",
        "vastai/api/instances.py show_instance",
    ),
)


def _nullable(schema: dict[str, Any]) -> None:
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        kind.append("null")
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"].append(None)


def _body_schema(operation: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = operation["requestBody"]["content"]["application/json"]["schema"]
    return schema


def patch_spec(document: dict[str, Any]) -> None:
    """Edit the parsed openapi.yaml in place to accept and answer what ``DIFFERENCES`` lists."""
    paths = document["paths"]
    for spec_path, client_path in CLIENT_PATHS.items():
        paths[client_path] = paths.pop(spec_path)

    search = _body_schema(paths["/api/v0/bundles/"]["post"])["properties"]
    search["type"]["enum"] = [*search["type"]["enum"], "on-demand"]
    order = search["order"]
    order.pop("minItems", None)
    order.pop("maxItems", None)
    order["items"].update(minItems=2, maxItems=2)
    search["num_gpus"]["properties"]["in"]["items"] = {"type": ["integer", "string"]}

    create = _body_schema(paths["/api/v0/asks/{id}/"]["put"])["properties"]
    create["env"]["type"] = ["string", "object"]
    runtypes = create["runtype"]["enum"]
    runtypes.extend(r for r in CLIENT_RUNTYPES if r not in runtypes)
    for field in NULLABLE_CREATE_FIELDS:
        _nullable(create[field])

    instance = document["components"]["schemas"]["Instance"]["properties"]
    listed = paths["/api/v1/instances/"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    listed_instance = listed["properties"]["instances"]["items"]["properties"]
    instance["ports"] = listed_instance["ports"]
    instance["extra_env"] = listed_instance["extra_env"]


__all__ = ["CLIENT_PATHS", "CLIENT_RUNTYPES", "DIFFERENCES", "NULLABLE_CREATE_FIELDS", "patch_spec"]
