"""JSON schemas for the Fluence endpoints its OpenAPI file lacks (GPU Cloud VMs, ``/ssh_keys``),
written from the documented example shapes in ``docs_examples.json`` (field names, nesting, JSON
types, nullability as the docs show them); ``fluence.FluenceFake`` checks every body of those
routes against them (see its module docstring).
"""

from __future__ import annotations

from typing import Any

_STR, _NUM, _INT, _BOOL = {"type": "string"}, {"type": "number"}, {"type": "integer"}, {"type": "boolean"}
_NSTR = {"type": ["string", "null"]}


def _obj(props: dict[str, Any], *, closed: bool = False) -> dict[str, Any]:
    return {"type": "object", "required": sorted(props), "properties": props, "additionalProperties": not closed}


_COUNT = _obj({"count": _NUM})
_UNITS = _obj({"count": _NUM, "units": _STR})
_GPU_MODEL = _obj({"vendor": _STR, "model": _STR, "vram": _STR, "interface": _STR})
_PRICING = _obj({"hour": _NUM, "upfront_hours": _NUM, "currency": _STR})
_SUPPLY = _obj({"vcpu": _COUNT, "memory": _UNITS, "storage": _UNITS, "gpu_count": _INT})
_RESOURCES = _obj({"supply": _SUPPLY, "gpu_model": _GPU_MODEL})
_OPTION = _obj(
    {
        "id": _STR,
        "location": _STR,
        "provider": _STR,
        "vcpu": _COUNT,
        "memory": _UNITS,
        "storage": _UNITS,
        "deployment_type": _STR,
        "pricing": _PRICING,
        "nvlink": _BOOL,
        "os_options": {"type": "array", "items": _STR},
    }
)
_LEVEL = _obj(
    {
        "gpu_count": _INT,
        "minimum_price": _NUM,
        "options_available_total": _INT,
        "providers_available_total": _INT,
        "data_center_available_total": _INT,
        "locations": {"type": "array", "items": _STR},
        "providers": {"type": "array", "items": _STR},
        "options": {"type": "array", "items": _OPTION},
    }
)
_INSTANCE = _obj(
    {
        "id": _STR,
        "name": _STR,
        "status": _STR,
        "resources": _RESOURCES,
        "domain": _NSTR,
        "location": _STR,
        "created_at": _STR,
        "updated_at": _STR,
    }
)
_BILLING = _obj({"hourly_usage": _NUM, "total_spendings": _NUM, "reserved_amount": _NUM, "next_billing_period": _NSTR})
_NETWORK = {"oneOf": [{"type": "null"}, _obj({"domain": _NSTR, "forwarded_ports": {"type": "array"}, "uri": _NSTR})]}
_DETAIL = _obj(
    {
        **_INSTANCE["properties"],
        "availability": _STR,
        "os_image": _STR,
        "ssh_connection": _NSTR,
        "billing": _BILLING,
        "network": _NETWORK,
        "ssh_key": _STR,
    }
)
_DETAIL["required"] = sorted(set(_DETAIL["required"]) - {"domain"})  # the detail example has no "domain"
_KEY = _obj({"name": _STR, "fingerprint": _STR, "algorithm": _STR, "comment": _STR, "active": _BOOL, "createdAt": _STR})
_KEY["anyOf"] = [{"required": ["publicKey"]}, {"required": ["public_key"]}]
_KEY["properties"] |= {"publicKey": _STR, "public_key": _STR}
_ERROR = _obj(
    {
        "detail": {
            "oneOf": [_STR, {"type": "array", "items": _obj({"loc": {"type": "array"}, "msg": _STR, "type": _STR})}]
        }
    }
)

DOC_SCHEMAS: dict[str, dict[str, Any]] = {
    "gpu_vm_plans.response": _obj(
        {
            "data": {
                "type": "array",
                "items": _obj(
                    {
                        "gpu_model": _GPU_MODEL,
                        "minimum_price": _NUM,
                        "availability_by_number": {"type": "array", "items": _LEVEL},
                    }
                ),
            }
        }
    ),
    "list_gpu_instances.response": {"type": "array", "items": _INSTANCE},
    "get_gpu_instance.response": _DETAIL,
    "deploy_gpu_vm.request": _obj({"plan_id": _STR, "name": _STR, "ssh_key": _STR, "os_image": _STR}, closed=True),
    "deploy_gpu_vm.response": _obj({"instance_id": _STR}),
    "list_ssh_keys.response": {"type": "array", "items": _KEY},
    "add_ssh_key.request": _obj({"name": _STR, "publicKey": _STR}, closed=True),
    "add_ssh_key.response": {"type": "array", "items": _KEY},
    "error.response": _ERROR,
}


def doc_problem(schema_name: str, document: Any) -> str | None:
    """The first way ``document`` breaks ``DOC_SCHEMAS[schema_name]``, or None."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(DOC_SCHEMAS[schema_name]).iter_errors(document), key=lambda e: list(e.path))
    if not errors:
        return None
    first = errors[0]
    return f"{'/'.join(str(p) for p in first.path) or '<root>'}: {first.message}"[:500]


__all__ = ["DOC_SCHEMAS", "doc_problem"]
