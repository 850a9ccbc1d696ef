"""The `provisioner` command line: a thin shell around the pure core.

Every ProvisionerError becomes one line on stderr and its exit code (2 for a bad spec,
catalog or command line, 3 for an unplannable spec, 4 for a provider failure). The parser is
the standard library's argparse (provisioner/cliargs.py) and heavy modules are imported inside
commands, so `provisioner plan` starts fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from provisioner import __version__, cliargs
from provisioner.collector import collector_paused
from provisioner.errors import ProvisionerError, SpecError, UsageError
from provisioner.termtext import install_log_printer, printable, say

DESCRIPTION = "Plan, price and provision GPU clusters across AWS, GCP, Lambda, RunPod, Vast.ai and Fluence."

FORMATS = ("table", "json", "csv", "markdown", "html")
LIFECYCLE_COMMANDS = ("up", "down", "status", "outputs", "ssh", "burst", "costs", "watch")
COMMAND_NAMES = ("plan", "schema", "render", "catalog", "validate", "gc", "node", *LIFECYCLE_COMMANDS)
"""The top-level commands, in --help order (tests/test_cli.py checks it against the parser)."""


def _echo(text: str, output: Path | None) -> None:
    if output is None:
        text = printable(text, keep_newlines=True)  # provider and catalog text never drives the terminal
        say(text if text.endswith("\n") else text + "\n", end="")
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc.strerror or exc}", option="--output") from None
        say(f"wrote {output}", err=True)


def plan(
    specs: list[Path],
    catalog: Path | None = None,
    format: str = "table",
    output: Path | None = None,
    top: int = 10,
    explain: bool = False,
    save_plan: Path | None = None,
) -> int:
    """Rank every offer for SPEC by expected total cost and print the comparison. Buys nothing.

    With several specs each gets its report or its one error line; the exit code is the worst.
    """
    if format in ("html", "csv") and len(specs) > 1:
        raise UsageError("html and csv take one spec at a time", option="--format")
    if save_plan and len(specs) != 1:
        raise UsageError("needs exactly one spec", option="--save-plan")
    with collector_paused():  # its ~30 models and a catalog would set off passes over every object
        return _plan(specs, catalog, format, output, top, explain, save_plan)


def _plan(
    specs: list[Path],
    catalog: Path | None,
    format: str,
    output: Path | None,
    top: int,
    explain: bool,
    save_plan: Path | None,
) -> int:
    from provisioner.workflow import plan_report

    reports: list[str] = []
    worst = 0
    for spec in specs:
        try:
            reports.append(
                plan_report([spec], catalog_path=catalog, fmt=format, top=top, explain=explain, save_plan_to=save_plan)
            )
        except ProvisionerError as exc:
            if len(specs) == 1 and not _explained(exc):
                raise
            say(error_line(exc), err=True)
            worst = max(worst, exc.exit_code)
            if _explained(exc):
                reports.append(str(exc.report))  # type: ignore[attr-defined]
            elif format == "json":
                reports.append(_json_error(spec, exc))
    if reports:
        _echo(_join_reports(reports, format, several=len(specs) > 1), output)
    if save_plan and not worst:
        say(f"saved plan to {save_plan}", err=True)
    return worst


def _explained(exc: ProvisionerError) -> bool:
    """An unplannable spec under --explain carries the report listing every rejection."""
    return isinstance(getattr(exc, "report", None), str)


def _json_error(spec: Path, exc: ProvisionerError) -> str:
    """A spec that failed, as an item of the JSON list several specs print (docs/report-schema.json)."""
    import json

    return json.dumps({"spec_file": str(spec), "error": error_line(exc), "exit_code": exc.exit_code}, indent=2)


def _join_reports(reports: list[str], fmt: str, *, several: bool) -> str:
    """Several JSON documents become one JSON list, textually, so exact decimals stay as written."""
    if fmt != "json" or not several:
        return "\n".join(reports)
    items = ["  " + report.strip().replace("\n", "\n  ") for report in reports]
    return "[\n" + ",\n".join(items) + "\n]\n"


def schema() -> None:
    """Print the spec's JSON Schema (point your editor's YAML language server at it)."""
    import json

    from provisioner.spec import ClusterSpec

    document = ClusterSpec.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "provisioner cluster spec"
    say(json.dumps(document, indent=2))


def render(source: Path, out: Path, catalog: Path | None = None, topology: Path | None = None) -> None:
    """Write every file the cluster needs: cloud-init and bootstrap script per role, Slurm or Kubernetes
    configs, job helpers. Cluster secrets are kept (0600) beside a saved plan (PLAN.secrets.json) or in
    OUT/.cluster-secrets.json for a spec, and reused on the next render."""
    from provisioner.render import render_to_dir
    from provisioner.secrets import secrets_path_for
    from provisioner.workflow import load_topology, plan_from_source

    plan = plan_from_source(source, catalog_path=catalog)
    secrets_file = secrets_path_for(source, out)
    written = render_to_dir(
        plan, out, secrets_file=secrets_file, topology=load_topology(topology) if topology else None
    )
    for path in written:
        say(printable(path))
    say(f"cluster secrets: {secrets_file} (0600; rendering again reuses them)", err=True)


def catalog_list(
    provider: str | None = None, gpu: str | None = None, format: str = "table", catalog: Path | None = None
) -> None:
    """List the offer catalog (the refreshed cache if present, else the bundled one), or refresh it.

    `provisioner catalog refresh` fetches live offers from the providers' APIs.
    """
    from provisioner.gpu_names import gpu_model_problem
    from provisioner.workflow import catalog_listing

    problem = gpu_model_problem(gpu) if gpu is not None else None
    if problem is not None:  # a typo listed nothing and exited 0; say what to write, as a spec would
        raise UsageError(problem, option="--gpu")
    _echo(catalog_listing(catalog_path=catalog, provider=provider, gpu=gpu, fmt=format), None)


def catalog_refresh(provider: list[str] | None = None) -> None:
    """Fetch live offers from the providers' APIs and write the dated cache `plan` then uses."""
    from provisioner.refresh import refresh_catalog

    result = refresh_catalog(provider or None)
    say(result.summary)
    result.raise_for_failures()


