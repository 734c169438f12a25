"""``scalewall validate`` on step logs: every missing or conflicting field in one pass, with the
sidecar line that fixes it, what was derived and from where, and what cannot be derived."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.catalog import load_catalog
from pipeline.config import PROJ_ROOT
from pipeline.ingest.log_diagnosis import diagnose

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"
CATALOG = PROJ_ROOT / "data" / "catalog"
PARAMS = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                              "min_steady_steps": 3, "settle_tolerance": 0.05}}}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(CATALOG)


def _copy(tmp_path: Path, name: str, sidecar: str | None) -> Path:
    """One real fixture in a campaign folder of its own, with ``sidecar`` as its run.yaml."""
    folder = tmp_path / "logs" / "campaign"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / Path(name).name
    shutil.copy(REAL / name, log)
    if sidecar is not None:
        (folder / "run.yaml").write_text(sidecar)
    return log


def _keys(d) -> list[str]:
    return [n.key for n in d.needs]


def test_all_missing_fields_at_once(tmp_path, catalog):
    log = _copy(tmp_path, "nemo2/bionemo_esm2.log", None)
    d = diagnose(log, log.parent.parent, PARAMS, catalog)
    # Not one a round: accelerator, N, model and the sequence length, each with an example.
    assert _keys(d) == ["accelerator", "n_accelerators", "model", "seq_len"]
    assert all(n.example for n in d.needs)
    seq = d.needs[-1]
    assert "global batch (1 sequences) x seq_len / step time" in seq.why
    assert ("tokens_per_s", "step time without tokens per step") in d.not_derived
    assert d.problem is None  # the steps are fine: only the sidecar is missing


def test_params_b_with_a_shape_makes_the_model_known(tmp_path, catalog):
    log = _copy(tmp_path, "nemo2/bionemo_esm2.log",
                "accelerator: H100-SXM5-80GB\nn_accelerators: 1\nparams_b: 0.65\nseq_len: 1024\n")
    d = diagnose(log, log.parent.parent, PARAMS, catalog)
    assert "model" not in _keys(d) and "params_b" not in _keys(d)
    # bf16 or fp8 is not said, and the H100 has fp8 units: MFU waits for precision.
    assert _keys(d) == ["precision"]
    assert any(name == "mfu" and "fp8 units" in why for name, why in d.not_derived)


def test_derived_values_name_their_origin(tmp_path, catalog):
    log = _copy(tmp_path, "megatron_args/qwen2_0p5b_n2.log", "accelerator: H100-SXM5-80GB\n")
    d = diagnose(log, log.parent.parent, PARAMS, catalog)
    assert d.facts["n_accelerators"] == (2, "log line 28")
    assert d.facts["precision"][1].startswith("derived from the argument dump")
    assert d.facts["accelerator"][1].startswith("sidecar ")
    assert d.facts["recompute"][0] == "selective"
    n = _copy(tmp_path, "nanotron/log_error.log", "accelerator: H100-SXM5-80GB\n")
    dn = diagnose(n, n.parent.parent, PARAMS, catalog)
    assert dn.facts["n_accelerators"][0] == 2
    assert "tokens/s 22800 / tokens/s per chip 11400" in dn.facts["n_accelerators"][1]


def test_every_conflict_is_reported_not_resolved(tmp_path, catalog):
    log = _copy(tmp_path, "megatron_args/qwen2_0p5b_n2.log",
                "accelerator: H100-SXM5-80GB\nn_accelerators: 4\nseq_len: 2048\ntp: 2\n")
    d = diagnose(log, log.parent.parent, PARAMS, catalog)
    assert sorted(c.split(":")[0] for c in d.conflicts) == ["n_accelerators", "seq_len", "tp"]
    assert any("log says 2 (line 28)" in c and "says 4" in c for c in d.conflicts)
    # The ingest's reject names all three too, not the first.
    code, out = _cli(log.parent)
    assert code == 1
    reject = next(line for line in out.splitlines() if "reject conflict" in line)
    assert reject.count("log says") == 3


def _cli(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["validate", str(path), "--catalog", str(CATALOG),
                                      "--params", str(PROJ_ROOT / "params.yaml")])
    return result.exit_code, result.output


def test_cli_prints_the_sidecar_block_to_paste(tmp_path):
    log = _copy(tmp_path, "nemo2/bionemo_esm2.log", "accelerator: Quantum Abacus 9000\n")
    code, out = _cli(log.parent)
    assert code == 1
    assert "add to the sidecar (run.yaml), all at once:" in out
    block = out.split("all at once:")[1].splitlines()[1:5]
    assert [line.split(":")[0].strip() for line in block] == [
        "accelerator", "n_accelerators", "model", "seq_len"]
    assert "'Quantum Abacus 9000' is not a catalog id or alias" in block[0]


def test_hf_summary_needs_only_what_it_lacks(tmp_path, catalog):
    log = _copy(tmp_path, "hf_block/aurora_block_only.log", "accelerator: H100-SXM5-80GB\n")
    d = diagnose(log, log.parent.parent, PARAMS, catalog)
    assert d.problem is None and d.measures["step_time_s"] == pytest.approx(1 / 0.367)
    assert _keys(d)[:2] == ["n_accelerators", "model"]
    assert ("tokens_per_s", "train_tokens_per_second is per device: x n_accelerators once "
                            "that is given") in d.not_derived


def test_params_b_alone_names_an_unnamed_model_run(tmp_path):
    log = _copy(tmp_path, "megatron_args/qwen2_0p5b_n2.log",
                "accelerator: H100-SXM5-80GB\nparams_b: 0.63\n")
    code, out = _cli(log.parent)
    assert code == 0, out
    assert "model unnamed 0.63B" in out and "derived: " in out


@pytest.mark.parametrize("name, problem", [
    ("binary.log", "binary file"), ("empty.log", "empty file"),
    ("unknown.txt", "no step lines of a known format"), ("too_few.log", "too_few_steps")])
def test_logs_no_sidecar_can_fix_say_so(catalog, name, problem):
    nasty = Path(__file__).parent / "fixtures" / "logs" / "nasty"
    d = diagnose(nasty / name, nasty.parent, PARAMS, catalog)
    assert d.problem and problem in d.problem


def test_a_corrupt_gzip_is_a_problem_not_a_crash(tmp_path, catalog):
    log = tmp_path / "logs" / "c" / "train.log.gz"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 40)
    d = diagnose(log, tmp_path / "logs", PARAMS, catalog)
    assert d.problem and d.problem.startswith("unreadable")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=4000), sidecar=st.sampled_from(
    ["", "accelerator: H100\n", "n_accelerators: 8\nrecompute: full\n", ": [\n", "tp: x\n"]))
def test_diagnose_never_raises(tmp_path_factory, catalog, blob, sidecar):
    folder = tmp_path_factory.mktemp("fz") / "c"
    folder.mkdir()
    (folder / "run.yaml").write_text(sidecar)
    (folder / "x.log").write_bytes(blob)
    d = diagnose(folder / "x.log", folder.parent, PARAMS, catalog)
    assert d.problem is not None or d.fmt is not None
    assert all(n.key and n.example for n in d.needs)


def _write(tmp_path: Path, text: str, sidecar: str | None = None) -> Path:
    folder = tmp_path / "logs" / "campaign"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "train.log"
    log.write_text(text)
    if sidecar is not None:
        (folder / "run.yaml").write_text(sidecar)
    return log


def test_suggestions_come_from_the_log_never_from_defaults(tmp_path, catalog):
    """A log that names its chip and model gets those as the sidecar lines to add; one that
    names neither gets placeholders, never H100 or llama3-8b."""
    steps = (REAL / "megatron_args" / "qwen2_0p5b_n2.log").read_text()
    log = _write(tmp_path, "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n"
                           "Running Model: llama-3-70b\n" + steps)
    d = diagnose(log, log.parent.parent, PARAMS, catalog)
    by_key = {n.key: n for n in d.needs}
    assert by_key["accelerator"].example == "A100-SXM4-80GB"
    assert "line 1" in by_key["accelerator"].why
    bare = diagnose(_write(tmp_path / "b", steps), tmp_path / "b" / "logs", PARAMS, catalog)
    examples = " ".join(n.example for n in bare.needs)
    assert "H100" not in examples and "llama3-8b" not in examples
    assert {n.key for n in bare.needs} >= {"accelerator"}
    # a bare "A100" is ambiguous: the placeholder stays and the why says which to choose
    amb = diagnose(_write(tmp_path / "c", "on 8x A100 nodes\n" + steps), tmp_path / "c" /
                   "logs", PARAMS, catalog)
    acc = next(n for n in amb.needs if n.key == "accelerator")
    assert acc.example.startswith("<") and "'A100' at line 1" in acc.why


def test_a_v100_run_is_never_labelled_bf16(catalog):
    """No precision stated: the V100's peak is its fp16 one, and so is its precision."""
    from pipeline.config import load_params, settings as settings_of
    from pipeline.ingest.core.normalize import CatalogCache, normalize
    from pipeline.ingest.records import Record
    opts = settings_of(load_params(), "ingest")
    fields = {"source": "t", "citation": "t", "model": "m", "params_b": "1.3",
              "accelerator": "V100-SXM2-32GB", "n_accelerators": "8", "tokens_per_s": "20000"}
    row = normalize(Record("t", "t.csv", 2, fields=fields), CatalogCache(catalog), opts)
    assert row["precision"] == "fp16" and row["peak_precision"] == "fp16"
    stated = normalize(Record("t", "t.csv", 2, fields={**fields, "precision": "bf16"}),
                       CatalogCache(catalog), opts)
    assert "precision bf16 stated, but the catalog lists no bf16 peak" in stated["notes"]
