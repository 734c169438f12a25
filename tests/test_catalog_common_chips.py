"""The accelerators people train on resolve to cited catalog rows (not ``unknown_accelerator``)."""

from __future__ import annotations

import pytest

from pipeline.catalog import load_catalog
from pipeline.config import PROJ_ROOT


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(PROJ_ROOT / "data" / "catalog")


@pytest.mark.parametrize("name, acc_id, bf16_peak", [
    ("Tesla T4", "T4", 65e12),            # no bf16 units: the fp16 tensor peak
    ("NVIDIA L4", "L4", 242e12 / 2),       # datasheet 242 with sparsity
    ("NVIDIA A40", "A40", 149.7e12),
    ("RTX A6000", "RTX-A6000", 154.8e12),   # 309.7 with sparsity, printed dense as 154.8
    ("GeForce RTX 4090", "RTX-4090", 165.2e12),
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB", 125e12),
    ("Tesla V100-PCIE-16GB", "V100-PCIe-16GB", 112e12),
    ("MI250X GCD", "MI250X-GCD", 383e12 / 2),
    ("MI250X OAM", "MI250X-OAM", 383e12),
    ("NVIDIA H20", "H20", 148e12),
    ("Intel Gaudi 3", "Gaudi3", 1835e12),
    ("AWS Trainium2", "Trainium2", 667e12),
    ("TPU v4", "TPU-v4", 275e12), ("TPU v5e", "TPU-v5e", 197e12),
    ("TPU v5p", "TPU-v5p", 459e12), ("TPU v6e", "TPU-v6e", 918e12),
])
def test_common_chip_resolves_with_its_dense_peak(catalog, name, acc_id, bf16_peak):
    assert catalog.resolve_accelerator(name) == acc_id
    assert catalog.peak_flops_per_s(acc_id, "bf16")[0] == pytest.approx(bf16_peak)
    spec = catalog.spec(acc_id)
    assert spec["sources"] and spec["hbm_bytes"] > 0 and spec["hbm_bytes_per_s"] > 0


def test_chips_without_a_sourced_peak_give_none_not_a_guess(catalog):
    # The A10G's tensor peaks are published nowhere checked: MFU is not derived.
    assert catalog.peak_flops_per_s("A10G", "bf16") == (None, None)
    assert catalog.spec("A10G")["hbm_bytes_per_s"] == 600e9


def test_bare_mi250x_says_which_to_write(catalog):
    assert catalog.resolve_accelerator("MI250X") is None
    assert "MI250X GCD" in catalog.explain_accelerator("MI250X")


def test_fp8_units_are_known_where_the_chip_has_them(catalog):
    # The precision guard (no MFU on an assumed precision) rests on the fp8 column.
    for acc in ("L4", "RTX-4090", "H20", "Gaudi3", "Trainium2"):
        assert catalog.peak_flops_per_s(acc, "fp8")[0] is not None, acc
    for acc in ("T4", "A40", "RTX-A6000", "V100-SXM2-16GB", "MI250X-GCD"):
        assert catalog.peak_flops_per_s(acc, "fp8")[0] is None, acc
