"""The AWS fake's (``aws_ec2.AWSFake``) call into moto's in-process WSGI app: the request and
answer as moto sees them, every public address moto makes up shown as a documentation address
(so a client never reaches a real host), and the answers of ``STATIC`` actions kept per process.
"""

from __future__ import annotations

import io
import ipaddress
import re
import threading
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.aws_protocol import moto_app

_ADDRESS = re.compile(rb"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.])")

STATIC = frozenset({"DescribeInstanceTypes", "DescribeInstanceTypeOfferings"})
"""Actions whose answers depend only on the request (moto's instance types are fixed data)."""
_STATIC_ANSWERS: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[bytes, list[tuple[str, str]]]] = {}
"""Their answers, once per process: moto takes a tenth of a second to write each instance-type page."""
STATIC_VALID: set[bytes] = set()
"""Those answers' bodies that passed the output-shape check (checking a page again costs as much)."""


class Moto:
    """moto's app behind one fake; ``lock`` is the fake's (it guards the address masks)."""

    def __init__(self, lock: threading.RLock) -> None:
        self.lock = lock
        self._app = moto_app()
        self._masks: dict[str, str] = {}  # moto's public address -> the documentation address shown

    def call(self, request: Request) -> Response:
        """moto's answer to ``request`` (masked addresses restored in it, made-up ones masked in the answer)."""
        body = self.unmasked(request.get_data())
        environ = dict(request.environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        captured: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            captured["status"], captured["headers"] = int(status.split()[0]), headers

        chunks = self.masked(b"".join(self._app(environ, start_response)))
        headers = [(k, v) for k, v in captured["headers"] if k.lower() not in ("content-length", "server", "date")]
        return Response(chunks, status=captured["status"], headers=headers)

    def masked(self, body: bytes) -> bytes:
        """moto's answer with each public address it made up (54.214.x.x: real AWS space) replaced by
        one of TEST-NET-3 / TEST-NET-2, the same one every time: a client never reaches a real host."""

        def mask(found: re.Match[bytes]) -> bytes:
            text = found.group(0).decode()
            try:
                routable = ipaddress.IPv4Address(text).is_global
            except ValueError:
                return found.group(0)
            if not routable:
                return found.group(0)
            with self.lock:
                if text not in self._masks:
                    serial = len(self._masks)
                    self._masks[text] = f"{('203.0.113', '198.51.100')[serial // 250 % 2]}.{serial % 250 + 1}"
                return self._masks[text].encode()

        return _ADDRESS.sub(mask, body)

    def unmasked(self, body: bytes) -> bytes:
        """A request naming a masked address (an Elastic IP) with moto's own address restored."""
        with self.lock:
            back = {masked.encode(): real.encode() for real, masked in self._masks.items()}
        return _ADDRESS.sub(lambda found: back.get(found.group(0), found.group(0)), body) if back else body

    def disassociate_addresses(self, region: str, instance_ids: set[str]) -> None:
        """Disassociate the Elastic IPs of terminated ``instance_ids``: EC2 does on termination (the
        address stays allocated, free for another instance); moto 5.2.5 keeps it on the dead one."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.ec2.models import ec2_backends

        backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
        for eip in list(backend.addresses):
            instance = eip.instance or (eip.eni.instance if eip.eni is not None else None)
            if instance is not None and instance.id in instance_ids:
                backend.disassociate_address(address=eip.public_ip)

    def static_call(self, request: Request, region: str, form: dict[str, str]) -> Response:
        """moto's answer to a ``STATIC`` action, from ``_STATIC_ANSWERS`` when it was asked before."""
        key = (region, tuple(sorted(form.items())))
        found = _STATIC_ANSWERS.get(key)
        if found is None:
            response = self.call(request)
            if response.status_code != 200:
                return response
            found = _STATIC_ANSWERS.setdefault(key, (response.get_data(), list(response.headers.items())))
        return Response(found[0], status=200, headers=found[1])


__all__ = ["STATIC", "STATIC_VALID", "Moto"]
