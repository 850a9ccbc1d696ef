"""A Python language host for the Pulumi CLI built by ``.ci/build-pulumi`` (tests and CI only).

The official host (``pulumi-language-python``, a Go program shipped with the CLI) is published in a
Go module the module proxy does not serve, so this repository carries its own. Users get the
official one from Pulumi's installer. The protocol, as the CLI drives it (Pulumi's
``proto/pulumi/language.proto`` and ``sdk/go/common/resource/plugin``):

- the CLI starts the plugin with flags and the engine's gRPC address as the last argument; the
  plugin serves ``pulumirpc.LanguageRuntime`` on 127.0.0.1 and writes its port, one line, on stdout;
- ``Run`` runs the program once against the resource monitor named in the request; this host runs
  it in a child process (this file with ``--run``), the way the official host does, so every run
  starts from fresh module state. Exit code 32 means the program already told the user (``bail``);
- ``GetRequiredPackages``/``GetRequiredPlugins`` answer none: the program's only plugin is the
  dynamic-provider one (``pulumi-resource-pulumi-python``), which the CLI finds beside itself;
- ``InstallDependencies`` installs nothing: the environment running this host is the project's.

Only what ``pulumi up/preview/refresh/destroy/stack export`` and the Automation API call is served;
the code-generation calls answer UNIMPLEMENTED, as the CLI expects from a host that lacks them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import runpy
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

# The host forks a child per run while gRPC's threads serve; gRPC's fork handlers would only log
# "skipping fork() handlers" into the user's output. The child gets the variable as it was.
_FORK_SUPPORT = os.environ.get("GRPC_ENABLE_FORK_SUPPORT")
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"

try:
    import grpc
    import pulumi
    import pulumi.runtime
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2
except ImportError as exc:  # the interpreter found is not the project's environment
    print(
        f"pulumi-language-python: {sys.executable} cannot import the Pulumi SDK ({exc}); "
        "activate the project's virtualenv or set PULUMI_PYTHON_CMD",
        file=sys.stderr,
    )
    sys.exit(1)

# The exit code by which a program says it has already shown the user an actionable error.
BAIL_EXIT_CODE = 32
_PR_SET_PDEATHSIG = 1


def _die_with_parent(host_pid: int) -> None:
    """Run first in the program's child: end it when the host ends (Linux), never orphan it.

    The child asks for this itself. Asking in a ``preexec_fn`` made ``subprocess`` fork() the host,
    a process with gRPC's threads running, and run Python (``dlopen``) in the copy before exec: the
    copy crashed now and then (exit -11, once -6) with gRPC's "skipping fork() handlers" line. Without
    ``preexec_fn`` the host starts its child by vfork/posix_spawn, which runs no fork handlers."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != host_pid:  # the host ended before the request above took effect
        sys.exit(1)


def _program_path(request: Any) -> str:
    """The program to run, absolute: the project's program directory and entry point."""
    info = request.info
    if info.program_directory:
        entry = info.entry_point or "."
        return os.path.normpath(os.path.join(info.program_directory, entry))
    return os.path.normpath(os.path.join(request.pwd or os.getcwd(), request.program or "."))


class LanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    """The ``LanguageRuntime`` service: each ``Run`` is one child process running the program."""

    def __init__(self, engine_address: str) -> None:
        self.engine_address = engine_address

    def Handshake(self, request: Any, context: Any) -> Any:
        if request.engine_address:
            self.engine_address = request.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=pulumi.__version__ if hasattr(pulumi, "__version__") else "")

    def GetRequiredPlugins(self, request: Any, context: Any) -> Any:
        return language_pb2.GetRequiredPluginsResponse()

    def GetRequiredPackages(self, request: Any, context: Any) -> Any:
        return language_pb2.GetRequiredPackagesResponse()

    def InstallDependencies(self, request: Any, context: Any) -> Iterator[Any]:
        return iter(())

    def RuntimeOptionsPrompts(self, request: Any, context: Any) -> Any:
        return language_pb2.RuntimeOptionsResponse()

    def About(self, request: Any, context: Any) -> Any:
        version = ".".join(str(part) for part in sys.version_info[:3])
        return language_pb2.AboutResponse(executable=sys.executable, version=version)

    def GetProgramDependencies(self, request: Any, context: Any) -> Any:
        return language_pb2.GetProgramDependenciesResponse()

    def Cancel(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()

    def Run(self, request: Any, context: Any) -> Any:
        settings = {
            "project": request.project,
            "stack": request.stack,
            "monitor": request.monitor_address,
            "engine": self.engine_address,
            "parallel": request.parallel,
            "dry_run": request.dryRun,
            "organization": request.organization or None,
            "root_directory": request.info.root_directory or None,
            "program": _program_path(request),
            "pwd": request.pwd or None,
            "args": list(request.args),
            "host_pid": os.getpid(),
        }
        env = dict(os.environ)
        env.pop("GRPC_ENABLE_FORK_SUPPORT")
        if _FORK_SUPPORT is not None:
            env["GRPC_ENABLE_FORK_SUPPORT"] = _FORK_SUPPORT
        # Where the SDK reads the stack's config (pulumi.runtime.get_config_env and friends).
        env["PULUMI_CONFIG"] = json.dumps(dict(request.config))
        env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(request.configSecretKeys))
        child = subprocess.run(
            [sys.executable, "-u", os.path.abspath(__file__), "--run", json.dumps(settings)],
            env=env,
            cwd=request.pwd or None,
            check=False,
        )
        if child.returncode == 0:
            return language_pb2.RunResponse()
        if child.returncode == BAIL_EXIT_CODE:
            return language_pb2.RunResponse(bail=True)
        return language_pb2.RunResponse(error=f"Program exited with non-zero exit code: {child.returncode}")


def serve(engine_address: str) -> None:
    """Serve the host on an ephemeral 127.0.0.1 port, print the port, block until killed."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageHost(engine_address), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.stop(0)


def run_program(settings: dict[str, Any]) -> int:
    """The child: configure the SDK for this run and execute the program as ``__main__``."""
    _die_with_parent(int(settings["host_pid"]))
    pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
    pulumi.runtime.configure(
        pulumi.runtime.Settings(
            project=settings["project"],
            stack=settings["stack"],
            monitor=settings["monitor"],
            engine=settings["engine"],
            parallel=settings["parallel"],
            dry_run=settings["dry_run"],
            organization=settings["organization"],
            root_directory=settings["root_directory"],
        )
    )
    program = settings["program"]
    sys.argv = [program, *settings["args"]]
    if settings["pwd"]:
        os.chdir(settings["pwd"])
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    executor = futures.ThreadPoolExecutor(max_workers=max(int(settings["parallel"] or 1), 1) * 4)
    loop.set_default_executor(executor)
    # A failed program leaves futures nobody awaits; asyncio's complaints about them are noise.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    code = 1
    try:
        loop.run_until_complete(pulumi.runtime.run_in_stack(lambda: runpy.run_path(program, run_name="__main__")))
        code = 0
    except pulumi.RunError as exc:
        pulumi.log.error(str(exc))
    except Exception:
        import traceback

        pulumi.log.error("Program failed with an unhandled exception:\n" + traceback.format_exc())
        code = BAIL_EXIT_CODE
    finally:
        executor.shutdown(wait=True)
        loop.close()
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--run":
        return run_program(json.loads(argv[1]))
    # The engine's address comes last; flags of the official host (-root=..., -tracing=..., -v=N) are
    # accepted and unused.
    positional = [arg for arg in argv if not arg.startswith("-")]
    serve(positional[-1] if positional else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
