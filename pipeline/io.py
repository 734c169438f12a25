"""Deterministic writers: the same frame gives byte-identical files, so ``dvc repro`` does not churn."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


# Prefix of the temporary file an output is written to before it is renamed into place:
# ``.partial-<pid>-<name>`` (``.dvcignore`` and ``.gitignore`` list it).
PARTIAL_PREFIX = ".partial-"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a scratch or partial file of a dead one is stale)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_partials(path: Path, suffix: str = "") -> None:
    """Remove ``path``'s partial outputs left by killed writers (their pid no longer runs):
    ``.partial-<pid>-<name><suffix>``, a file or a folder (``io_parts``' folders of parts and
    old outputs moved aside: ``suffix`` "*")."""
    for old in path.parent.glob(f"{PARTIAL_PREFIX}*-{path.name}{suffix}"):
        pid = old.name[len(PARTIAL_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink(missing_ok=True)


def name_output(exc: BaseException, path: Path) -> None:
    """pyarrow's "no space left" names no file: name the output ``path``."""
    if isinstance(exc, OSError) and exc.filename is None:
        exc.filename = str(path)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path in ``path``'s folder; on success rename it onto ``path``.

    A stage killed at any moment leaves the old file or none, never a truncated one: the
    rename is atomic within a folder (POSIX ``rename``). On an exception the temporary file is
    removed and ``path`` is left as it was. A partial file that a killed writer left is removed
    the next time ``path`` is written (DVC reruns a stage it killed: its outputs are gone).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(path)
    tmp = path.with_name(f"{PARTIAL_PREFIX}{os.getpid()}-{path.name}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        name_output(exc, path)
        raise


def write_text(text: str, path: str | Path) -> None:
    """Write UTF-8 text atomically (see ``atomic_path``)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


# Fixed writer settings (no wall-clock metadata): the same table gives the same bytes. Streamed
# writers (pyarrow.parquet.ParquetWriter) use them too.
PARQUET_OPTIONS: dict[str, Any] = dict(compression="zstd", compression_level=3,
                                       use_dictionary=True, write_statistics=True, version="2.6")


def write_parquet(df: pd.DataFrame, path: str | Path, schema: pa.Schema | None = None) -> None:
    """Write ``df`` without its index, with fixed writer settings and no wall-clock metadata.

    Row order is the caller's responsibility: sort before writing.
    """
    table = pa.Table.from_pandas(df.reset_index(drop=True), schema=schema, preserve_index=False)
    # pandas metadata embeds the pandas version only; keep it so round-trips restore dtypes.
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **PARQUET_OPTIONS)


def write_csv(df: pd.DataFrame, path: str | Path, significant: int = 10) -> None:
    """Plot data for ``dvc plots``: no index, ``\n`` line ends, floats to ``significant`` digits
    (stable across platforms' last-ulp noise)."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format=f"%.{significant}g", lineterminator="\n")


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        if not math.isfinite(value):
            return None
        # 12 significant digits: stable across platforms' last-ulp noise, ample for reporting.
        return float(f"{value:.12g}")
    if isinstance(value, np.bool_):
        return bool(value)
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def write_json(obj: Any, path: str | Path) -> None:
    """Write JSON with sorted keys, NaN/inf as null and floats rounded to 12 significant digits."""
    write_text(json.dumps(_clean(obj), indent=2, sort_keys=True, allow_nan=False) + "\n", path)
