"""Check AWS wire traffic against botocore's own service models (the shapes in
../shared/provider-apis/aws/ were dumped from the same models, botocore 1.43.11).

- ``decode_query(operation, form)``: an EC2 query-protocol request (``Action=...`` form) back
  into the nested parameters, driven by the operation's input shape; keys the shape does not
  know are returned as errors (botocore would never send them).
- ``request_errors`` / ``output_errors``: ``botocore.validate`` against the input or output
  shape (required members, types, enums are not checked by botocore; ranges are).
- ``parse_ec2_response``: an EC2 XML answer parsed by botocore's own EC2 parser, so a fake's
  XML is read exactly as a client reads it.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping
from typing import Any

import botocore.session
from botocore.model import ListShape, OperationModel, ServiceModel, Shape, StructureShape
from botocore.parsers import create_parser
from botocore.validate import ParamValidator


@functools.lru_cache(maxsize=8)
def service_model(service: str) -> ServiceModel:
    return botocore.session.get_session().get_service_model(service)


def operation(service: str, name: str) -> OperationModel:
    return service_model(service).operation_model(name)


def _ec2_name(name: str, member: Shape) -> str:
    ser = member.serialization
    if "queryName" in ser:
        return str(ser["queryName"])
    if "name" in ser:
        return str(ser["name"][0].upper() + ser["name"][1:])
    return name


def _decode(shape: Shape, prefix: str, form: Mapping[str, str], used: set[str]) -> Any:
    if isinstance(shape, StructureShape):
        out = {}
        for name, member in shape.members.items():
            key = f"{prefix}.{_ec2_name(name, member)}" if prefix else _ec2_name(name, member)
            value = _decode(member, key, form, used)
            if value is not None:
                out[name] = value
        return out or None
    if isinstance(shape, ListShape):
        items, index = [], 1
        while any(k == f"{prefix}.{index}" or k.startswith(f"{prefix}.{index}.") for k in form):
            items.append(_decode(shape.member, f"{prefix}.{index}", form, used))
            index += 1
        return items or None
    if prefix not in form:
        return None
    used.add(prefix)
    raw = form[prefix]
    if shape.type_name in ("integer", "long"):
        return int(raw)
    if shape.type_name in ("double", "float"):
        return float(raw)
    if shape.type_name == "boolean":
        return raw == "true"
    if shape.type_name == "blob":
        return base64.b64decode(raw)
    return raw


def decode_query(op: OperationModel, form: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(parameters, errors) of an EC2 query request; unknown keys are errors."""
    used: set[str] = set()
    params = _decode(op.input_shape, "", form, used) or {} if op.input_shape else {}
    unknown = sorted(set(form) - used - {"Action", "Version"})
    return params, [f"unknown parameter {key}" for key in unknown]


def _validate(params: Any, shape: Shape | None) -> list[str]:
    if shape is None:
        return []
    report = ParamValidator().validate(params, shape)
    return [report.generate_report()] if report.has_errors() else []


def request_errors(op: OperationModel, params: Mapping[str, Any]) -> list[str]:
    return _validate(dict(params), op.input_shape)


def output_errors(op: OperationModel, parsed: Mapping[str, Any]) -> list[str]:
    body = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
    return _validate(body, op.output_shape)


def parse_ec2_response(op: OperationModel, status: int, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    parser = create_parser("ec2")
    parsed: dict[str, Any] = parser.parse(
        {"status_code": status, "headers": dict(headers), "body": body},
        op.output_shape,  # type: ignore[arg-type]  # None for an operation without output: parse takes it
    )
    return parsed


__all__ = ["decode_query", "operation", "output_errors", "parse_ec2_response", "request_errors", "service_model"]
