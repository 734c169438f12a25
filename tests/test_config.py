"""params.yaml loading: a broken configuration names the offending field."""

from __future__ import annotations

import copy

import pytest
import yaml
from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.config import PARAMS_PATH, ConfigError, load_params, load_settings, settings


def test_shipped_params_load_and_have_every_stage():
    params = load_params(PARAMS_PATH)
    assert {"ingest", "fit", "theory", "compare", "report"} <= set(params)


def test_shipped_params_validate_completely():
    cfg = load_settings(load_params(PARAMS_PATH))
    assert cfg.theory.frontier.points == 61 and cfg.fit.interval == 0.95
    assert isinstance(cfg.theory.laws.tokens_per_param, float)  # ints in YAML read as floats
    assert cfg.theory.scenarios["moe"].moe.top_k == 2
    assert settings(load_params(PARAMS_PATH), "ingest.logs").workers == 2


def _with(path: str, value):
    params = copy.deepcopy(load_params(PARAMS_PATH))
    node = params
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return params


_DELETE = object()

# Every class of broken setting the reliability audit found (issue 13), and its message.
BROKEN = [
    ("theory.frontier.points", 100_000, r"^params: field 'theory\.frontier\.points': .*less than "
                                        r"or equal to 401, got 100000$"),
    ("theory.frontier.points", 0, r"'theory\.frontier\.points': .*greater than or equal to 2"),
    ("theory.frontier.refine_rounds", 1000, r"'theory\.frontier\.refine_rounds'"),
    ("theory.frontier.refine_points", 10**6, r"'theory\.frontier\.refine_points'"),
    ("theory.search.max_log2_degree", 64, r"'theory\.search\.max_log2_degree'"),
    ("theory.bounds.search_max_log2", 40, r"'theory\.bounds\.search_max_log2'"),
    ("theory.frontier.max_flop", 1e20, r"'theory\.frontier\.max_flop': must exceed min_flop"),
    ("ingest.logs.workrs", 2, r"^params: unknown field 'ingest\.logs\.workrs'$"),
    ("fit.unknown_option", 1, r"^params: unknown field 'fit\.unknown_option'$"),
    ("theory.duration_days", -90, r"'theory\.duration_days': .*greater than 0, got -90"),
    ("theory.laws.tokens_per_param", -20, r"'theory\.laws\.tokens_per_param'"),
    ("theory.bounds.seq_len", -1, r"'theory\.bounds\.seq_len'"),
    ("theory.bytes_per_value.bf16", 0, r"'theory\.bytes_per_value\.bf16'"),
    ("theory.bytes_per_value.int3", 1, r"'theory\.bytes_per_value\.int3'"),
    ("theory.scenarios.moe.moe", {"n_experts": 4, "top_k": 8},
     r"'theory\.scenarios\.moe\.moe\.top_k': must lie in \[1, n_experts\]"),
    ("theory.scenarios.fp8.laws", {"bogus": 1}, r"unknown field 'theory\.scenarios\.fp8\.laws\.bogus'"),
    ("theory.scenarios", {}, r"'theory\.scenarios'"),
    ("compare.efficiency_threshold", 1.0, r"'compare\.efficiency_threshold'"),
    ("compare.interval", 0.9, r"unknown field 'compare\.interval'"),  # it is fit.interval
    ("theory.bounds.precision", "bf16", r"unknown field 'theory\.bounds\.precision'"),  # ingest's
    ("fit.interval", True, r"'fit\.interval': .*valid number, got True"),
    ("fit.min_distinct_n", "3", r"'fit\.min_distinct_n': .*valid integer"),
    ("fit.laws", _DELETE, r"^params: missing field 'fit\.laws'$"),
    ("report.frontier_scenarios", ["baseline", "nope"],
     r"'report\.frontier_scenarios\.1': no scenario 'nope'"),
    ("report.baseline_scenario", "nope", r"'report\.baseline_scenario': no scenario 'nope'"),
    ("report.series_per_panel", 0, r"'report\.series_per_panel'"),
    ("report.strategy_models", {"nope": ["8B"]},
     r"'report\.strategy_models': source 'nope' is not in report\.strategy_sources"),
    ("ingest.default_precision", "x" * 500, r"got 'x{70,}\.\.\.$"),  # input shown, capped
]


