"""Where the providers' OpenAPI files are and how a fake reads one (parsed once per process)."""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any


def spec_root() -> Path:
    """Folder holding ``<provider>/<spec file>``: $PROVISIONER_OPENAPI_DIR or ../shared/provider-apis."""
    override = os.environ.get("PROVISIONER_OPENAPI_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[3].parent / "shared" / "provider-apis"


@functools.lru_cache(maxsize=16)
def load_openapi(path: str) -> Any:
    """Parse one OpenAPI file (JSON or YAML) once per process, with ``servers`` set to ``/``."""
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
    # The shared specs were checked once when gathered; re-checking 300 KB per process is slow.
    return OpenAPI.from_dict(document, config=Config(spec_validator_cls=None))


__all__ = ["load_openapi", "spec_root"]
