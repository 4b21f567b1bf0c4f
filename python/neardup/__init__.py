"""neardup from Python: its SQL functions inside datafusion-python, and the job itself.

    import datafusion, neardup
    ctx = datafusion.SessionContext().enable_url_table()   # files by path in FROM
    neardup.register(ctx)
    ctx.sql("SELECT id, simhash(text, 'mode=auto') AS h FROM 'crawl.parquet'").to_arrow_table()

    summary = neardup.run(input="crawl/", output="out/", k=3)   # the CLI's job and outputs
    groups = neardup.read("out/", table="groups")                # a pyarrow Table
    neardup.fingerprint(["文本一", "text two"], features="mode=auto")  # a pyarrow UInt64Array

The functions are the CLI's, compiled into this wheel, and reach datafusion-python through
datafusion-ffi; the FFI is tied to DataFusion's major version, so the wheel needs
``datafusion>=55,<56``.
"""

from __future__ import annotations

import json
from os import PathLike, fspath
from typing import Any, Iterable, Optional, Union

import pyarrow as pa

from . import _native
from ._native import NeardupError, UsageError

__all__ = [
    "NeardupError",
    "UsageError",
    "fingerprint",
    "functions",
    "match",
    "query",
    "read",
    "register",
    "run",
]
__version__ = _native.version

Path = Union[str, "PathLike[str]"]

#: The tables an output holds, and its input (a run's) as ``corpus``.
TABLES = ("signatures", "pairs", "groups", "dedup", "corpus")


def functions() -> list[str]:
    """The names of the SQL functions :func:`register` adds."""
    return [f.name for f in _native.scalar_functions()] + [
        f.name for f in _native.aggregate_functions()
    ]


def register(ctx: Any) -> None:
    """Registers neardup's SQL functions (simhash, simhash_details, clean_text, hamming,
    bucket, band_key, band_pairs, ...) in a ``datafusion.SessionContext``."""
    import datafusion

    # udf()/udaf() see the FFI capsule methods and wrap the foreign function.
    for function in _native.scalar_functions():
        ctx.register_udf(datafusion.udf(function))
    for function in _native.aggregate_functions():
        ctx.register_udaf(datafusion.udaf(function))


def run(*, input: Union[Path, Iterable[Path]], output: Path, **options: Any) -> dict:
    """Runs ``neardup run``: the same job, flags and outputs as the CLI. Each keyword is a flag
    with ``_`` for ``-`` (``memory_limit="4G"`` is ``--memory-limit 4G``); ``True`` gives a
    bare flag (``overwrite=True``), ``False`` and ``None`` leave it out, a list repeats it, and
    a dict is ``KEY=VALUE,...`` (``features={"mode": "words"}``).
    Returns the run's summary (summary.json) as a dict. Bad input raises
    :class:`NeardupError` with the CLI's message; options that cannot work raise
    :class:`UsageError`. Ctrl-C stops the job and leaves nothing behind."""
    return _job("run", dict(input=input, output=output, **options))


def match(*, signatures: Union[Path, Iterable[Path]], output: Path, **options: Any) -> dict:
    """Runs ``neardup match`` on fingerprints that are already computed; as :func:`run`."""
    return _job("match", dict(signatures=signatures, output=output, **options))


def read(out: Path, table: str = "groups") -> pa.Table:
    """One table of an output (local or on an object store) as a pyarrow Table:
    ``signatures``, ``pairs``, ``groups``, ``dedup``, or ``corpus`` (a run's input)."""
    if table not in TABLES:
        raise UsageError(f"no table {table!r} in an output; there are {', '.join(TABLES)}")
    return query(f'SELECT * FROM "{table}"', data=out)


def query(
    sql: str,
    data: Optional[Path] = None,
    index: Optional[Path] = None,
    overwrite: bool = False,
) -> pa.Table:
    """SQL as ``neardup query`` runs it: over an output's tables (``data``), an index's
    (``index``), and files by path, with neardup's functions. Returns the last statement's
    result as a pyarrow Table. A ``COPY ... TO`` an existing file replaces it only with
    ``overwrite=True`` (``--overwrite``)."""
    stream = _native.query(
        sql,
        data=None if data is None else fspath(data),
        index=None if index is None else fspath(index),
        overwrite=overwrite,
    )
    return pa.RecordBatchReader.from_stream(stream).read_all()


def fingerprint(texts: Iterable[Optional[str]], features: str = "") -> pa.Array:
    """The SimHash of each text, as ``simhash(text, features)`` gives it in SQL and the CLI
    stores it: a pyarrow UInt64Array (FixedSizeBinary(16) with ``bits=128``); None gives null.
    ``features`` takes the options of the SQL function, e.g. ``"mode=auto"``; "" means the
    defaults."""
    return pa.array(_native.fingerprint(list(texts), features))


def _job(command: str, options: dict) -> dict:
    return json.loads(_native.job([command, *_flags(options)]))


def _flags(options: dict) -> list[str]:
    argv: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                argv.extend([flag, _text(item)])
        else:
            argv.extend([flag, _text(value)])
    return argv


def _text(value: Any) -> str:
    if isinstance(value, PathLike):
        return fspath(value)
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)
