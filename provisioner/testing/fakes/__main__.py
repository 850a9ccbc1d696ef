"""``python -m provisioner.testing.fakes PROVIDER --port N [--api-key KEY] [--latency-ms N]``.

Serves one fake on 127.0.0.1 until interrupted. Faults and state are reachable at
``/_fake/faults``, ``/_fake/state`` and ``/_fake/reset``.
"""

from __future__ import annotations

import argparse
import sys
import time

from provisioner.testing.fakes import FAKES, make_fake, serve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m provisioner.testing.fakes")
    parser.add_argument("provider", choices=sorted(FAKES))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--api-key", default=None, help="accept only this key (default: any)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added to every API call")
    parser.add_argument("--lenient", action="store_true", help="record validation failures, do not fail")
    args = parser.parse_args(argv)
    try:
        app = make_fake(
            args.provider,
            api_key=args.api_key,
            strict=not args.lenient,
            latency_s={"*": args.latency_ms / 1000.0} if args.latency_ms else None,
        )
    except ModuleNotFoundError as exc:  # the AWS/GCP fakes answer with the SDKs' own shapes (botocore, moto)
        if not exc.name or exc.name.split(".")[0] == "provisioner":
            raise
        print(
            f"error: the {args.provider} fake needs {exc.name.split('.')[0]}, not installed here: "
            "pip install 'gpu-provisioner[test]'",
            file=sys.stderr,
        )
        return 2
    server = serve(app, args.host, args.port)
    print(f"{args.provider} fake on {server.url} ({app.validation_note})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
