"""Where the providers' OpenAPI files are, how a fake reads one (parsed once per process) and
checks a request or response against it (openapi-core, imported on first use).

A fake whose provider's real server accepts more than its spec file says passes a ``patch``: a
function that edits the parsed document in memory (the file in ../shared is never changed). Each
patch lives next to its fake and names its evidence (e.g. ``fakes.vastai_spec``)."""

from __future__ import annotations

import copy
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

SpecPatch = Callable[[dict[str, Any]], None]


def spec_root() -> Path:
    """Folder holding ``<provider>/<spec file>``: $PROVISIONER_OPENAPI_DIR or ../shared/provider-apis."""
    override = os.environ.get("PROVISIONER_OPENAPI_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[3].parent / "shared" / "provider-apis"


@functools.lru_cache(maxsize=16)
def load_openapi(path: str, patch: SpecPatch | None = None) -> Any:
    """Parse one OpenAPI file (JSON or YAML) once per process and patch, with ``servers`` set to ``/``
    and ``patch`` (if any) applied to a copy of the document."""
    from openapi_core import Config, OpenAPI

    text = Path(path).read_text(encoding="utf-8")
    if path.endswith((".yml", ".yaml")):
        import yaml

        # libyaml's loader when present: the same document, ~8x faster on the 300 KB specs.
        document = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    else:
        document = json.loads(text)
    document = copy.deepcopy(document)
    document["servers"] = [{"url": "/"}]
    if patch is not None:
        patch(document)
    # The shared specs were checked once when gathered; re-checking 300 KB per process is slow.
    return OpenAPI.from_dict(document, config=Config(spec_validator_cls=None))  # type: ignore[arg-type]  # None skips the check


def request_error(openapi: Any, request: Any) -> Exception | None:
    """Why the werkzeug ``request`` breaks the parsed spec ``openapi``; None when it is valid."""
    from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest

    try:
        openapi.validate_request(WerkzeugOpenAPIRequest(request))
    except Exception as exc:  # openapi-core raises a family of errors; all mean "invalid"
        return exc
    return None


def response_error(openapi: Any, request: Any, response: Any) -> tuple[Exception | None, bool]:
    """(why the werkzeug ``response`` to ``request`` breaks the spec or None, whether the spec documents
    no response with its status for that operation)."""
    from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
    from openapi_core.templating.responses.exceptions import ResponseNotFound

    try:
        openapi.validate_response(WerkzeugOpenAPIRequest(request), WerkzeugOpenAPIResponse(response))
    except ResponseNotFound as exc:
        return exc, True
    except Exception as exc:
        return exc, False
    return None, False


def error_detail(exc: Exception) -> str:
    """An openapi-core error's text with its first list of schema errors appended."""
    detail = str(exc)
    cause = exc.__cause__
    for attr in ("schema_errors", "errors"):
        extra = getattr(cause, attr, None) or getattr(exc, attr, None)
        if extra:
            detail += " | " + "; ".join(str(getattr(e, "message", e)) for e in extra)
            break
    return detail


__all__ = ["SpecPatch", "error_detail", "load_openapi", "request_error", "response_error", "spec_root"]
