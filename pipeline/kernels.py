"""One set of floating-point kernels on every x86-64 machine, so outputs are the same bytes.

numpy and OpenBLAS pick their SIMD kernels for the processor they load on: on a machine with
AVX-512, numpy's ``exp``/``log``/reductions and OpenBLAS's matrix kernels (``SkylakeX``) round
differently in the last bits from the AVX2 kernels (``Haswell``) of a machine without it. Those
bits reach the outputs: on the shipped data, an AVX-512 machine (2026-12-05, AMD EPYC) rewrote
28 of the 46 outputs of ``dvc repro``, and fit.json's counts of series by their best law by
AICc changed (amdahl 59 -> 58, comm 18 -> 19, usl 63 -> 65). So ``dvc repro`` churned on every
machine unlike the one that last ran it.

``pin()`` runs when ``pipeline`` is first imported, before numpy is: it asks both libraries
for the AVX2 kernels (``OPENBLAS_CORETYPE=Haswell``, read by numpy's and scipy's OpenBLAS when
they load; ``NPY_DISABLE_CPU_FEATURES`` naming numpy's AVX-512 targets). Every x86-64 processor
with AVX2 and FMA (Intel since 2013, AMD since 2015) then computes the same bits; with that
setting the AVX-512 machine above reproduced every committed output byte for byte. A variable
the user already set is left alone (they chose), ``SCALEWALL_NATIVE_KERNELS=1`` keeps the
processor's own kernels (faster where AVX-512 pays; outputs then may differ in the last bits),
and other processors (no AVX2, Arm) are left as they are: their kernels differ anyway.

It acts through environment variables, so it only holds for a process where numpy was not yet
imported: ``python -m pipeline`` and the ``scalewall`` command (the DVC stages), and the worker
processes they start. Code that imports numpy first (a notebook, a test) gets the machine's
kernels; ``pinned()`` says which it got.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable, MutableMapping

#: OpenBLAS's kernel family for AVX2 + FMA processors (its DYNAMIC_ARCH core names).
OPENBLAS_CORE = "Haswell"
#: numpy's AVX-512 dispatch targets (``numpy._core._multiarray_umath.__cpu_dispatch__`` of the
#: pinned numpy); its AVX2 ones stay.
NUMPY_AVX512 = ("AVX512F", "AVX512CD", "AVX512_KNL", "AVX512_KNM", "AVX512_SKX", "AVX512_CLX",
                "AVX512_CNL", "AVX512_ICL", "AVX512_SPR")
#: What the Haswell kernels need (``/proc/cpuinfo`` flag names).
NEEDED_FLAGS = frozenset({"avx2", "fma"})
OPT_OUT = "SCALEWALL_NATIVE_KERNELS"


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The processor's feature flags (the first ``flags`` line of ``cpuinfo``; empty when it
    cannot be read, as on macOS)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def kernel_settings(environ: MutableMapping[str, str], machine: str,
                    flags: Iterable[str]) -> dict[str, str]:
    """The variables ``pin`` sets for this environment, machine and processor (those already
    set, or none at all: see the module docstring)."""
    if environ.get(OPT_OUT, "").strip() not in ("", "0"):
        return {}
    if machine.lower() not in ("x86_64", "amd64") or not NEEDED_FLAGS <= set(flags):
        return {}
    wanted = {"OPENBLAS_CORETYPE": OPENBLAS_CORE,
              "NPY_DISABLE_CPU_FEATURES": " ".join(NUMPY_AVX512)}
    return {k: v for k, v in wanted.items() if k not in environ}


def pin(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the kernel variables in ``environ`` (``os.environ``) unless numpy is already loaded
    (too late to matter); returns what it set."""
    environ = os.environ if environ is None else environ
    if "numpy" in sys.modules:
        return {}
    chosen = kernel_settings(environ, platform.machine(), cpu_flags())
    environ.update(chosen)
    return chosen


def pinned() -> dict[str, object]:
    """The kernels this process runs: numpy's AVX-512 use and each OpenBLAS's core (imports
    numpy and scipy's linear algebra)."""
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS, so threadpoolctl sees it)
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    from threadpoolctl import threadpool_info
    return {"numpy_avx512": any(__cpu_features__.get(f) for f in NUMPY_AVX512
                                if f in __cpu_dispatch__),
            "openblas": sorted({str(i.get("architecture")) for i in threadpool_info()
                                if i.get("internal_api") == "openblas"})}