@pytest.mark.parametrize(("path", "value", "message"), BROKEN)
def test_every_broken_setting_names_its_field(path, value, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(_with(path, value))


@pytest.mark.parametrize(("path", "value", "message"), BROKEN[:4] + BROKEN[7:8] + BROKEN[-4:-2])
def test_cli_stops_any_stage_with_exit_2_naming_the_field(tmp_path, path, value, message):
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(_with(path, value)))
    result = CliRunner().invoke(app, ["report", "--params", str(bad), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert path.split(".")[0] in result.output and "params: " in result.output


def test_a_group_alone_is_validated_with_its_dotted_prefix():
    with pytest.raises(ConfigError, match=r"^params: field 'ingest\.logs\.workers'"):
        settings({"ingest": {"logs": {**load_params()["ingest"]["logs"], "workers": 0}}},
                 "ingest.logs")
    with pytest.raises(ConfigError, match=r"^params: missing field 'fit'$"):
        settings({}, "fit")


def test_unreadable_and_invalid_params_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        load_params(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("ingest: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_params(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_params(scalar)


def test_cli_reports_a_broken_params_file_with_exit_code_2(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("- not a mapping\n")
    result = CliRunner().invoke(app, ["fit", "--params", str(bad)])
    assert result.exit_code == 2
    assert "mapping" in result.output

def _report(**fields):
    """A ``report`` settings group with only the fields a check reads."""
    from pipeline.config import ReportSettings

    return ReportSettings.model_construct(**{"strategy_sources": [], "strategy_models": {},
                                             "focus": [], **fields})


def test_strategy_sources_must_be_in_the_data():
    import pandas as pd

    from pipeline.report.stage import check_sources

    class Data:
        runs = pd.DataFrame({"source": ["megatron2021", "palm2022"]})

    check_sources(_report(strategy_sources=["megatron2021"]), Data())
    with pytest.raises(ConfigError, match=r"'report\.strategy_sources\.1': no source 'x'"):
        check_sources(_report(strategy_sources=["megatron2021", "x"]), Data())
    Data.runs = pd.DataFrame()  # no data at all: nothing to check against
    check_sources(_report(strategy_sources=["x"]), Data())



def _leaves(node, prefix=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix


def _accepted(bad) -> set[str]:
    """Leaves of the shipped params.yaml where ``bad`` still validates; at every other leaf it
    must be a ConfigError naming that field (or, for a group-level rule, its group)."""
    params = load_params(PARAMS_PATH)
    accepted = set()
    for path in _leaves(params):
        trial = copy.deepcopy(params)
        node = trial
        *parents, last = path.split(".")
        for key in parents:
            node = node[key]
        node[last] = copy.deepcopy(bad)
        try:
            load_settings(trial)
        except ConfigError as exc:
            names = [".".join(parents + [last])[:n] for n in range(len(path), 0, -1)]
            assert any(f"'{n}" in str(exc) for n in names), (path, str(exc))
        else:
            accepted.add(path)
    return accepted


# Where a wrong-looking value is in fact allowed: None lets a scenario inherit the baseline,
# any text may be a scenario's accelerator (the theory stage checks it against the catalog) or
# the title, true is a value of the switches, and an empty list is allowed where a list may
# be empty. No number, however large, is accepted where a range applies.
_SCENARIO_OVERRIDES = {"theory.scenarios.aggressive_batch.laws.batch_exponent",
                       "theory.scenarios.fatter_models.laws.layers_anchor"}
_ACCELERATORS = {f"theory.scenarios.{s}.accelerator" for s in (
    "baseline", "a100", "h200", "b200", "gb200_nvl72", "tpu_v5p", "fp8", "aggressive_batch",
    "fatter_models", "moe", "low_latency")}
ACCEPTED = {
    "none": _SCENARIO_OVERRIDES,
    "text": _ACCELERATORS | {"report.title"},
    "bool": {"fit.score_other_scale", "ingest.allow_mlperf_roots_outside_project",
             "ingest.attention_flops", "ingest.mfu_on_assumed_precision",
             "theory.search.memory_check", "theory.search.two_d_tp",
             "theory.memory.flash_attention", "theory.memory.dropout",
             "theory.memory.fsdp_pipeline_keeps_weights"},
    "list": {"ingest.mlperf_roots", "report.frontier_scenarios", "report.focus",
             "report.strategy_models.ultrascale_playbook2025",
             # no family fitted: every factor is fixed or Korthikanti's count
             "theory.memory.fitted_activation_families",
             # no family runs torchtitan's per-operator selective policy
             "theory.memory.op_selective_families",
             "theory.memory.pipeline_unsharded_grads_sources",
             # no source's recipe keeps bf16 states / MoE bf16 gradients
             "theory.memory.bf16_state_sources", "theory.memory.bf16_grad_moe_sources"},
}


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "bad"), [("none", None), ("negative", -1), ("text", "x"),
                                           ("bool", True), ("list", []), ("dict", {"k": 1}),
                                           ("huge", 1e300)])
def test_any_bad_leaf_value_is_a_config_error_naming_its_field(kind, bad):
    """Every leaf of the shipped params.yaml set to a wrong value: ConfigError naming that
    field, except where the value is in fact allowed (``ACCEPTED``); never another error."""
    assert _accepted(bad) == ACCEPTED.get(kind, set())


def test_dataclass_defaults_are_the_shipped_settings():
    """The theory's frozen dataclasses keep the paper's constants as defaults (tests use them
    as golden values); each default must be the value params.yaml ships, so that a setting has
    one value. The search settings have no paper meaning and so no defaults at all."""
    from dataclasses import MISSING, fields

    from pipeline.theory.inputs import Constants
    from pipeline.theory.laws import Laws
    from pipeline.theory.memory import MemoryConstants
    from pipeline.theory.scenarios import Moe, Search

    theory = load_params()["theory"]
    pairs = [(Constants, theory["model"]), (Laws, theory["laws"]),
             (MemoryConstants, theory["memory"])]
    checked = 0
    for cls, group in pairs:
        for f in fields(cls):
            if f.default is MISSING or f.name not in group:
                continue
            shipped = group[f.name]
            # per-family settings: the dataclass holds them as sorted, hashable tuples
            if isinstance(shipped, dict):
                shipped = tuple(sorted(shipped.items()))
            elif isinstance(shipped, list):
                shipped = tuple(sorted(shipped))
            assert f.default == shipped, f"{cls.__name__}.{f.name}"
            checked += 1
    assert checked >= 15
    for cls in (Search, Moe):
        assert all(f.default is MISSING for f in fields(cls)), cls.__name__
