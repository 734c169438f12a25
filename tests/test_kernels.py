"""pipeline.kernels: a pipeline process runs the AVX2 kernels of numpy and OpenBLAS on every
x86-64 machine, so its outputs are the same bytes wherever it runs."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from pipeline import kernels
from pipeline.config import PROJ_ROOT

HASWELL = {"avx2", "fma", "sse4_2"}
VARS = ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")


def test_x86_with_avx2_gets_both_variables() -> None:
    chosen = kernels.kernel_settings({}, "x86_64", HASWELL | {"avx512f"})
    assert chosen == {"OPENBLAS_CORETYPE": "Haswell",
                      "NPY_DISABLE_CPU_FEATURES": " ".join(kernels.NUMPY_AVX512)}
    assert "AVX512F" in chosen["NPY_DISABLE_CPU_FEATURES"].split()
    assert "AVX2" not in chosen["NPY_DISABLE_CPU_FEATURES"].split()


def test_a_variable_the_user_set_is_kept() -> None:
    chosen = kernels.kernel_settings({"OPENBLAS_CORETYPE": "Zen"}, "x86_64", HASWELL)
    assert chosen == {"NPY_DISABLE_CPU_FEATURES": " ".join(kernels.NUMPY_AVX512)}


@pytest.mark.parametrize("machine, flags, env", [
    ("aarch64", {"asimd", "fp"}, {}),              # Arm: other kernels anyway
    ("x86_64", {"sse4_2", "avx"}, {}),             # no AVX2: Haswell kernels would not run
    ("x86_64", {"avx2"}, {}),                      # AVX2 without FMA
    ("x86_64", HASWELL, {"SCALEWALL_NATIVE_KERNELS": "1"}),   # the user's opt-out
])
def test_nothing_is_set_where_it_would_not_hold_or_is_refused(machine, flags, env) -> None:
    assert kernels.kernel_settings(env, machine, flags) == {}


def test_cpu_flags_are_read_from_the_first_flags_line(tmp_path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 fma\nflags\t: other\n", encoding="utf-8")
    assert kernels.cpu_flags(str(info)) == {"fpu", "avx2", "fma"}
    assert kernels.cpu_flags(str(tmp_path / "absent")) == frozenset()


def test_pin_is_a_no_op_once_numpy_is_loaded() -> None:
    import numpy  # noqa: F401  (loaded: the variables would come too late)
    environ: dict[str, str] = {}
    assert kernels.pin(environ) == {} and environ == {}


def _kernels_of_a_fresh_process(env: dict[str, str]) -> dict:
    code = ("import json, pipeline\nfrom pipeline.kernels import pinned\n"
            "print(json.dumps(pinned()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJ_ROOT, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.machine() != "x86_64" or not kernels.NEEDED_FLAGS
                    <= kernels.cpu_flags(), reason="the pin holds on x86-64 with AVX2 and FMA")
def test_a_pipeline_process_runs_the_avx2_kernels() -> None:
    env = {k: v for k, v in os.environ.items() if k not in VARS and k != kernels.OPT_OUT}
    assert _kernels_of_a_fresh_process(env) == {"numpy_avx512": False, "openblas": ["Haswell"]}
    if "avx512f" in kernels.cpu_flags():
        # on an AVX-512 machine the opt-out really gives other kernels (the pin is no no-op)
        native = _kernels_of_a_fresh_process(dict(env, **{kernels.OPT_OUT: "1"}))
        assert native["openblas"] != ["Haswell"] or native["numpy_avx512"]