def gc(provider: str | None = None, cluster: str | None = None, yes: bool = False, force_unowned: bool = False) -> int:
    """List (or with --yes delete) your nodes the tool made that are provably abandoned: expiry passed,
    up died while creating them, or no local record and a lease of this machine and state dir whose
    process is gone, or a lease last renewed over 2 h ago (name others with --cluster). Other owners'
    nodes are never deleted."""
    from provisioner.lifecycle.gc import collect_garbage

    if force_unowned and cluster is None:
        raise UsageError("needs --cluster NAME: it is never applied to a whole account", option="--force-unowned")
    if cluster is not None:
        cliargs.cluster_name(cluster)
        from provisioner.lifecycle.command_support import local_gc

        done = local_gc(cluster, yes)  # a dry run: through its lab, or nothing to ask at all
        if done is not None:
            return done
    try:
        report = collect_garbage(provider=provider, cluster_id=cluster, delete=yes, force_unowned=force_unowned)
    except ValueError as exc:
        raise UsageError(str(exc), option="--provider") from None
    say(report.render())
    return report.exit_code


def build_parser(only: str | None = None) -> cliargs.Parser:
    """The whole command line: every command, its options and the handler that runs it
    (``only``: just that top-level command, the one a run uses)."""
    parser = cliargs.Parser(prog="provisioner", description=DESCRIPTION)
    parser.add_argument(
        "--version", action="version", version=f"gpu-provisioner {__version__}", help="Print the version and exit."
    )
    group = cliargs.commands(parser, only=only)

    cmd = cliargs.command(group, "plan", plan)
    cmd.add_argument("specs", nargs="+", type=Path, metavar="SPEC", help="Spec file(s) (YAML).")
    cmd.add_argument("--catalog", type=Path, help="Catalog file to use instead of the cache/bundled one.")
    cmd.add_argument("--format", "-f", choices=FORMATS, default="table", help="Report format (default: table).")
    cmd.add_argument(
        "--output",
        "-o",
        type=cliargs.output_file("--output", "report.txt"),
        help="Write the report here (a file; its folder must exist).",
    )
    cmd.add_argument("--top", type=cliargs.int_range(1), default=10, help="Show this many ranked options (10).")
    cliargs.flag(cmd, "--explain", "List every rejected offer with its reason.")
    cmd.add_argument(
        "--save-plan",
        type=cliargs.output_file("--save-plan", "plan.json"),
        help="Freeze the winning option into a plan file (a file; its folder must exist).",
    )

    cliargs.command(group, "schema", schema)

    cmd = cliargs.command(group, "render", render)
    cmd.add_argument("source", type=Path, metavar="SOURCE", help="A spec (YAML) or a saved plan (JSON).")
    cmd.add_argument(
        "--out",
        type=cliargs.output_dir("--out"),
        required=True,
        help="Directory to write the files into (made if missing).",
    )
    cmd.add_argument("--catalog", type=Path, help="Catalog used when SOURCE is a spec.")
    cmd.add_argument(
        "--topology",
        type=Path,
        help="YAML/JSON mapping node name (<cluster>-<i>) to its switch path, "
        "outermost first, for Slurm's topology.conf (default: one flat switch).",
    )

    cmd = cliargs.command(group, "catalog", catalog_list)
    cmd.add_argument("--provider", type=cliargs.provider_name, help="Only this provider.")
    cmd.add_argument("--gpu", help="Only this GPU model, e.g. H100.")
    cmd.add_argument("--format", "-f", choices=("table", "json"), default="table", help="Listing format.")
    cmd.add_argument("--catalog", type=Path, help="Catalog file to list.")
    refresh = cliargs.command(cliargs.commands(cmd), "refresh", catalog_refresh)
    refresh.add_argument(
        "--provider", type=cliargs.provider_name, action="append", help="Refresh only this provider (repeatable)."
    )

    if only in (None, "validate"):
        from provisioner.validation.cli import add_validate  # argparse only; the checks load on use

        add_validate(group)

    cmd = cliargs.command(group, "gc", gc)
    cmd.add_argument(
        "--provider", type=cliargs.provider_name, help="Only this provider (default: every one with credentials)."
    )
    cmd.add_argument("--cluster", help="Only this cluster, collected whatever its record says.")
    cliargs.flag(cmd, "--yes", "Delete what is found (default: only list it).", negatable=False)
    cliargs.flag(
        cmd,
        "--force-unowned",
        "With --cluster: also nodes of that cluster that carry no owner mark (never another owner's).",
        negatable=False,
    )

    if only in (None, "node"):
        from provisioner.validation.cli import add_node_commands

        add_node_commands(group)
    if only in (None, *LIFECYCLE_COMMANDS):
        from provisioner.lifecycle.cli import add_commands  # argparse only; the engines load on use

        add_commands(group)  # up, down, status, outputs, ssh, burst, costs, watch
    return parser


