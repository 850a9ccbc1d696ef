"""Read and write offer catalogs: the bundled snapshot, a user file, the refreshed cache, columnar files.

A catalog file is JSON (or YAML) matching ``provisioner.offer.Catalog`` (numbers read as exact
decimals), or a columnar ``.npz`` written by ``save_columnar`` (10^6 offers load in a fraction of
a second). Both are untrusted: the JSON through the ``Offer`` model, the columnar file through
the same rules vectorized (``provisioner.columns.problems``); either way a bad value is a
one-line CatalogError naming the file and ``offers[i].field``, never a traceback. A JSON catalog
can be compiled once into a columnar cache file (``load_catalog(path, cache_dir=...)``), keyed by
the JSON's path, size and mtime. Which file is used is decided by the caller (the CLI):
``--catalog FILE`` beats the refreshed cache, which beats the bundled snapshot. No network.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from provisioner.catalog_model import Catalog, TableCatalog
from provisioner.errors import CatalogError
from provisioner.offer import Offer, ProviderInfo

if TYPE_CHECKING:
    pass

BUNDLED = "bundled"
COLUMNAR_SUFFIX = ".npz"
MAX_CATALOG_BYTES = 2 * 1024**3
LARGE_CATALOG_BYTES = 1024**2
"""A catalog file larger than this is read by ``provisioner.catalog_json`` (JSON straight into columns,
checked by the columnar rules) instead of a JSON tree and an ``Offer`` model per offer; YAML that
large is refused with a hint to convert it."""
BUNDLED_FILE = Path(__file__).with_name("data") / "catalog.json"


def load_bundled_catalog() -> Catalog:
    """The snapshot shipped inside the package (a plain file: importlib.resources costs a plan ~10 ms)."""
    text = BUNDLED_FILE.read_text(encoding="utf-8")
    return parse_catalog(text, BUNDLED)


def load_catalog(path: str | Path, *, cache_dir: Path | None = None, models: bool = False) -> Catalog | TableCatalog:
    """A catalog file: JSON/YAML (a ``Catalog``) or columnar ``.npz`` (a ``TableCatalog``).

    With ``cache_dir``, a JSON catalog is compiled once into a columnar file there (keyed by
    its path, size and mtime) and later calls read that instead. Raises CatalogError naming
    the file and the first bad field.

    ``models`` reads a JSON/YAML file of any size into a ``Catalog`` of ``Offer`` models (what
    ``catalog refresh`` merges into); otherwise a file over ``LARGE_CATALOG_BYTES`` comes back as a
    ``TableCatalog``.
    """
    path = Path(path)
    if path.suffix == COLUMNAR_SUFFIX:
        return load_columnar(path)
    cached = _cache_file(path, cache_dir) if cache_dir is not None else None
    if cached is not None and cached.is_file():
        try:
            return load_columnar(cached, origin=str(path))
        except CatalogError:
            pass  # a damaged cache entry is rebuilt below
    try:
        size = path.stat().st_size
        if size > MAX_CATALOG_BYTES:
            raise CatalogError(f"{path}: catalog is over {MAX_CATALOG_BYTES >> 20} MiB")
        if size > LARGE_CATALOG_BYTES and not models:
            catalog: Catalog | TableCatalog = _large(path)
        else:
            catalog = parse_catalog(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read catalog: {getattr(exc, 'strerror', None) or exc}") from None
    if cached is not None:
        with contextlib.suppress(OSError):  # a read-only cache only costs speed
            save_columnar(catalog, cached)
    return catalog


def _large(path: Path) -> TableCatalog:
    """A catalog over ``LARGE_CATALOG_BYTES``: JSON goes straight into columns; YAML is refused."""
    with path.open("rb") as handle:
        head = handle.read(4096)
    if not head.lstrip().startswith(b"{"):
        raise CatalogError(
            f"{path}: a YAML catalog over {LARGE_CATALOG_BYTES >> 20} MiB is refused (parsing it "
            "takes seconds per MiB); write it as JSON once, e.g. python -c 'import json, sys, yaml; "
            "json.dump(yaml.safe_load(sys.stdin), sys.stdout)' < CATALOG.yaml > CATALOG.json"
        )
    import mmap

    from provisioner.catalog_json import decode_table_catalog

    _keep_freed_memory()

    with path.open("rb") as handle:
        # mapped, not read: no copy of the text. Never closed here: a CatalogError's traceback may still
        # hold views into it; the mapping goes with the last of them.
        try:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as exc:  # emptied since it was measured
            raise CatalogError(f"{path}: cannot read catalog: {exc}") from None
    return decode_table_catalog(mapped, str(path))


def _keep_freed_memory() -> None:
    """Let glibc's malloc keep memory it gets back, for this process: reading a large catalog (and planning
    on it) allocates and frees blocks of hundreds of KiB to a few MiB over and over, and by default each
    one is handed back to the kernel and faulted in again, zeroed (a third of the CPU time at 10^6 offers
    went to the kernel). Freed memory stays in the heap instead (up to ``_KEEP_BYTES`` of it); the peak
    is unchanged. Nothing happens where the C library has no ``mallopt``."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)  # blocks below it come from the heap (and go back to it)
    mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES)  # free memory at the heap's top kept up to this much


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_MMAP_BYTES = 32 << 20  # glibc's largest
_KEEP_BYTES = 512 << 20


