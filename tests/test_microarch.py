"""Flops per cycle and Rpeak: table lookups, ISA fallbacks and overrides."""

from __future__ import annotations

import pytest

from clusterbench.system.discover import discover, system_from_file
from clusterbench.system.microarch import estimate_peak, flops_from_flags
from clusterbench.system.sources import from_lscpu_text
from conftest import TOPOLOGY, cli_json

PI4_LSCPU = """Architecture:            aarch64
CPU(s):                  4
Vendor ID:               ARM
Model name:              Cortex-A72
Thread(s) per core:      1
Core(s) per socket:      4
Socket(s):               1
CPU max MHz:             1500.0000
Flags:                   fp asimd evtstrm crc32 cpuid
"""


def test_the_zen3_vm_of_the_fixtures_has_16_flops():
    """The 2-core VM the fixtures were measured on (lscpu -J): Zen 3, 2 x 256-bit FMA."""
    info = system_from_file(TOPOLOGY / "this-vm-lscpu.json")
    assert info.peak.flops_per_cycle == 16 and "Zen 3" in info.peak.flops_reason


def test_this_node_rpeak_is_cores_times_clock_times_flops():
    """Whatever CPU runs the tests (the VMs change kind): a known microarchitecture, and Rpeak
    is its arithmetic."""
    info = discover(with_software=False)
    assert info.peak.flops_per_cycle in (4, 8, 16, 32) and info.peak.flops_reason
    expected = info.topology.cores_total * info.peak.frequency_mhz / 1000 * info.peak.flops_per_cycle
    assert info.rpeak_node_gflops == pytest.approx(expected)


def test_pi4_cortex_a72():
    topo = from_lscpu_text(PI4_LSCPU)
    peak = estimate_peak(topo)
    assert peak.flops_per_cycle == 4
    assert peak.rpeak_gflops == pytest.approx(24.0)  # 4 cores x 1.5 GHz x 4


def test_zen1_naples_uses_128bit_fma():
    info = system_from_file(TOPOLOGY / "epyc-corona.xml")
    assert info.peak.flops_per_cycle == 8
    assert info.rpeak_node_gflops == pytest.approx(48 * 2.0 * 8)


def test_broadwell_frequency_from_model_name():
    info = system_from_file(TOPOLOGY / "cts1-pascal.xml", nodes=4)
    assert info.peak.frequency_mhz == pytest.approx(2100)
    assert info.rpeak_node_gflops == pytest.approx(36 * 2.1 * 16)
    assert info.rpeak_total_gflops == pytest.approx(4 * 36 * 2.1 * 16)


def test_epyc7742_needs_overrides_and_takes_them():
    info = system_from_file(TOPOLOGY / "epyc7742-synthetic.xml")
    assert info.rpeak_node_gflops is None
    assert "--flops-per-cycle" in info.peak.derivation()
    data = cli_json("system", "--from", str(TOPOLOGY / "epyc7742-synthetic.xml"), "--json",
                    "--flops-per-cycle", "16", "--frequency", "2250", "--nodes", "2")
    assert data["peak"]["rpeak_node_gflops"] == pytest.approx(128 * 2.25 * 16)
    assert data["peak"]["rpeak_total_gflops"] == pytest.approx(2 * 128 * 2.25 * 16)


@pytest.mark.parametrize("flags,expected", [
    ({"avx512f", "avx2", "fma"}, 32), ({"avx2", "fma"}, 16), ({"avx"}, 8), ({"sse2"}, 4), ({"asimd"}, 4),
])
def test_flag_fallbacks(flags, expected):
    assert flops_from_flags(flags, None)[0] == expected


def test_override_must_be_positive():
    from conftest import cli

    out = cli("system", "--flops-per-cycle", "0")
    assert out.returncode == 2
