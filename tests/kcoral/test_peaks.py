"""The per-device peak table: driver names find their row, every row names its source, and a
device that is not in the table gets no floor and says so (it used to get the H200's)."""

import pytest

from kcoral.errors import JobError
from kcoral.job import Work
from kcoral.measure import throughput
from kcoral.peaks import TABLE, peak_for, peak_info

# names as cuDeviceGetName reports them -> the row they must find
DRIVER_NAMES = {
    "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
    "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA B200": "B200",
    "NVIDIA GB200": "GB200",
    "NVIDIA Thor": "Jetson AGX Thor (T5000)",
}


@pytest.mark.parametrize("name,row", sorted(DRIVER_NAMES.items()))
def test_driver_names_find_their_row(name, row):
    assert peak_for(name).device == row


def test_every_row_is_sourced_and_plausible():
    for p in TABLE:
        assert p.source and ("datasheet" in p.source), p
        assert 1e14 < p.flops_per_s < 1e16 and 1e11 < p.bytes_per_s < 1e13, p
    assert len({p.device for p in TABLE}) == len(TABLE)


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 4090", "NVIDIA H800", "", "Tesla V100"])
def test_an_unknown_device_gets_no_floor_and_says_so(name):
    info = peak_info(name)
    assert "peak_flops_per_s" not in info and "not in kcoral's peak table" in info["peak_unknown"]
    t = throughput(Work(flops=2 * 4096 ** 3, bytes=1e9), 0.001, dict(info, name=name))
    assert t["floor_ms"] is None and not t["suspect"]  # 137 PFLOP/s: not judged without peaks
    assert t["floor_note"] == info["peak_unknown"] and t["tflops"] > 1e5


def test_operator_figures_win_and_name_their_source():
    info = peak_info("NVIDIA GeForce RTX 4090", {"peak_flops_per_s": 165e12,
                                                  "peak_bytes_per_s": 1.0e12})
    assert info["peak_flops_per_s"] == 165e12 and info["peak_source"].startswith("operator")
    h = peak_info("NVIDIA H200", {"peak_bytes_per_s": 4.0e12})
    assert h["peak_bytes_per_s"] == 4.0e12 and h["peak_flops_per_s"] == 989.4e12
    assert "operator" in h["peak_source"] and "H200 SXM" in h["peak_source"]


def test_the_h200_floor_uses_datasheet_figures():
    info = dict(peak_info("NVIDIA H200"), name="NVIDIA H200")
    gemm = Work(flops=2 * 8192 ** 3)
    honest = throughput(gemm, 1.38, info)  # cuBLAS at full clock (2026-12-01): 797 TFLOP/s
    assert not honest["suspect"] and honest["floor_fraction"] == pytest.approx(0.805, abs=0.01)
    assert "H200 SXM" in honest["peak_source"]
    assert throughput(gemm, 1.0, info)["suspect"]  # 1,100 TFLOP/s is past the peak


def test_fp8_work_is_held_against_the_fp8_peak():
    """2026-12-01: the zoo's fp8 GEMM at 1555 TFLOP/s was flagged `suspect` because its FLOPs
    were divided by the bf16 peak; declared as fp8 they meet the 1979 TFLOP/s FP8 peak."""
    info = dict(peak_info("NVIDIA H200"), name="NVIDIA H200")
    assert info["peak_fp8_flops_per_s"] == pytest.approx(1979e12)
    fp8 = throughput(Work(flops=2 * 8192 ** 3, flops_dtype="fp8"), 0.7183, info)
    assert not fp8["suspect"] and fp8["floor_fraction"] == pytest.approx(0.773, abs=0.01)
    assert throughput(Work(flops=2 * 8192 ** 3), 0.7183, info)["suspect"]  # as bf16: impossible
    assert throughput(Work(flops=2 * 8192 ** 3, flops_dtype="fp8"), 0.5, info)["suspect"]


def test_an_8bit_claim_without_an_8bit_peak_gets_only_the_bytes_floor():
    info = dict(peak_info("NVIDIA A100-SXM4-80GB"), name="A100")
    assert "peak_fp8_flops_per_s" not in info
    out = throughput(Work(flops=1e12, bytes=2e9, flops_dtype="int8"), 0.001, info)
    assert out["floor_ms"] == pytest.approx(2e9 / 2039e9 * 1e3)


def test_flops_dtype_is_validated_in_the_job_model():
    with pytest.raises(JobError, match="flops_dtype.*'fp4' is not one of"):
        Work.parse({"flops": 1.0, "flops_dtype": "fp4"}, "work")
    assert Work.parse({"flops": 1.0, "flops_dtype": "fp8"}).flops_dtype == "fp8"
