"""The command line's parser pieces, on the standard library's argparse.

argparse starts in a few milliseconds, where a decorator-driven CLI library building its
parameters at start-up cost this tool a quarter of a second on every ``provisioner plan``.
Every command module (provisioner/cli.py, lifecycle/cli.py, validation/cli.py) declares its
parsers with these helpers; provisioner/cli.py runs them.

A usage mistake never exits from inside argparse: ``Parser.error`` raises ``UsageError``,
which the entry point prints as one line (exit 2). ``--help`` output starts ``Usage: ``.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from provisioner.errors import UsageError

Handler = Callable[..., int | None]


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def add_usage(self, usage: str | None, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose mistakes raise UsageError instead of printing usage and exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]  # raises instead of exiting
        raise UsageError(message, where=self.prog)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, with words no option takes pointed at the chosen command's help (argparse
        blames the top parser: ``provisioner costs nope`` said see 'provisioner --help')."""
        found, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = chosen(self, found)
            hint = _option_hint(extras, parser)
            raise UsageError(f"unrecognized arguments: {' '.join(extras)}{hint}", where=parser.prog)
        return found

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check of a value against its choices (a command name, ``--format``), with the
        choice it most likely misspells (``plna``: did you mean 'plan'?)."""
        if action.choices is None or value in action.choices:
            return
        from provisioner.suggest import did_you_mean

        hint = did_you_mean(str(value), [str(choice) for choice in action.choices])
        listed = ", ".join(repr(choice) for choice in action.choices)
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}{'; ' + hint if hint else ' '}(choose from {listed})"
        )


def _option_hint(extras: list[str], parser: argparse.ArgumentParser) -> str:
    """``; did you mean '--format'?`` for the first unknown option that misspells one of ``parser``'s."""
    from provisioner.suggest import did_you_mean

    for word in extras:
        if word.startswith("--"):
            hint = did_you_mean(word.split("=", 1)[0], [o for o in parser._option_string_actions if o.startswith("--")])
            if hint:
                return "; " + hint.rstrip()
    return ""


class Commands:
    """A parser's subcommands. With ``only`` set (the command named on the command line), the other
    commands are not built at all: argparse spends ~0.4 ms per parser, and a run needs one."""

    def __init__(self, action: Any, only: str | None = None) -> None:
        self.action = action
        self.only = only

    def add(self, name: str, description: str, handler: Handler | None = None) -> Any:
        if self.only is not None and name != self.only:
            return _Unbuilt()
        summary_line = " ".join(description.split("\n\n", 1)[0].split())
        parser = self.action.add_parser(name, help=summary_line, description=description)
        if handler is not None:
            parser.set_defaults(handler=handler)
        return parser


class _Unbuilt:
    """Stands in for a command this run does not use: declaring its options does nothing."""

    def add_argument(self, *args: Any, **kwargs: Any) -> None:
        return None


def command(group: Commands, name: str, handler: Handler) -> Any:
    """Add subcommand ``name`` to ``group``, run by ``handler``.

    Its help is the handler's docstring; parsed options reach the handler as keyword arguments
    named by each option's ``dest``.
    """
    return group.add(name, inspect.getdoc(handler) or "", handler)


def commands(parser: Any, title: str = "commands", only: str | None = None) -> Commands:
    """The subcommands of ``parser`` (a command is optional so ``main`` can name the choices).
    ``only``: build just this one (see Commands)."""
    if isinstance(parser, _Unbuilt):
        return Commands(None, only="")  # builds nothing
    action = parser.add_subparsers(title=title, dest=_dest(parser), metavar="COMMAND")
    return Commands(action, only)