def _one_line(text: object) -> str:
    return printable(" ".join(str(text).split()))


def _dispatch(argv: list[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words[0] if words and words[0] in COMMAND_NAMES else None)
    head, trailing = cliargs.split_trailing(words)
    namespace = parser.parse_args(head)
    if trailing is not None:
        if not isinstance(getattr(namespace, "command", None), list):  # no trailing COMMAND: `--` as argparse reads it
            namespace = parser.parse_args(words)
        else:
            namespace.command = [*namespace.command, *trailing]
    handler = getattr(namespace, "handler", None)
    if handler is None:  # a group run without its command: `provisioner`, `provisioner node`
        raise cliargs.missing_command(cliargs.chosen(parser, namespace))
    result = handler(**cliargs.handler_arguments(handler, namespace))
    return result if isinstance(result, int) else 0


def _lean_start() -> None:
    """Skip start-up work this command line never uses (docs/benchmarks.md), unless the user set it:
    numpy's BLAS thread pool (nothing here multiplies matrices) and pydantic's plugin discovery
    (a scan of every installed distribution's entry points)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] in ("__all__", "1", "true"):
        _no_plugin_loader()


def _no_plugin_loader() -> None:
    """With every pydantic plugin disabled, pydantic's plugin loader answers "none" without looking, but
    importing it imports importlib.metadata (and with it email, zipfile, csv, socket...): 12-16 ms of
    every plan, before the first model is built. Its one function, as it answers under that setting,
    stands in for it; tests/test_cli_imports.py holds the real one to the same answer."""
    if _PLUGIN_LOADER in sys.modules:
        return
    import types

    loader = types.ModuleType(_PLUGIN_LOADER, "provisioner.cli: pydantic plugins disabled (PYDANTIC_DISABLE_PLUGINS)")
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    setattr(loader, "__getattr__", _real_loader_attribute)  # noqa: B010 (a module's __getattr__, not a method)
    sys.modules[_PLUGIN_LOADER] = loader


def _real_loader_attribute(attribute: str) -> object:
    """Anything but get_plugins that a later pydantic asks of its loader comes from the real module, which
    then replaces the stand-in: a pydantic release that uses the loader differently gets the real one."""
    if attribute.startswith("__"):
        raise AttributeError(attribute)
    sys.modules.pop(_PLUGIN_LOADER, None)
    import importlib

    return getattr(importlib.import_module(_PLUGIN_LOADER), attribute)


_PLUGIN_LOADER = "pydantic.plugin._loader"


def _no_plugins() -> tuple[()]:
    return ()


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Returns the exit code (never raises for user or provider errors).

    Every usage mistake is one line on stderr and exit 2; a ProvisionerError is its one line and
    its exit code (a located ``FILE:LINE:COL: path: message`` for spec problems).
    """
    _lean_start()
    from provisioner.providers.seal import unseal

    unseal()  # each run decides anew whether it acts on a local dry run
    install_log_printer()  # a warning logged with a provider's words is escaped as well
    try:
        return _dispatch(argv)
    except ProvisionerError as exc:
        say(error_line(exc), err=True)
        if _json_answer(sys.argv[1:] if argv is None else argv):
            _error_event(exc)
        return exc.exit_code
    except SystemExit as exc:  # --help (argparse prints it and exits 0)
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        say("aborted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A file we were told to read or write is unusable (permissions, full disk, ...).
        where = f"{exc.filename}: " if exc.filename else ""
        failure = ProvisionerError(f"{where}{_one_line(exc.strerror or exc)}")  # exit 1
        say(error_line(failure), err=True)
        if _json_answer(sys.argv[1:] if argv is None else argv):
            _error_event(failure)
        return 1


def _json_answer(words: list[str]) -> bool:
    """Whether this command line asked a lifecycle command for JSON (``up ... --json``): its reader
    parses stdout, so an error must reach it there too, as an event."""
    head, _ = cliargs.split_trailing(list(words))
    return bool(head) and head[0] in LIFECYCLE_COMMANDS and "--json" in head


def _error_event(exc: ProvisionerError) -> None:
    """The error as the last JSON line on stdout: ``{"event": "error", "time", "message", "exit_code"}``
    (the one line still goes to stderr for a person)."""
    from provisioner.realize.events import JsonLines

    message = error_line(exc).removeprefix("error: ")
    JsonLines()("error", message=message, exit_code=exc.exit_code, error=type(exc).__name__)


def error_line(exc: ProvisionerError) -> str:
    """The one line a ProvisionerError prints: located errors as they are, others after ``error:``."""
    return printable(exc) if isinstance(exc, SpecError) else f"error: {_one_line(exc)}"


def run() -> None:
    """The ``provisioner`` command (and ``python -m provisioner.cli``): ``main``, then exit with its code.

    The process ends here, so the objects it made are frozen out of the collector first: the
    interpreter's last full collection would walk every one of them (pydantic's schemas, the
    catalog) only to find what exiting frees anyway, 20-40 ms of a plan. Exiting still flushes and
    closes everything and runs atexit handlers. ``main`` itself is what tests call in-process."""
    code = main()
    import gc

    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