def _cache_file(path: Path, cache_dir: Path) -> Path | None:
    try:
        stat = path.resolve().stat()
    except OSError:
        return None
    key = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()
    import hashlib  # only a --catalog JSON file needs it (OpenSSL loads in ~5 ms)

    return cache_dir / "compiled" / f"{hashlib.sha256(key).hexdigest()[:32]}{COLUMNAR_SUFFIX}"


def parse_catalog(text: str, origin: str) -> Catalog:
    """A catalog from JSON (numbers read as exact decimals) or YAML text. CatalogError when invalid."""
    try:
        if text.lstrip().startswith("{"):
            data = json.loads(text, parse_float=Decimal, parse_int=_bounded_int, parse_constant=_no_constant)
        else:
            import yaml

            data = yaml.safe_load(text)
    except (ValueError, RecursionError) as exc:
        raise CatalogError(f"{origin}: not valid JSON/YAML: {' '.join(str(exc).split())[:200]}") from None
    except Exception as exc:  # yaml.YAMLError, imported lazily
        raise CatalogError(f"{origin}: not valid JSON/YAML: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(data, dict):
        raise CatalogError(f"{origin}: a catalog is a mapping with as_of, providers and offers")
    data["origin"] = origin
    try:
        catalog = Catalog.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise CatalogError(f"{origin}: {_where(first['loc'])}: {first['msg']}") from None
    missing = sorted({offer.provider for offer in catalog.offers} - set(catalog.providers))
    if missing:
        raise CatalogError(f"{origin}: offers from {', '.join(missing)} but no providers entry for them")
    return catalog


def _bounded_int(text: str) -> int | Decimal:
    if len(text.lstrip("-")) > 30:  # 10^400 is not a count or a price; int() of it would be slow
        return Decimal("Infinity")
    return int(text)


def _no_constant(name: str) -> Decimal:
    # NaN/Infinity parse to a non-finite Decimal, which the model refuses at its field (located)
    return Decimal(name)


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def save_columnar(catalog: Catalog | TableCatalog, path: Path) -> None:
    """Write ``catalog`` as a columnar ``.npz`` (atomically: a temporary file, then a rename)."""
    import numpy as np

    from provisioner.columns import FORMAT

    table = catalog.offer_table()
    meta = {
        "format": FORMAT,
        "as_of": catalog.as_of.isoformat(),
        "providers": {
            name: info.model_dump(mode="json", exclude_none=True) for name, info in catalog.providers.items()
        },
    }
    arrays: dict[str, Any] = {f"c.{name}": column for name, column in table.values.items()}
    arrays.update({f"d.{name}": names for name, names in table.names.items()})
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as handle:
        np.savez(handle, **arrays)
    os.replace(temporary, path)


def _npz_arrays(path: Path) -> dict[str, Any]:
    """The arrays of an ``.npz`` file (as ``np.savez`` writes it: stored, not compressed), mapped
    read-only from the file instead of copied out of the zip: 10^6 offers are ~190 MB of columns,
    which ``np.load`` would read, CRC and copy. Any other zip is read by ``np.load`` (no pickles).
    ValueError/OSError/BadZipFile for a file that is not such an archive."""
    import io
    import mmap
    import struct
    import zipfile

    import numpy as np

    with open(path, "rb") as handle:
        with zipfile.ZipFile(handle) as archive:
            members = archive.infolist()
        if any(m.compress_type != zipfile.ZIP_STORED for m in members):
            return _compressed_arrays(handle, members)
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if members else b""
    arrays: dict[str, Any] = {}
    for member in members:
        if not member.filename.endswith(".npy"):
            raise ValueError(f"{member.filename}: not an array")
        local = bytes(mapped[member.header_offset : member.header_offset + 30])
        if len(local) != 30 or local[:4] != b"PK\x03\x04":
            raise ValueError(f"{member.filename}: bad local header")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        start = member.header_offset + 30 + name_len + extra_len
        end = start + member.file_size
        plain = _plain_header(bytes(mapped[start : min(end, start + 256)]), member.filename)
        if plain is not None:
            shape, dtype, length = plain
        else:
            header = io.BytesIO(bytes(mapped[start : min(end, start + 65_536 + 16)]))
            shape, dtype = _array_header(header, member.filename)
            length = header.tell()
        offset = start + length
        if offset + shape[0] * dtype.itemsize > end or end > len(mapped):
            raise ValueError(f"{member.filename}: truncated")
        arrays[member.filename.removesuffix(".npy")] = np.frombuffer(mapped, dtype=dtype, count=shape[0], offset=offset)
    return arrays


MAX_NPZ_BYTES = 1 << 30
"""Most bytes a compressed ``.npz`` catalog may inflate to (10^6 offers are ~190 MB of columns)."""


_PLAIN_HEADER = re.compile(
    rb"\x93NUMPY\x01\x00(?P<size>..)\{'descr': '(?P<descr>[<>|][a-zA-Z][0-9]{0,4})', "
    rb"'fortran_order': False, 'shape': \((?P<rows>[0-9]{1,12}),\), \} *\n",
    re.DOTALL,
)
"""The ``.npy`` header np.savez writes for a flat array (format 1.0), read without numpy's parser."""


def _plain_header(head: bytes, name: str) -> tuple[tuple[int, ...], Any, int] | None:
    """(shape, dtype, header length) when ``head`` starts with a header as ``np.savez`` writes it for a
    flat array (``ast.literal_eval`` of each header is most of reading 49 of them); None for any other
    header, which ``_array_header`` reads. ValueError for a column of objects."""
    import numpy as np

    found = _PLAIN_HEADER.match(head)
    if found is None or found.end() != 10 + int.from_bytes(found["size"], "little"):
        return None
    try:
        dtype = np.dtype(found["descr"].decode("ascii"))
    except TypeError:
        return None
    if dtype.hasobject:
        raise ValueError(f"{name}: not a flat array of plain values")
    return (int(found["rows"]),), dtype, found.end()


def _array_header(stream: Any, name: str) -> tuple[tuple[int, ...], Any]:
    """(shape, dtype) of the ``.npy`` header at ``stream``; ValueError unless a flat array of plain values."""
    from numpy.lib import format as npy

    version = npy.read_magic(stream)
    shape, fortran, dtype = (npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0)(
        stream, max_header_size=65_536
    )
    if dtype.hasobject or fortran or len(shape) != 1:
        raise ValueError(f"{name}: not a flat array of plain values")
    return shape, dtype


def _compressed_arrays(handle: Any, members: list[Any]) -> dict[str, Any]:
    """The arrays of a compressed ``.npz`` (a zip bomb refused): every member's inflated size (which
    zipfile never reads past) must fit MAX_NPZ_BYTES in all, and every array's declared size its
    member, checked before anything is allocated. ValueError otherwise."""
    import zipfile

    import numpy as np

    if sum(member.file_size for member in members) > MAX_NPZ_BYTES:
        raise ValueError(f"inflates to more than {MAX_NPZ_BYTES >> 20} MiB")
    arrays: dict[str, Any] = {}
    with zipfile.ZipFile(handle) as archive:
        for member in members:
            if not member.filename.endswith(".npy"):
                raise ValueError(f"{member.filename}: not an array")
            with archive.open(member) as stream:
                shape, dtype = _array_header(stream, member.filename)
                size = shape[0] * dtype.itemsize
                if size > member.file_size:
                    raise ValueError(f"{member.filename}: declares more data than it holds")
                data = stream.read(size)
            if len(data) != size:
                raise ValueError(f"{member.filename}: truncated")
            arrays[member.filename.removesuffix(".npy")] = np.frombuffer(data, dtype=dtype, count=shape[0])
    return arrays


def load_columnar(path: Path, *, origin: str | None = None) -> TableCatalog:
    """A columnar catalog file, checked column by column. CatalogError (one line) when it is not one."""
    import zipfile

    import numpy as np

    from provisioner.columns import COLUMNS, FORMAT, OfferTable, problems

    origin = origin or str(path)
    try:
        arrays = _npz_arrays(path)
        meta = json.loads(bytes(arrays["meta"]).decode("utf-8"), parse_float=Decimal)
        values = {name[2:]: array for name, array in arrays.items() if name.startswith("c.")}
        names = {name[2:]: array for name, array in arrays.items() if name.startswith("d.")}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise CatalogError(f"{origin}: not a columnar catalog: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CatalogError(f"{origin}: not a columnar catalog ({FORMAT})")
    try:
        as_of = dt.date.fromisoformat(str(meta["as_of"]))
        providers = {str(k): ProviderInfo.model_validate(v) for k, v in dict(meta["providers"]).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise CatalogError(f"{origin}: providers: {' '.join(str(exc).split())[:200]}") from None
    for rest in ("price_rest", "spot_price_rest"):  # files written before exact prices: whole micro-USD
        if rest not in values and "gpus" in values:
            values[rest] = np.zeros(len(values["gpus"]), dtype=np.int64)
    if "block_hours" not in values and "gpus" in values:  # files written before Capacity Blocks: none is a block
        values["block_hours"] = np.zeros(len(values["gpus"]), dtype=np.int32)
        values["block_start"] = np.full(len(values["gpus"]), -1, dtype=np.int32)
        names["block_start"] = np.array([], "S1")
    for name in COLUMNS:
        column = values.get(name)
        if column is not None and (column.ndim != 1 or column.dtype.kind not in "iufb"):
            raise CatalogError(f"{origin}: offers column {name} is not a flat numeric column")
    table = OfferTable(values=values, names=names)
    for row, field_name, message in problems(table, frozenset(providers)):
        raise CatalogError(f"{origin}: offers[{row}].{field_name}: {message}")
    return TableCatalog(as_of=as_of, origin=origin, providers=providers, table=table)


def dump_catalog(catalog: Catalog) -> str:
    data = catalog.model_dump(mode="json", exclude={"origin"}, exclude_none=True)
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def merge_catalogs(base: Catalog, fresh: Catalog, providers: list[str]) -> Catalog:
    """``base`` with every offer of ``providers`` replaced by ``fresh``'s (a partial refresh)."""
    keep: list[Offer] = [offer for offer in base.offers if offer.provider not in providers]
    infos = dict(base.providers)
    infos.update({name: info for name, info in fresh.providers.items() if name in providers})
    offers = keep + [offer for offer in fresh.offers if offer.provider in providers]
    return Catalog(as_of=fresh.as_of, origin=fresh.origin, providers=infos, offers=offers)


__all__ = [
    "BUNDLED",
    "TableCatalog",
    "dump_catalog",
    "load_bundled_catalog",
    "load_catalog",
    "load_columnar",
    "merge_catalogs",
    "parse_catalog",
    "save_columnar",
]
