"""Load a ClusterSpec from YAML, turning every mistake into one located SpecError.

The YAML is composed into nodes first so each value keeps its line and column;
pydantic's error locations are then mapped back to the nearest node. Nothing
here raises anything but SpecError for bad input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from provisioner.errors import SpecError
from provisioner.spec import ClusterSpec, spec_problems

Loc = tuple[str | int, ...]
Marks = dict[Loc, tuple[int, int, int, int]]
"""path -> (key line, key column, value line, value column); the root and list items have key == value."""


MAX_SPEC_BYTES = 1024 * 1024
"""A spec is a page of YAML; anything over 1 MiB is refused before it is read or parsed."""
MAX_LIST_ITEMS = 1000
"""Longest list a spec may hold (GPU models, regions, CIDRs); real specs hold a handful."""
MAX_VALUES = 20_000
"""Most values (scalars, lists, mappings, alias expansions counted again) one spec may hold."""
MAX_DEPTH = 32
"""Deepest nesting of lists and mappings a spec may have (a real one nests 4 deep); refused while
composing, before Python's recursion limit is anywhere near."""


def load_spec(path: str | Path) -> ClusterSpec:
    """Read and validate a spec file. Raises SpecError (one line, located) on any problem.

    The size is checked before reading, so a huge file (or a device) fails fast.
    """
    path = Path(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror or exc}", file=str(path)) from exc
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(
            f"the spec is larger than {MAX_SPEC_BYTES // 2**20} MiB; a spec is a short YAML file", file=str(path)
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError("cannot read spec: not UTF-8 text", file=str(path)) from exc
    return parse_spec(text, str(path))


def parse_spec(text: str, file: str = "<spec>") -> ClusterSpec:
    """Validate spec text; ``file`` is only used in error messages."""
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(
            f"the spec is larger than {MAX_SPEC_BYTES // 2**20} MiB; a spec is a short YAML file", file=file
        )
    deep = deep_nesting_at(text)
    if deep is not None:
        raise SpecError(
            f"the document nests more than {MAX_DEPTH} levels deep", file=file, line=deep[0], column=deep[1]
        )
    data, marks = _compose(text, file)
    spec = _validate(data, marks, file)
    for field_path, message in spec_problems(spec):
        line, column = _mark_for(tuple(field_path.split(".")), marks, key=True)
        raise SpecError(message, path=field_path, file=file, line=line, column=column)
    return spec


def deep_nesting_at(text: str, limit: int = MAX_DEPTH) -> tuple[int, int] | None:
    """Line and column (1-based) of the first bracket that opens level ``limit + 1`` of a JSON or
    flow-YAML document, or None. A linear scan that skips quoted strings: run before a recursive
    parser (json, yaml) so a document nested thousands deep is refused with a place, not a
    RecursionError."""
    if text.count("[") + text.count("{") <= limit:  # the common case, at C speed
        return None
    depth, line, column, quote, escaped = 0, 1, 0, "", False
    for char in text:
        column += 1
        if char == "\n":
            line, column = line + 1, 0
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
            if depth > limit:
                return line, column
        elif char in "]}":
            depth = max(depth - 1, 0)
    return None


def spec_marks(text: str, file: str = "<spec>") -> Marks:
    """Line/column of every path in a spec document (for errors found after loading)."""
    return _compose(text, file)[1]


def locate(field_path: str, marks: Marks) -> tuple[int, int]:
    """Line and column of a dotted field path's key, falling back to its nearest parent."""
    return _mark_for(tuple(field_path.split(".")), marks, key=True)


# -- YAML to plain data with marks -------------------------------------------------------


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that also reads ``4e4`` and ``1.5e3`` as numbers (YAML 1.2 does; 1.1 does not).

    Numeric spec fields are strict, so without this ``size_gb: 4e4`` would be a string and
    a confusing "not a number" error. Quoted values stay strings.

    It also caps what composing may build, while it builds it: at most MAX_LIST_ITEMS items in
    one list or mapping and MAX_VALUES nodes in all, so an absurd document fails at the first
    item over the limit instead of after building millions of nodes.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.spec_file = "<spec>"
        self._composed = 0
        self._path: list[str | int] = []

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        step: str | int = ""  # a mapping key itself
        if isinstance(index, int):
            step = index
        elif isinstance(index, yaml.ScalarNode):
            step = str(index.value)
        if (isinstance(index, int) and index >= MAX_LIST_ITEMS) or (
            isinstance(parent, yaml.MappingNode) and len(parent.value) >= MAX_LIST_ITEMS
        ):
            self._refuse(f"more than {MAX_LIST_ITEMS} items in one list or mapping")
        self._composed += 1
        if self._composed > MAX_VALUES:
            self._refuse(f"more than {MAX_VALUES} values in one spec")
        if len(self._path) >= MAX_DEPTH:
            self._refuse(f"the document nests more than {MAX_DEPTH} levels deep")
        self._path.append(step)
        try:
            node = super().compose_node(parent, index)
            assert node is not None  # composing at an event that starts a node always yields one
            return node
        finally:
            self._path.pop()

    def _refuse(self, message: str) -> None:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        raise SpecError(
            message,
            path=_dotted(tuple(p for p in self._path if p != "")),
            file=self.spec_file,
            line=mark.line + 1,
            column=mark.column + 1,
        )


class _SmallSpecLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same reading of a spec of at most SMALL_SPEC_BYTES, composed by libyaml in C (when PyYAML
    has it): ~20x faster than composing in Python, which a real spec (a few KiB) always is. So small a
    document cannot hold enough nodes to matter; ``_build`` applies the same limits afterwards."""


SMALL_SPEC_BYTES = 16 * 1024

for _loader in (_SpecLoader, _SmallSpecLoader):
    _loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )


def syntax_error(exc: yaml.MarkedYAMLError, file: str) -> SpecError:
    """A YAML syntax error as one located line: ``FILE:LINE:COL: YAML syntax error: problem``."""
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
    return SpecError(f"YAML syntax error: {problem}", file=file, line=line, column=column)


def _compose(text: str, file: str) -> tuple[Any, Marks]:
    loader: Any = None
    try:
        if len(text) <= SMALL_SPEC_BYTES:
            loader = _SmallSpecLoader(text)  # the reader refuses control characters right here
        else:
            loader = _SpecLoader(text)
            loader.spec_file = file
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        raise syntax_error(exc, file) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {' '.join(str(exc).split())}", file=file) from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        raise SpecError("the spec is empty", file=file)
    marks: Marks = {}
    constructor = yaml.SafeLoader("")
    data = _build(root, (), marks, constructor, file)
    return data, marks


def _build(
    node: yaml.Node, loc: Loc, marks: Marks, ctor: yaml.SafeLoader, file: str, key_at: tuple[int, int] | None = None
) -> Any:
    value_at = (node.start_mark.line + 1, node.start_mark.column + 1)
    marks[loc] = (*(key_at or value_at), *value_at)
    if len(marks) > MAX_VALUES:  # aliases reuse nodes: `[*a, *a, ...]` of `[*b, *b, ...]` grows fast
        raise SpecError(
            f"more than {MAX_VALUES} values in one spec (aliases expanded)",
            path=_dotted(loc[:3]),
            file=file,
            line=value_at[0],
            column=value_at[1],
        )
    if len(loc) > MAX_DEPTH:  # only a recursive alias (&a [*a]) nests this deep in a spec
        raise SpecError(
            "document nests too deeply (recursive alias?)",
            path=_dotted(loc[:3]),
            file=file,
            line=value_at[0],
            column=value_at[1],
        )
    if isinstance(node, yaml.CollectionNode) and len(node.value) > MAX_LIST_ITEMS:  # composed in C, unchecked
        first_over = node.value[MAX_LIST_ITEMS]
        at = (first_over[0] if isinstance(first_over, tuple) else first_over).start_mark
        raise SpecError(
            f"more than {MAX_LIST_ITEMS} items in one list or mapping",
            path=_dotted(loc[:3]),
            file=file,
            line=at.line + 1,
            column=at.column + 1,
        )
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            where = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                raise SpecError(
                    "keys must be plain names", path=_dotted(loc), file=file, line=where[0], column=where[1]
                )
            key = key_node.value
            if key in result:
                raise SpecError(
                    f"duplicate key {key!r}", path=_dotted((*loc, key)), file=file, line=where[0], column=where[1]
                )
            result[key] = _build(value_node, (*loc, key), marks, ctor, file, where)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*loc, index), marks, ctor, file) for index, item in enumerate(node.value)]
    try:
        return ctor.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, IndexError, KeyError, AttributeError) as exc:
        line, column = value_at
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(
            f"unsupported value: {' '.join(str(problem).split())}",
            path=_dotted(loc),
            file=file,
            line=line,
            column=column,
        ) from None


# -- pydantic errors to located lines ----------------------------------------------------


def _validate(data: Any, marks: Marks, file: str) -> ClusterSpec:
    if not isinstance(data, Mapping):
        line, column = marks[()][2:]
        raise SpecError("a spec is a mapping of keys (name:, gpus:, ...)", file=file, line=line, column=column)
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        error = _first_error(exc)
        loc: Loc = tuple(part for part in error["loc"] if not _is_union_tag(part))
        # Point at the key for unknown/missing keys, at the value for a bad value.
        line, column = _mark_for(loc, marks, key=error["type"] in ("extra_forbidden", "missing"))
        raise SpecError(_message(error, loc), path=_dotted(loc), file=file, line=line, column=column) from None


def _first_error(exc: ValidationError) -> Any:
    # Prefer an unknown key over errors it causes elsewhere; otherwise document order.
    errors = exc.errors()
    return next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])


def _is_union_tag(part: str | int) -> bool:
    # pydantic adds the union member's type name to loc ("int", "constrained-int", ...)
    return isinstance(part, str) and (
        part in {"int", "float", "str", "bool", "list[str]", "none"} or part.startswith(("constrained-", "function-"))
    )


def _message(error: Any, loc: Loc) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        known = _field_names(loc[:-1])
        import difflib  # only a misspelt key needs it

        guess = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {guess[0]!r}?" if guess else f"; expected one of: {', '.join(known)}"
        return f"unknown key {key!r}{hint}"
    if kind == "missing":
        return "required field is missing"
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind == "model_type":
        message = "expected a mapping of keys"
    if kind in _TYPE_ERRORS:
        message += f", got {_yaml_type(error.get('input'))}"
    return message


_TYPE_ERRORS = {"int_type", "float_type", "string_type", "bool_type", "list_type", "dict_type", "model_type"}


def _yaml_type(value: object) -> str:
    """How a YAML author would name a value's type: ``got a quoted string``, ``got true``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string (remove the quotes?)" if _looks_numeric(value) else "a string"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _field_names(loc: Loc) -> list[str]:
    model: type[BaseModel] | None = ClusterSpec
    for part in loc:
        if model is None or isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return sorted(model.model_fields) if model else []


def _mark_for(loc: Loc, marks: Marks, *, key: bool = False) -> tuple[int, int]:
    for end in range(len(loc), -1, -1):
        if loc[:end] in marks:
            found = marks[loc[:end]]
            # A missing field's nearest parent is a mapping: point at its key, not its first child.
            return found[:2] if key or end < len(loc) else found[2:]
    return (1, 1)


def _dotted(loc: Loc) -> str:
    return ".".join(str(part) for part in loc)


__all__ = ["MAX_DEPTH", "deep_nesting_at", "load_spec", "locate", "parse_spec", "spec_marks", "syntax_error"]