def int_range(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` accepting whole numbers in [low, high]."""
    return _ranged(int, "a whole number", low, high)


def float_range(low: float | None = None, high: float | None = None) -> Callable[[str], float]:
    """An argparse ``type`` accepting finite numbers in [low, high]."""
    return _ranged(float, "a finite number", low, high)


def _ranged(convert: Callable[[str], Any], noun: str, low: float | None, high: float | None) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}")
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"{value:g} is below the minimum {low:g}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{value:g} is above the maximum {high:g}")
        return value

    return parse


def provider_name(text: str) -> str:
    """An argparse ``type`` accepting a registered provider's name (``--provider``): a typo is one
    usage line (exit 2) before any command runs, never a KeyError from the registry."""
    from provisioner.providers.registry import REGISTRY

    if text in REGISTRY:
        return text
    from provisioner.suggest import did_you_mean

    hint = did_you_mean(text, REGISTRY)
    raise argparse.ArgumentTypeError(f"unknown provider {text!r}; {hint}known: {', '.join(REGISTRY)}")


def cluster_name(text: str, *, option: str = "--cluster", file_too: bool = False) -> str:
    """``text`` when it is a cluster name as a spec writes it (2-40 of a-z, 0-9 and '-'), else
    UsageError; ``file_too``: the option also takes a spec or plan file (the message says so)."""
    import re

    from provisioner.spec import NAME_PATTERN

    if re.fullmatch(NAME_PATTERN, text):
        return text
    what = "neither a spec/plan file nor a cluster name" if file_too else "not a cluster name"
    raise UsageError(
        f"{text[:60]!r} is {what} (2-40 lowercase letters, digits and dashes, starting with a letter)", option=option
    )


def output_file(option: str, example: str) -> Callable[[str], Path]:
    """An argparse ``type`` for an option naming a file to write (``--output``, ``--save-plan``).

    Refused while the command line is read (UsageError naming the path, exit 2), so no work is done
    only to fail at the end: a path naming a folder (a trailing slash, or an existing folder: the
    message names a file inside it, ``example``), a missing folder, or a place no file can be made
    (a read-only or virtual file system such as /proc, no permission). The check opens the file for
    appending and removes it again when it did not exist, so it answers what the write will meet; an
    existing path that is not a regular file (a device, a pipe) is left unopened."""

    def parse(text: str) -> Path:
        path = Path(text)
        if text.endswith(("/", os.sep)) or path.is_dir():
            raise UsageError(
                f"{text} names a folder, not a file; name a file in it, e.g. {path / example}", option=option
            )
        if not path.parent.is_dir():
            raise UsageError(f"folder {path.parent} does not exist", option=option)
        existed = path.exists()
        if existed and not path.is_file():  # /dev/stdout, a pipe from >(...): opening it once would end it
            return path
        try:
            with open(path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise UsageError(f"cannot write {text}: {exc.strerror or exc}", option=option) from None
        if not existed:
            path.unlink(missing_ok=True)
        return path

    return parse


def output_dir(option: str) -> Callable[[str], Path]:
    """An argparse ``type`` for an option naming a folder to write into (``render --out``): refused
    while the command line is read (UsageError naming the path, exit 2) when it names a file, or when
    nothing can be made in it or in its nearest existing parent (a folder is made there and removed)."""

    def parse(text: str) -> Path:
        path = Path(text)
        if path.exists() and not path.is_dir():
            raise UsageError(f"{text} is a file, not a folder", option=option)
        existing = next(candidate for candidate in (path, *path.parents, Path(".")) if candidate.exists())
        if not existing.is_dir():
            raise UsageError(f"cannot make {text}: {existing} is a file, not a folder", option=option)
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".provisioner-probe-", dir=existing))
        except OSError as exc:
            raise UsageError(f"cannot write into {text}: {exc.strerror or exc}", option=option) from None
        return path

    return parse


def flag(
    parser: Any, name: str, help: str, *, default: bool | None = False, negatable: bool = True, dest: str | None = None
) -> None:
    """A boolean option: ``--name/--no-name`` (negatable) or just ``--name``."""
    action: Any = argparse.BooleanOptionalAction if negatable else "store_true"
    extra: dict[str, Any] = {"dest": dest} if dest else {}
    parser.add_argument(name, action=action, default=default, help=help, **extra)


def recover_options(cmd: argparse.ArgumentParser, anywhere: str) -> None:
    """``--recover same|anywhere`` and ``--max-moves`` (burst and watch); ``anywhere`` says what a
    move does for this command."""
    cmd.add_argument("--recover", choices=("same", "anywhere"), default="same", help=anywhere)
    cmd.add_argument(
        "--max-moves",
        type=int_range(0, 100),
        default=None,
        help="Moves at most with --recover anywhere (default: the spec's checkpoint.max_moves, 2).",
    )


def subcommand_names(parser: argparse.ArgumentParser) -> list[str]:
    """The names of ``parser``'s subcommands, in the order they were added."""
    return list(subparsers(parser))


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser``'s subcommand parsers by name (empty for a leaf command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def split_trailing(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``argv`` before the first ``--`` and the words after it (None without a ``--``).

    A command's trailing COMMAND (``ssh``, ``burst``) is everything after ``--``, options
    included; argparse alone cannot take it after other options.
    """
    if "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def handler_arguments(handler: Handler, namespace: argparse.Namespace) -> dict[str, Any]:
    """The parsed options ``handler`` takes (a group's own options, e.g. ``catalog --gpu``, stay out of
    its subcommand's call)."""
    taken = inspect.signature(handler).parameters
    return {key: value for key, value in vars(namespace).items() if key in taken}


def chosen(parser: argparse.ArgumentParser, namespace: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost parser ``namespace`` went through (for a group run without its command)."""
    children = subparsers(parser)
    name = getattr(namespace, _dest(parser), None)
    return chosen(children[name], namespace) if name in children else parser


def _dest(parser: argparse.ArgumentParser) -> str:
    """Where the name of the subcommand chosen under ``parser`` is stored in the namespace."""
    return f"command_{parser.prog.replace(' ', '_')}"


def missing_command(parser: argparse.ArgumentParser) -> UsageError:
    names = subcommand_names(parser)
    return UsageError(f"missing command (one of: {', '.join(names)})", where=parser.prog)


__all__ = [
    "Commands",
    "Handler",
    "Parser",
    "chosen",
    "cluster_name",
    "command",
    "commands",
    "flag",
    "float_range",
    "handler_arguments",
    "int_range",
    "missing_command",
    "output_dir",
    "output_file",
    "provider_name",
    "split_trailing",
    "subcommand_names",
    "subparsers",
]
