"""The `provisioner` command line: a thin shell around the pure core.

Every ProvisionerError becomes one line on stderr and its exit code (2 for a bad spec
or catalog, 3 for an unplannable spec, 4 for a provider failure); usage mistakes exit 2.
Heavy modules are imported inside commands so `provisioner plan` starts fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from provisioner.errors import ProvisionerError, SpecError
from provisioner.lifecycle.cli import register as register_lifecycle  # typer only; the engines load on use
from provisioner.validation.cli import node_app, validate  # typer only; the checks load on use

app = typer.Typer(
    name="provisioner",
    help="Plan, price and provision GPU clusters across AWS, GCP, Lambda, RunPod, Vast.ai and Fluence.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
catalog_app = typer.Typer(help="List the offer catalog, or refresh it from the providers' live APIs.")
app.add_typer(catalog_app, name="catalog")

FORMATS = ("table", "json", "csv", "markdown", "html")


def _echo(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise typer.BadParameter(f"cannot write {output}: {exc.strerror or exc}", param_hint="--output") from None
        typer.echo(f"wrote {output}", err=True)


def _check_writable(path: Path | None, option: str) -> None:
    """Fail before planning, not after, when an output file's folder is missing."""
    if path is not None and not path.parent.is_dir():
        raise typer.BadParameter(f"folder {path.parent} does not exist", param_hint=option)
    if path is not None and path.is_dir():
        raise typer.BadParameter(f"{path} is a folder, not a file", param_hint=option)


@app.command()
def plan(
    specs: Annotated[list[Path], typer.Argument(metavar="SPEC...", help="Spec file(s) (YAML).", show_default=False)],
    catalog: Annotated[Path | None, typer.Option(help="Catalog file to use instead of the cache/bundled one.")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table | json | csv | markdown | html")] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report here.")] = None,
    top: Annotated[int, typer.Option(min=1, help="Show this many ranked options.")] = 10,
    explain: Annotated[bool, typer.Option(help="List every rejected offer with its reason.")] = False,
    save_plan: Annotated[Path | None, typer.Option(help="Freeze the winning option into a plan file.")] = None,
) -> None:
    """Rank every offer for SPEC by expected total cost and print the comparison. Buys nothing.

    With several specs each gets its report or its one error line; the exit code is the worst.
    """
    if format not in FORMATS:
        raise typer.BadParameter(f"must be one of {', '.join(FORMATS)}", param_hint="--format")
    if format in ("html", "csv") and len(specs) > 1:
        raise typer.BadParameter("html and csv take one spec at a time", param_hint="--format")
    if save_plan and len(specs) != 1:
        raise typer.BadParameter("needs exactly one spec", param_hint="--save-plan")
    _check_writable(output, "--output")
    _check_writable(save_plan, "--save-plan")
    from provisioner.workflow import plan_report

    reports: list[str] = []
    worst = 0
    for spec in specs:
        try:
            reports.append(plan_report([spec], catalog_path=catalog, fmt=format, top=top, explain=explain,
                                       save_plan_to=save_plan))
        except ProvisionerError as exc:
            if len(specs) == 1 and not _explained(exc):
                raise
            typer.echo(error_line(exc), err=True)
            worst = max(worst, exc.exit_code)
            if _explained(exc):
                reports.append(str(exc.report))  # type: ignore[attr-defined]
            elif format == "json":
                reports.append(_json_error(spec, exc))
    if reports:
        _echo(_join_reports(reports, format, several=len(specs) > 1), output)
    if save_plan and not worst:
        typer.echo(f"saved plan to {save_plan}", err=True)
    if worst:
        raise typer.Exit(worst)


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


@app.command()
def schema() -> None:
    """Print the spec's JSON Schema (point your editor's YAML language server at it)."""
    import json

    from provisioner.spec import ClusterSpec

    document = ClusterSpec.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "provisioner cluster spec"
    typer.echo(json.dumps(document, indent=2))


@app.command()
def render(
    source: Annotated[Path, typer.Argument(help="A spec (YAML) or a saved plan (JSON).")],
    out: Annotated[Path, typer.Option("--out", help="Directory to write the files into.")],
    catalog: Annotated[Path | None, typer.Option(help="Catalog used when SOURCE is a spec.")] = None,
    topology: Annotated[Path | None, typer.Option(
        help="YAML/JSON mapping node name (<cluster>-<i>) to its switch path, outermost first, "
             "for Slurm's topology.conf (default: one flat switch).")] = None,
) -> None:
    """Write every file the cluster needs: cloud-init and bootstrap script per role, Slurm or Kubernetes
    configs, job helpers. Cluster secrets are kept (0600) beside a saved plan (PLAN.secrets.json) or in
    OUT/.cluster-secrets.json for a spec, and reused on the next render."""
    from provisioner.render import render_to_dir
    from provisioner.secrets import secrets_path_for
    from provisioner.workflow import load_topology, plan_from_source

    plan = plan_from_source(source, catalog_path=catalog)
    secrets_file = secrets_path_for(source, out)
    written = render_to_dir(plan, out, secrets_file=secrets_file,
                            topology=load_topology(topology) if topology else None)
    for path in written:
        typer.echo(str(path))
    typer.echo(f"cluster secrets: {secrets_file} (0600; rendering again reuses them)", err=True)


