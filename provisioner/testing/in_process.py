"""A fake served in process to the SDK-based adapters, as ``FakeTransport`` serves it to httpx.

``FakeTransport`` (provisioner.testing.fakes.base) hands an httpx client's requests to a fake's
WSGI app and turns an answer the fake drops (the ``lose_answer`` fault) into httpx's own
``ReadTimeout``. boto3 and google-cloud-compute do not send through httpx; these two shims put
the same transport under them, so the fake's dropped answer reaches each SDK as that SDK's own
read-timeout error, at once: no client waits out a real timeout.

- ``on_botocore(session, transport)``: every request of the clients a ``boto3.Session`` makes
  afterwards goes through ``transport`` (botocore's documented ``before-send`` event).
- ``RequestsAdapter(transport)``: a requests transport adapter (``GCPProvider(http_adapter=...)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore.awsrequest
import botocore.exceptions
import httpx
import requests.adapters
import requests.exceptions
import requests.structures
import requests.utils


def _body(body: Any) -> bytes:
    if body is None:
        return b""
    if hasattr(body, "read"):
        body = body.read()
    return body.encode() if isinstance(body, str) else bytes(body)


class _Raw:
    """The part of a urllib3 response botocore reads: the body, as a stream."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self._content


def on_botocore(session: Any, transport: httpx.BaseTransport) -> None:
    """Send every request of ``session``'s later clients through ``transport``."""
    client = httpx.Client(transport=transport)

    def send(request: botocore.awsrequest.AWSPreparedRequest, **_: Any) -> botocore.awsrequest.AWSResponse:
        try:
            answer = client.request(
                request.method, request.url, headers=dict(request.headers.items()), content=_body(request.body)
            )
        except httpx.TimeoutException as exc:
            raise botocore.exceptions.ReadTimeoutError(endpoint_url=request.url, error=exc) from None
        except httpx.TransportError as exc:
            raise botocore.exceptions.ConnectionClosedError(endpoint_url=request.url, error=exc) from None
        return botocore.awsrequest.AWSResponse(
            request.url,
            answer.status_code,
            dict(answer.headers),  # type: ignore[arg-type]  # AWSResponse wraps any mapping (HeadersDict)
            _Raw(answer.content),
        )

    session.events.register("before-send", send)


class RequestsAdapter(requests.adapters.BaseAdapter):
    """A requests transport adapter sending through an httpx ``transport``."""

    def __init__(self, transport: httpx.BaseTransport) -> None:
        super().__init__()
        self._client = httpx.Client(transport=transport)

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxies: Any = None,
    ) -> requests.Response:
        try:
            headers: Any = dict(request.headers)  # str or bytes values, as requests keeps them; httpx takes both
            answer = self._client.request(
                str(request.method), str(request.url), headers=headers, content=_body(request.body)
            )
        except httpx.TimeoutException as exc:
            raise requests.exceptions.ReadTimeout(str(exc), request=request) from None
        except httpx.TransportError as exc:
            raise requests.exceptions.ConnectionError(str(exc), request=request) from None
        response = requests.Response()
        response.status_code = answer.status_code
        response.headers = requests.structures.CaseInsensitiveDict(
            {k: v for k, v in answer.headers.items() if k.lower() != "content-encoding"}
        )  # httpx decoded it
        response._content = answer.content
        response.encoding = requests.utils.get_encoding_from_headers(response.headers)
        response.reason = answer.reason_phrase
        response.url = str(request.url)
        response.request = request
        return response

    def close(self) -> None:
        self._client.close()


__all__ = ["RequestsAdapter", "on_botocore"]
