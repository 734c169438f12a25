"""Hardware and model catalogs, and the resolution of the names the data uses for them.

Three CSV files under ``data/catalog/`` (columns, units and rules: ``data/catalog/README.md``):
``hardware.csv`` (one row per accelerator id; dense peaks, HBM, scale-up/scale-out bandwidth
*per direction*), ``accelerator_aliases.csv`` (spelling -> id; an empty id marks a known but
ambiguous name such as bare ``A100``) and ``models.csv`` (shapes, parameter counts).

Resolution is exact, never fuzzy: :func:`name_key` normalises case and separators, then a dict
look-up. Accelerators get one more documented rule, :func:`strip_remarks` ("A100 80GB SXM
(Selene; 8x200Gb/s HDR)" -> "A100 80GB SXM"). Models get generic aliases instead ("GPT (1.7B;
24 layers, ...)" with params 1.7e9 -> megatron-gpt-1.7b), resolved only with a parameter count.
Nothing is cached globally: :func:`load_catalog` reads and validates on each call.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from pipeline.config import ConfigError
from pipeline.vocab import PRECISION_ALIASES

HARDWARE_FILE = "hardware.csv"
ALIASES_FILE = "accelerator_aliases.csv"
MODELS_FILE = "models.csv"

# Precision -> hardware.csv column of the dense peak at that precision.
PEAK_COLUMNS: dict[str, str] = {
    "bf16": "peak_bf16_flops_per_s",
    "fp16": "peak_fp16_flops_per_s",
    "fp8": "peak_fp8_flops_per_s",
    "tf32": "peak_tf32_flops_per_s",
    "fp32": "peak_fp32_flops_per_s",
}
# When a chip lists no peak at the asked precision, the only substitution made is between the
# two 16-bit formats: on every catalogued chip that has both, their dense tensor rates are equal,
# so a V100 (no bf16) run at "bf16" is rated at its fp16 peak and a TPU (no fp16) at bf16. The
# precision actually used is returned so that the caller can record the substitution. fp8, tf32
# and fp32 never fall back: a chip without fp8 units has no fp8 peak.
PRECISION_FALLBACK: dict[str, tuple[str, ...]] = {"bf16": ("fp16",), "fp16": ("bf16",)}
# Relative tolerance between a stated parameter count and a catalog model's, for generic aliases.
PARAMS_RTOL = 0.05

_HARDWARE_FLOAT_COLUMNS = (*PEAK_COLUMNS.values(), "hbm_bytes", "hbm_usable_bytes",
                           "hbm_bytes_per_s", "scaleup_bytes_per_s", "scaleout_bytes_per_s", "tdp_w")
# The capacity the driver reports differs from the marketed one by a few percent (H100:
# 81,559 MiB = 85.5e9 B against "80 GB"); a ratio outside this range is a unit slip (GiB for GB,
# MiB for B) or a wrong row.
USABLE_HBM_RATIO = (0.9, 1.1)
_MODEL_FLOAT_COLUMNS = ("params", "active_params")
_MODEL_INT_COLUMNS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "ffn_size",
                      "vocab_size", "seq_len", "n_experts", "top_k", "expert_ffn_size")
# MoE counts that may be 0: shared experts beside the routed ones, leading dense layers
_MODEL_COUNT_COLUMNS = ("shared_experts", "moe_dense_layers")


# Name normalisation -----------------------------------------------------------------------------
_NON_DECIMAL_DOT = re.compile(r"(?<!\d)\.|\.(?!\d)")
_SEPARATORS = re.compile(r"[^0-9a-z.]+")
_NUMBER_UNIT = re.compile(r"(\d) (gb|tb|gib|b)\b")
_PARENTHESISED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")


def name_key(name: str) -> str:
    """Normalise a name for exact lookup.

    Case-folds, turns every run of characters other than letters, digits and decimal points
    into one space, and joins a number to a following size unit ("80 GB" -> "80gb"). So
    ``"TPU v5p"``, ``"tpu-v5p"`` and ``"TPU_V5P"`` share a key, while ``"Llama 3.1 8B"`` and
    ``"Llama 3 18B"`` do not (a decimal point is kept between digits).
    """
    text = _NON_DECIMAL_DOT.sub(" ", str(name).casefold())
    text = _SEPARATORS.sub(" ", text).strip()
    return _NUMBER_UNIT.sub(r"\1\2", text)


def strip_remarks(name: str) -> str:
    """Drop parenthesised/bracketed remarks, then everything after the first ``;`` or ``,``.

    ``"H100 96GB HBM2e (2.4 TB/s), 500W power limit; Grand Teton"`` -> ``"H100 96GB HBM2e"``.
    Used for accelerators only, after the whole name failed to resolve.
    """
    text = str(name)
    while True:
        stripped = _PARENTHESISED.sub(" ", text)
        if stripped == text:
            break
        text = stripped
    return re.split(r"[;,]", text, maxsplit=1)[0].strip()


# Schemas ----------------------------------------------------------------------------------------
# One rule per column. A plain-pandas check (:func:`_plain_checked`) accepts a valid file; only a
# file it refuses goes to pandera, built from the same rules, whose failure cases name each bad
# cell. pandera's pandas backend imports hypothesis when installed (about 1 CPU-s), which a
# one-shot command such as ``plan`` should not pay for a valid catalog.
@dataclass(frozen=True)
class _Rule:
    """A column's rule: ``text`` (str; ``required``: present and non-empty), ``float`` (> ``low``,
    may be empty) or ``int`` (nullable Int64, ``low`` <= value [<= ``high``], may be empty)."""

    kind: str
    required: bool = False
    unique: bool = False
    low: float = 0
    high: float | None = None


def _text(required: bool = True, unique: bool = False) -> _Rule:
    return _Rule("text", required=required, unique=unique)


_POSITIVE_FLOAT = _Rule("float", low=0)
_POSITIVE_INT = _Rule("int", low=1)

HARDWARE_RULES: dict[str, _Rule] = {
    "accelerator": _text(unique=True),
    "family": _text(),
    "architecture": _text(),
    "vendor": _text(),
    "year": _Rule("int", low=2010, high=2040),
    **{c: _POSITIVE_FLOAT for c in _HARDWARE_FLOAT_COLUMNS},
    "scaleup_domain_size": _POSITIVE_INT,
    "hbm_usable_source": _text(),
    "sources": _text(),
    "derived": _text(required=False),
    "notes": _text(required=False),
}

ALIASES_RULES: dict[str, _Rule] = {
    "alias": _text(),
    "accelerator": _text(required=False),
    "source": _text(),
    "notes": _text(required=False),
}

MODELS_RULES: dict[str, _Rule] = {
    "model_id": _text(unique=True),
    "aliases": _text(required=False),
    "generic_aliases": _text(required=False),
    "family": _text(),
    **{c: _POSITIVE_FLOAT for c in _MODEL_FLOAT_COLUMNS},
    **{c: _POSITIVE_INT for c in _MODEL_INT_COLUMNS},
    **{c: _Rule("int", low=0) for c in _MODEL_COUNT_COLUMNS},
    "attention": _text(required=False),
    "sources": _text(),
    "derived": _text(required=False),
    "notes": _text(required=False),
}
_INTEGER = re.compile(r"\s*[+-]?\d{1,18}\s*")  # fits int64; longer goes to pandera


def pandera_schema(rules: Mapping[str, _Rule]) -> Any:
    """The pandera ``DataFrameSchema`` of ``rules`` (extra columns allowed), coercing as read."""
    import pandera.pandas as pa
    columns = {}
    for name, rule in rules.items():
        if rule.kind == "text":
            checks = [pa.Check.str_length(min_value=1)] if rule.required else []
            columns[name] = pa.Column(str, checks=checks, nullable=not rule.required,
                                      unique=rule.unique, coerce=True)
        elif rule.kind == "float":
            columns[name] = pa.Column(float, checks=pa.Check.gt(rule.low), nullable=True,
                                      coerce=True)
        else:
            check = (pa.Check.ge(rule.low) if rule.high is None
                     else pa.Check.in_range(rule.low, rule.high))
            columns[name] = pa.Column("Int64", check, nullable=True, coerce=True)
    return pa.DataFrameSchema(columns, strict=False)


def _plain_checked(frame: pd.DataFrame, rules: Mapping[str, _Rule]) -> pd.DataFrame | None:
    """``frame`` coerced as :func:`pandera_schema` coerces it, or None when a rule may fail (then
    pandera decides and says why). Never accepts what pandera refuses (tests/test_catalog.py)."""
    out = frame.copy()
    for name, rule in rules.items():
        if name not in frame.columns:
            return None
        column = frame[name]
        present = column.notna()
        values = column[present]
        if column.dtype != object or not all(isinstance(v, str) for v in values):
            return None
        if rule.kind == "text":
            if rule.required and (not present.all() or (values.str.len() < 1).any()):
                return None
        elif rule.kind == "float":
            try:
                out[name] = number = column.astype(float)
            except (TypeError, ValueError):
                return None
            if not (number[present] > rule.low).all():
                return None
        else:
            if not all(_INTEGER.fullmatch(v) for v in values):
                return None
            out[name] = number = pd.array([int(v) if isinstance(v, str) else pd.NA
                                           for v in column], dtype="Int64")
            kept = number[present.to_numpy()]
            if not ((kept >= rule.low).all() and (rule.high is None or (kept <= rule.high).all())):
                return None
        if rule.unique and values.duplicated().any():
            return None
    return out


# Cross-column rules of models.csv: (column named in the error, column it must not exceed).
_MODEL_NOT_ABOVE = (("active_params", "params"), ("n_kv_heads", "n_heads"), ("top_k", "n_experts"))


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        # Empty cells are missing; "NA" or "N/A" stay text (they are names in the data).
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except OSError as exc:
        raise ConfigError(f"catalog file {path}: cannot be read ({exc.strerror})") from exc
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ConfigError(f"catalog file {path}: not a valid CSV ({exc})") from exc


def _validate(frame: pd.DataFrame, rules: Mapping[str, _Rule], path: Path,
              key: str) -> pd.DataFrame:
    """Validate against ``rules``; on failure raise ConfigError naming file, line and column
    (pandera's failure cases)."""
    checked = _plain_checked(frame, rules)
    if checked is not None:
        return checked
    from pandera.errors import SchemaErrors
    schema = pandera_schema(rules)
    try:
        with warnings.catch_warnings():
            # pandera's failure-case formatter trips a pandas concat FutureWarning.
            warnings.simplefilter("ignore", FutureWarning)
            return schema.validate(frame, lazy=True)
    except SchemaErrors as exc:
        raise ConfigError(f"catalog file {path}: " + "; ".join(
            _failure_messages(exc.failure_cases, frame, key))) from exc


def _failure_messages(cases: pd.DataFrame, frame: pd.DataFrame, key: str) -> list[str]:
    """One message per failure: missing columns, then per-row failures, then column-wide ones
    for columns not already named by a row (a bad cell also fails the column's dtype check)."""
    missing, by_row, by_column = [], [], []
    for case in cases.itertuples(index=False):
        column = case.column if isinstance(case.column, str) else None
        if case.check == "column_in_dataframe":
            missing.append(f"missing column '{case.failure_case}'")
        elif case.index is not None and not pd.isna(case.index):
            row = int(case.index)
            ident = frame[key].iloc[row] if key in frame.columns else None
            where = f"line {row + 2}" + (f" ({key}={ident})" if isinstance(ident, str) else "")
            target = f"column '{column}'" if column else f"check '{case.check}'"
            by_row.append((column, f"{where} {target}: failed {case.check} "
                                   f"(value {case.failure_case!r})"))
        else:
            target = f"column '{column}'" if column else f"check '{case.check}'"
            by_column.append((column, f"{target}: failed {case.check}"))
    named = {column for column, _ in by_row}
    messages = missing + [m for _, m in by_row]
    messages += [m for column, m in by_column if column is None or column not in named]
    return messages[:10]


def _check_not_above(models: pd.DataFrame, path: Path) -> None:
    for column, bound in _MODEL_NOT_ABOVE:
        bad = models.index[(models[column] > models[bound]).fillna(False).astype(bool)]
        if len(bad):
            row = int(bad[0])
            raise ConfigError(f"catalog file {path}: line {row + 2} "
                              f"(model_id={models['model_id'].iloc[row]}) column '{column}': "
                              f"must not exceed '{bound}'")


def _check_usable_hbm(hardware: pd.DataFrame, path: Path) -> None:
    """``hbm_usable_bytes`` is given wherever ``hbm_bytes`` is, within USABLE_HBM_RATIO of it."""
    marketed, usable = hardware["hbm_bytes"], hardware["hbm_usable_bytes"]
    lo, hi = USABLE_HBM_RATIO
    ratio = usable / marketed
    bad = hardware.index[(marketed.notna() & usable.isna())
                         | ~((ratio >= lo) & (ratio <= hi)).fillna(True).astype(bool)]
    if len(bad):
        row = int(bad[0])
        raise ConfigError(f"catalog file {path}: line {row + 2} "
                          f"(accelerator={hardware['accelerator'].iloc[row]}) column "
                          f"'hbm_usable_bytes': must be given with hbm_bytes and within "
                          f"{lo:g}-{hi:g} x hbm_bytes (got {usable.iloc[row]!r})")


def _split_names(cell: Any) -> list[str]:
    if not isinstance(cell, str):
        return []
    return [part.strip() for part in cell.split(";") if part.strip()]


def _none_if_nan(value: Any) -> Any:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy / pandas scalar -> plain Python
        return value.item()
    return value


# The catalog ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Catalog:
    """Hardware and model catalogs with O(1) name resolution.

    Build it with :func:`load_catalog`. ``hardware`` is indexed by accelerator id and
    ``models`` by model_id; both are validated and must not be mutated.
    """

    hardware: pd.DataFrame
    models: pd.DataFrame
    # name_key(alias) -> id, or None for a known-ambiguous name.
    accelerator_aliases: Mapping[str, str | None] = field(default_factory=dict, repr=False)
    # name_key(alias) -> why it does not resolve (ambiguous names only).
    ambiguous_notes: Mapping[str, str] = field(default_factory=dict, repr=False)
    model_aliases: Mapping[str, str] = field(default_factory=dict, repr=False)
    # name_key(generic alias) -> ((params, model_id), ...)
    model_generics: Mapping[str, tuple[tuple[float, str], ...]] = field(
        default_factory=dict, repr=False)
    #: the folder it was read from (the calibrate stage reads its efficiency tables there too)
    directory: Path | None = None

    # Accelerators ---------------------------------------------------------------------------
    def resolve_accelerator(self, name: str | None) -> str | None:
        """Catalog accelerator id for ``name`` (id or alias, any case), or None.

        None for: a missing/blank name, an unknown name, a known-ambiguous one (bare "A100").
        The whole name is tried first, then :func:`strip_remarks` of it. Never raises.
        """
        if name is None or not isinstance(name, str):
            return None
        key = name_key(name)
        if key in self.accelerator_aliases:
            return self.accelerator_aliases[key]
        stripped = name_key(strip_remarks(name))
        if stripped and stripped != key:
            return self.accelerator_aliases.get(stripped)
        return None

    def explain_accelerator(self, name: str | None) -> str:
        """Why ``name`` resolves or not, worded for a reject reason.

        ``"resolves to <id>"``, ``"missing: ..."``, ``"ambiguous or not catalogued: ..."`` (a
        name listed in the aliases with no id, and why) or ``"unknown: ..."``.
        """
        resolved = self.resolve_accelerator(name)
        if resolved is not None:
            return f"resolves to {resolved}"
        if name is None or not isinstance(name, str) or not name.strip():
            return "missing: no accelerator name"
        for key in (name_key(name), name_key(strip_remarks(name))):
            if key in self.ambiguous_notes:
                return f"ambiguous or not catalogued: '{name}': {self.ambiguous_notes[key]}"
        return f"unknown: '{name}' is not a catalog id or alias (see {ALIASES_FILE})"

    def family(self, accelerator_id: str) -> str:
        """Plot family of an accelerator id (``H100``, ``A100``, ``TPU-v5p``)."""
        return str(self._row(accelerator_id)["family"])

    def architecture(self, accelerator_id: str) -> str:
        """The vendor's name for the chip's generation (``Hopper`` for H100, H800 and H200)."""
        return str(self._row(accelerator_id)["architecture"])

    def peak_flops_per_s(self, accelerator_id: str, precision: str
                         ) -> tuple[float | None, str | None]:
        """Dense peak FLOP/s of one chip at ``precision``, and the precision actually used.

        Falls back between bf16 and fp16 only (see ``PRECISION_FALLBACK``): V100 at "bf16"
        gives ``(125e12, "fp16")``. ``(None, None)`` when the chip has no peak at that precision
        (A100 at fp8) or the precision is not one of ``PEAK_COLUMNS``. Raises KeyError for an
        id not in the catalog (resolve names first).
        """
        row = self._row(accelerator_id)
        wanted = str(precision).strip().lower() if precision is not None else ""
        wanted = PRECISION_ALIASES.get(wanted, wanted)
        if wanted not in PEAK_COLUMNS:
            return None, None
        for candidate in (wanted, *PRECISION_FALLBACK.get(wanted, ())):
            value = _none_if_nan(row[PEAK_COLUMNS[candidate]])
            if value is not None:
                return float(value), candidate
        return None, None

    def spec(self, accelerator_id: str) -> dict[str, Any]:
        """One hardware row as a plain dict (``accelerator`` included; missing values None)."""
        row = self._row(accelerator_id)
        out: dict[str, Any] = {"accelerator": accelerator_id}
        out.update({k: _none_if_nan(v) for k, v in row.items()})
        return out

    def _row(self, accelerator_id: str) -> pd.Series:
        try:
            return self.hardware.loc[accelerator_id]
        except KeyError:
            raise KeyError(f"accelerator id {accelerator_id!r} is not in the hardware catalog "
                           "(resolve names with Catalog.resolve_accelerator first)") from None

    # Models ---------------------------------------------------------------------------------
    def resolve_model(self, name: str | None, params: float | None = None) -> str | None:
        """Catalog model_id for ``name``, or None.

        An exact alias (any case, separators normalised) wins; remarks are *not* stripped for
        it ("Llama 3.1 405B (proxy, reduced layers)" stays unresolved). Otherwise, when
        ``params`` (a count, e.g. 1.7e9) is given and ``name`` -- whole, or with its remarks
        stripped -- is a generic alias ("GPT (1.7B; 24 layers, ...)" -> "GPT"), the one model
        of that generic name whose ``params`` lies within ``PARAMS_RTOL`` of it. No other
        guessing.
        """
        if name is None or not isinstance(name, str):
            return None
        key = name_key(name)
        found = self.model_aliases.get(key)
        if found is not None or params is None:
            return found
        try:
            wanted = float(params)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(wanted) or wanted <= 0:
            return None
        # The generic name may carry the size as a remark: "GPT (1.7B; 24 layers, ...)".
        generic = self.model_generics.get(key) or self.model_generics.get(
            name_key(strip_remarks(name)), ())
        hits = {mid for p, mid in generic if abs(p - wanted) <= PARAMS_RTOL * p}
        return hits.pop() if len(hits) == 1 else None

    def model_spec(self, model_id: str) -> dict[str, Any]:
        """One models row as a plain dict (``model_id`` included; missing values None)."""
        row = self.models.loc[model_id]
        out: dict[str, Any] = {"model_id": model_id}
        out.update({k: _none_if_nan(v) for k, v in row.items()})
        return out


# Loading ----------------------------------------------------------------------------------------
def _alias_index(aliases: pd.DataFrame, hardware_ids: set[str], path: Path
                 ) -> tuple[dict[str, str | None], dict[str, str]]:
    index: dict[str, str | None] = {name_key(i): i for i in hardware_ids}
    notes: dict[str, str] = {}
    for pos, row in enumerate(aliases.itertuples(index=False)):
        line = pos + 2
        target = row.accelerator if isinstance(row.accelerator, str) else None
        if target is not None and target not in hardware_ids:
            raise ConfigError(f"catalog file {path}: line {line} (alias={row.alias}) column "
                              f"'accelerator': unknown accelerator id '{target}'")
        key = name_key(row.alias)
        if not key:
            raise ConfigError(f"catalog file {path}: line {line} column 'alias': "
                              f"'{row.alias}' has no letters or digits")
        if key in index and index[key] != target:
            raise ConfigError(f"catalog file {path}: line {line} (alias={row.alias}) column "
                              f"'accelerator': '{target}' conflicts with '{index[key]}' for the "
                              "same normalised name")
        index[key] = target
        if target is None:
            note = row.notes if isinstance(row.notes, str) else "no catalog id for this name"
            notes[key] = note
    return index, notes


def _model_indexes(models: pd.DataFrame, path: Path
                   ) -> tuple[dict[str, str], dict[str, tuple[tuple[float, str], ...]]]:
    aliases: dict[str, str] = {}
    generics: dict[str, list[tuple[float, str]]] = {}
    for pos, row in enumerate(models.itertuples(index=False)):
        line = pos + 2
        for alias in (row.model_id, *_split_names(row.aliases)):
            key = name_key(alias)
            if key in aliases and aliases[key] != row.model_id:
                raise ConfigError(f"catalog file {path}: line {line} (model_id={row.model_id}) "
                                  f"column 'aliases': '{alias}' already names "
                                  f"'{aliases[key]}'")
            aliases[key] = row.model_id
        for alias in _split_names(row.generic_aliases):
            if pd.isna(row.params):
                raise ConfigError(f"catalog file {path}: line {line} (model_id={row.model_id}) "
                                  "column 'params': needed by its generic_aliases")
            generics.setdefault(name_key(alias), []).append((float(row.params), row.model_id))
    return aliases, {k: tuple(sorted(set(v))) for k, v in generics.items()}


def load_catalog(catalog_dir: str | Path) -> Catalog:
    """Read and validate ``hardware.csv``, ``accelerator_aliases.csv`` and ``models.csv``.

    Raises ConfigError naming the file, line and column for a broken catalog: a missing column,
    a non-numeric or non-positive value (negative bandwidth), a duplicate id, an empty
    ``sources``, an alias pointing at an unknown id, two ids claiming one normalised name.
    """
    catalog_dir = Path(catalog_dir)
    hw_path = catalog_dir / HARDWARE_FILE
    al_path = catalog_dir / ALIASES_FILE
    mo_path = catalog_dir / MODELS_FILE

    hardware = _validate(_read_csv(hw_path), HARDWARE_RULES, hw_path, "accelerator")
    aliases = _validate(_read_csv(al_path), ALIASES_RULES, al_path, "alias")
    models = _validate(_read_csv(mo_path), MODELS_RULES, mo_path, "model_id")
    _check_not_above(models, mo_path)
    _check_usable_hbm(hardware, hw_path)

    hardware_ids = set(hardware["accelerator"])
    alias_index, ambiguous = _alias_index(aliases, hardware_ids, al_path)
    model_aliases, model_generics = _model_indexes(models, mo_path)
    return Catalog(
        directory=catalog_dir,
        hardware=hardware.set_index("accelerator", drop=True),
        models=models.set_index("model_id", drop=True),
        accelerator_aliases=alias_index,
        ambiguous_notes=ambiguous,
        model_aliases=model_aliases,
        model_generics=model_generics,
    )