@catalog_app.callback(invoke_without_command=True)
def catalog_list(
    ctx: typer.Context,
    provider: Annotated[str | None, typer.Option(help="Only this provider.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Only this GPU model, e.g. H100.")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
    catalog: Annotated[Path | None, typer.Option(help="Catalog file to list.")] = None,
) -> None:
    """List offers from the catalog in use (the refreshed cache if present, else the bundled one)."""
    if ctx.invoked_subcommand is not None:
        return
    from provisioner.workflow import catalog_listing

    if format not in ("table", "json"):
        raise typer.BadParameter("must be table or json", param_hint="--format")
    from provisioner.spec import PROVIDER_NAMES

    if provider is not None and provider not in PROVIDER_NAMES:
        hint = f"did you mean {provider.lower()!r}? " if provider.lower() in PROVIDER_NAMES else ""
        raise typer.BadParameter(f"unknown provider {provider!r}; {hint}known: {', '.join(PROVIDER_NAMES)}",
                                 param_hint="--provider")
    _echo(catalog_listing(catalog_path=catalog, provider=provider, gpu=gpu, fmt=format), None)


@catalog_app.command("refresh")
def catalog_refresh(
    provider: Annotated[list[str] | None, typer.Option(help="Refresh only these providers.")] = None,
) -> None:
    """Fetch live offers from the providers' APIs and write the dated cache `plan` then uses."""
    from provisioner.refresh import refresh_catalog

    result = refresh_catalog(provider or None)
    typer.echo(result.summary)
    result.raise_for_failures()


app.command("validate")(validate)


@app.command("gc")
def gc(
    provider: Annotated[str | None, typer.Option(help="Only this provider (default: every one with credentials).")]
    = None,
    cluster: Annotated[str | None, typer.Option(help="Only this cluster, collected whatever its record says.")]
    = None,
    yes: Annotated[bool, typer.Option("--yes", help="Delete what is found (default: only list it).")] = False,
) -> None:
    """List (or with --yes delete) nodes the tool made that have no local record or whose expiry passed."""
    from provisioner.lifecycle.gc import collect_garbage

    try:
        report = collect_garbage(provider=provider, cluster_id=cluster, delete=yes)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--provider") from None
    typer.echo(report.render())
    raise typer.Exit(report.exit_code)
app.add_typer(node_app, name="node")
register_lifecycle(app)  # up, down, status, outputs, ssh, burst (provisioner/lifecycle/cli.py)


def _typer_exception(name: str) -> type[BaseException]:
    """Click's exception ``name`` as this typer raises it.

    typer >= 0.16 vendors click (``typer._click``) and no longer installs it; older typer uses the
    real click. Both put ``ClickException``/``UsageError`` in ``typer.BadParameter``'s MRO, so
    importing click is never needed (a runtime-only install has none).
    """
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == name:
            return cls
    raise LookupError(name)  # pragma: no cover - every typer since 0.9 has both


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _usage_message(exc: BaseException) -> str:
    """One line for a usage mistake: the problem, and which --help to read."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "provisioner"
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
        # A group run without a command (`provisioner`, `provisioner node`).
        names = ctx.command.list_commands(ctx) if hasattr(ctx.command, "list_commands") else []
        choices = f" (one of: {', '.join(names)})" if names else ""
        return f"error: {where}: missing command{choices}; see '{where} --help'"
    return f"error: {_one_line(exc.format_message())} (see '{where} --help')"  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Returns the exit code (never raises for user or provider errors).

    Every usage mistake is one line on stderr and exit 2; a ProvisionerError is its one line and
    its exit code (a located ``FILE:LINE:COL: path: message`` for spec problems).
    """
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="provisioner", standalone_mode=False)
    except ProvisionerError as exc:
        typer.echo(error_line(exc), err=True)
        return exc.exit_code
    except typer.Exit as exc:
        return int(getattr(exc, "exit_code", 0))
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        return 130
    except _typer_exception("UsageError") as exc:
        typer.echo(_usage_message(exc), err=True)
        return 2
    except _typer_exception("ClickException") as exc:
        typer.echo(f"error: {_one_line(exc.format_message())}", err=True)  # type: ignore[attr-defined]
        return 1
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A file we were told to read or write is unusable (permissions, full disk, ...).
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"error: {where}{_one_line(exc.strerror or exc)}", err=True)
        return 1
    return result if isinstance(result, int) else 0


def error_line(exc: ProvisionerError) -> str:
    """The one line a ProvisionerError prints: located errors as they are, others after ``error:``."""
    return str(exc) if isinstance(exc, SpecError) else f"error: {_one_line(exc)}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
