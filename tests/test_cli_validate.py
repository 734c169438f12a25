"""``scalewall validate FILE``: one table checked the way the ingest reads it."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.config import PROJ_ROOT

FIXTURES = Path(__file__).parent / "fixtures" / "published"
CATALOG = str(PROJ_ROOT / "data" / "catalog")
PARAMS = str(PROJ_ROOT / "params.yaml")


def _validate(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["validate", str(path), "--catalog", CATALOG,
                                      "--params", PARAMS])
    return result.exit_code, result.output


def test_every_bad_row_is_named_with_its_line_and_reason() -> None:
    code, out = _validate(FIXTURES / "synthetic_bad.csv")
    assert code == 1
    assert "18 records -> 1 runs, 17 rejects" in out
    assert "line 2: unit_slip: mfu='43' looks like a percentage" in out
    assert "line 3: out_of_range: n_accelerators='2.5' is not an integer >= 1" in out
    assert "line 7: unknown_accelerator: 'Quantum Abacus 9000'" in out


def test_a_clean_shipped_table_passes() -> None:
    code, out = _validate(PROJ_ROOT / "data" / "raw" / "published" / "nvidia_dgxc2024.csv")
    assert code == 0, out
    assert "34 records -> 34 runs, 0 rejects" in out
    # NVIDIA publishes MFU: the ingest keeps it and derives model FLOP/s, never its own MFU.
    derived = out.split("runs: ")[-1]
    assert "model_flops_per_s (34)" in derived and " mfu (" not in f" {derived}"


def test_an_ambiguous_accelerator_says_what_to_write() -> None:
    """PaLM's table names MT-NLG's chips only as 'A100': the reject says why and what to do."""
    code, out = _validate(PROJ_ROOT / "data" / "raw" / "published" / "palm2022.csv")
    assert code == 1
    assert ("line 4: unknown_accelerator: ambiguous or not catalogued: 'A100': A100-SXM4-40GB or "
            "A100-SXM4-80GB (HBM 1.555 vs 2.039 TB/s); write the memory size, e.g. 'A100 80GB'"
            in out)


def test_a_missing_file_is_a_reject_not_a_crash(tmp_path: Path) -> None:
    code, out = _validate(tmp_path / "absent.csv")
    assert code == 1 and "unreadable" in out


def test_a_broken_params_file_names_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "params.yaml"
    bad.write_text("ingest: {default_precision: int3}\n")
    result = CliRunner().invoke(app, ["validate", str(FIXTURES / "synthetic_bad.csv"),
                                      "--catalog", CATALOG, "--params", str(bad)])
    assert result.exit_code == 2
    assert "ingest.default_precision" in result.output
