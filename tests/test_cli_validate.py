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
    # NVIDIA publishes MFU beside tokens/s: the ingest recounts it on the project's FLOP count
    # and keeps the printed one in mfu_source_count (pipeline/ingest/core/flop_count.py).
    derived = out.split("runs: ")[-1]
    assert "model_flops_per_s (34)" in derived and " mfu (34)" in f" {derived}"
    assert "mfu_source_count" not in derived   # as printed, not computed


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


# Issue 11: tables the ingest would read but the format does not allow.
GOOD = PROJ_ROOT / "data" / "raw" / "published" / "nvidia_dgxc2024.csv"


def _table(tmp_path: Path, edit=None, drop: tuple[str, ...] = ()) -> Path:
    import csv
    with GOOD.open(newline="") as fh:
        rows = list(csv.DictReader(fh))[:3]
    header = [h for h in rows[0] if h not in drop]
    for row in rows:
        if edit:
            edit(row)
    out = tmp_path / "mine.csv"
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return out


def test_the_good_base_table_passes(tmp_path: Path) -> None:
    code, out = _validate(_table(tmp_path))
    assert code == 0, out
    assert "3 records -> 3 runs, 0 rejects" in out


def test_a_table_without_source_or_citation_columns_fails(tmp_path: Path) -> None:
    code, out = _validate(_table(tmp_path, drop=("source", "citation")))
    assert code == 1
    assert "table: missing_required: column(s) source, citation absent from the header" in out


def test_an_empty_file_fails(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    code, out = _validate(empty)
    assert code == 1
    assert "table: malformed_row: empty file" in out
    header_only = tmp_path / "header.csv"
    header_only.write_text(GOOD.read_text().splitlines()[0] + "\n")
    code, out = _validate(header_only)
    assert code == 1 and "the table has a header but no records" in out


def test_a_raw_parameter_count_is_a_unit_slip(tmp_path: Path) -> None:
    code, out = _validate(_table(tmp_path, lambda r: r.update(params_b="8030000000")))
    assert code == 1
    assert ("line 2: unit_slip: params_b=8.03e+09 > 100000 looks like a raw parameter count"
            in out)
    assert "3 records -> 0 runs, 3 rejects" in out


def test_a_scaling_outside_the_vocabulary_fails(tmp_path: Path) -> None:
    code, out = _validate(_table(tmp_path, lambda r: r.update(scaling="strongish")))
    assert code == 1
    assert ("line 2: bad_value: scaling='strongish' is not one of strong, weak, single, sweep"
            in out)


def test_per_accelerator_throughput_above_the_chips_peak_fails(tmp_path: Path) -> None:
    # The whole job's tokens/s written as per accelerator: 81222 tokens/s per H100 at 6 x 8e9
    # FLOP per token needs 3.9e15 FLOP/s per chip, above the H100's fp8 peak 1979e12. Without a
    # stated precision the ingest derives no MFU on an fp8-capable chip, so it would accept it.
    def per_job(row: dict) -> None:
        row["tokens_per_s_per_accelerator"] = row["tokens_per_s"]
        row["tokens_per_s"] = row["mfu"] = row["step_time_s"] = row["precision"] = ""
    code, out = _validate(_table(tmp_path, per_job))
    assert code == 1
    assert "line 2: out_of_range: tokens_per_s per accelerator 81222 needs at least 3898.66 " \
           "TFLOP/s per chip" in out
    assert "above H100-SXM5-80GB's highest dense peak 1979 TFLOP/s" in out


def test_many_rejects_are_summarised_by_reason(tmp_path: Path) -> None:
    lines = GOOD.read_text().splitlines()
    body = [lines[1].replace(",8,,,,8192,H100", ",8e9,,,,8192,H100", 1)] * 500 + [lines[2]]
    big = tmp_path / "big.csv"
    big.write_text("\n".join([lines[0]] + body) + "\n")
    code, out = _validate(big)
    assert code == 1
    assert "501 records -> 1 runs, 500 rejects" in out
    assert "  unit_slip: 500" in out
    assert out.count("line ") == 3  # the first three examples, not 500 lines
    assert len(out.splitlines()) < 10


def test_a_folder_of_step_logs_shows_parser_run_sidecar_and_series(tmp_path: Path) -> None:
    from user_logs_chain import write_job_folders
    paths = write_job_folders(tmp_path / "logs")
    bad = paths[32].parent / "broken.log"
    bad.write_text("nothing a parser knows\n")
    code, out = _validate(tmp_path / "logs" / "llama3-sweep")
    assert code == 1
    assert "5 step log(s) -> 4 runs, 1 rejects, 1 series" in out
    assert ("parser megatron -> run: N=16 H100-SXM5-80GB, model llama3-8b, step 9.218 s"
            in out)
    assert "reject not_a_run: no step lines of a known format" in out
    assert "run.yaml: accelerator=H100-SXM5-80GB, model=llama3-8b" in out
    assert ": strong, 4 logs, N=16..128 (4 values)" in out
    code, out = _validate(paths[16])
    assert code == 0, out
    assert "1 step log(s) -> 1 runs, 0 rejects, 0 series" in out
    assert "in no series: " in out and "alone: no log at another N" in out
