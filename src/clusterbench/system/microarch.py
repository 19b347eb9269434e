"""Double-precision floating-point operations per cycle per core, and Rpeak.

Rpeak = cores x nominal frequency x DP flops/cycle/core. The flops/cycle figure is the width
of the vector unit in doubles x 2 (an FMA is two flops) x the number of FMA pipes. It is
looked up first by microarchitecture (vendor, family, model or core name), because the ISA
flags alone can mislead (Zen 1 has AVX2 but 128-bit FMA units; Zen 4 has AVX-512 on 256-bit
units), and only then derived from the ISA flags. Every answer carries its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterbench.system.topology import Topology


@dataclass(frozen=True)
class Microarch:
    name: str
    flops_per_cycle: int
    note: str


# x86: (vendor, family, model range) -> microarchitecture.
_AMD = [
    (0x17, range(0x00, 0x30), Microarch("AMD Zen/Zen+", 8, "AVX2 on 2x128-bit FMA units")),
    (0x17, range(0x30, 0x100), Microarch("AMD Zen 2", 16, "AVX2 with 2x256-bit FMA units")),
    (0x19, range(0x00, 0x10), Microarch("AMD Zen 3", 16, "AVX2 with 2x256-bit FMA units")),
    (0x19, range(0x20, 0x60), Microarch("AMD Zen 3", 16, "AVX2 with 2x256-bit FMA units")),
    (0x19, range(0x10, 0x20), Microarch("AMD Zen 4", 16, "AVX-512 executed on 2x256-bit FMA units")),
    (0x19, range(0x60, 0x100), Microarch("AMD Zen 4", 16, "AVX-512 executed on 2x256-bit FMA units")),
    (0x1A, range(0x00, 0x100), Microarch("AMD Zen 5", 32, "AVX-512 with 2x512-bit FMA units")),
]

# Intel family 6 model numbers (server and common client parts).
_INTEL = {
    **dict.fromkeys((42, 45, 58, 62), Microarch("Intel Sandy/Ivy Bridge", 8, "AVX without FMA")),
    **dict.fromkeys((60, 63, 69, 70), Microarch("Intel Haswell", 16, "AVX2 with 2 FMA units")),
    **dict.fromkeys((61, 71, 79, 86), Microarch("Intel Broadwell", 16, "AVX2 with 2 FMA units")),
    **dict.fromkeys((78, 94, 142, 158, 165), Microarch("Intel Skylake (client)", 16,
                                                       "AVX2 with 2 FMA units")),
    85: Microarch("Intel Skylake-SP/Cascade Lake", 32, "AVX-512 with 2 FMA units (Gold 6xxx/Platinum)"),
    **dict.fromkeys((106, 108), Microarch("Intel Ice Lake-SP", 32, "AVX-512 with 2 FMA units")),
    **dict.fromkeys((143, 207), Microarch("Intel Sapphire/Emerald Rapids", 32,
                                          "AVX-512 with 2 FMA units")),
    **dict.fromkeys((87, 133), Microarch("Intel Xeon Phi (KNL/KNM)", 32, "AVX-512 with 2 FMA units")),
}

# Core names as lscpu/cpuinfo report them (Arm, POWER) or model-name keywords.
_BY_NAME = [
    (r"Cortex-A53", Microarch("Arm Cortex-A53", 2, "NEON, one 64-bit DP FMA per cycle")),
    (r"Cortex-A72", Microarch("Arm Cortex-A72", 4, "NEON/ASIMD 128-bit, one FMA pipe")),
    (r"Cortex-A76", Microarch("Arm Cortex-A76", 8, "NEON/ASIMD 2x128-bit FMA pipes")),
    (r"Neoverse-N1", Microarch("Arm Neoverse N1", 8, "NEON/ASIMD 2x128-bit FMA pipes")),
    (r"Neoverse-V1", Microarch("Arm Neoverse V1", 16, "SVE 2x256-bit FMA pipes")),
    (r"Neoverse-V2", Microarch("Arm Neoverse V2", 16, "SVE2 4x128-bit FMA pipes")),
    (r"ThunderX2", Microarch("Marvell ThunderX2", 8, "NEON 2x128-bit FMA pipes")),
    (r"A64FX", Microarch("Fujitsu A64FX", 32, "SVE 2x512-bit FMA pipes")),
    (r"POWER9", Microarch("IBM POWER9", 16, "VSX, SMT4 core with 4x128-bit FMA pipes")),
    (r"POWER10", Microarch("IBM POWER10", 32, "VSX, SMT8 core with 8x128-bit FMA pipes")),
]

# Known nominal (base) frequencies for models whose name does not state them.
NOMINAL_MHZ = {
    "EPYC 7401": 2000, "EPYC 7551": 2000, "EPYC 7742": 2250, "EPYC 7763": 2450,
    "EPYC 7H12": 2600, "EPYC 9654": 2400, "Cortex-A72": 1500, "Cortex-A76": 2400,
    "ThunderX2": 2200,
}


def microarch_of(topo: Topology) -> Microarch | None:
    """The microarchitecture from vendor/family/model or core name; None if not in the table."""
    vendor = (topo.vendor or "").lower()
    if "amd" in vendor and topo.cpu_family is not None and topo.cpu_model is not None:
        for fam, models, arch in _AMD:
            if topo.cpu_family == fam and topo.cpu_model in models:
                return arch
    if "intel" in vendor and topo.cpu_family == 6 and topo.cpu_model in _INTEL:
        return _INTEL[topo.cpu_model]
    name = topo.model_name or ""
    for pattern, arch in _BY_NAME:
        if re.search(pattern, name, re.I):
            return arch
    return None


def flops_from_flags(flags: set[str], arch: str | None) -> tuple[int, str] | None:
    """Fallback from ISA flags alone, assuming two FMA pipes where FMA exists (x86)."""
    if "avx512f" in flags:
        return 32, "AVX-512F with 2 FMA units assumed (some Xeon Silver/Bronze have 1: then 16)"
    if "avx2" in flags and "fma" in flags:
        return 16, "AVX2+FMA: 4 doubles x 2 (FMA) x 2 units"
    if "avx" in flags:
        return 8, "AVX without FMA: 4-wide add + 4-wide multiply"
    if "sse2" in flags:
        return 4, "SSE2: 2-wide add + 2-wide multiply"
    if "asimd" in flags or (arch or "").startswith("aarch64"):
        return 4, "Arm ASIMD 128-bit with one FMA pipe assumed"
    return None


@dataclass
class PeakEstimate:
    flops_per_cycle: int | None
    flops_reason: str
    frequency_mhz: float | None
    frequency_source: str | None
    cores: int

    @property
    def rpeak_gflops(self) -> float | None:
        """Per node, in Gflop/s."""
        if self.flops_per_cycle is None or self.frequency_mhz is None:
            return None
        return self.cores * self.frequency_mhz / 1000.0 * self.flops_per_cycle

    def derivation(self) -> str:
        if self.rpeak_gflops is None:
            missing = "flops/cycle" if self.flops_per_cycle is None else "frequency"
            return f"unknown {missing}: give --flops-per-cycle / --frequency"
        return (f"{self.cores} cores x {self.frequency_mhz / 1000:.3f} GHz x "
                f"{self.flops_per_cycle} DP flops/cycle = {self.rpeak_gflops:.2f} Gflop/s")


def estimate_peak(topo: Topology, flops_per_cycle: int | None = None,
                  frequency_mhz: float | None = None) -> PeakEstimate:
    """Rpeak inputs with overrides; each figure keeps the reason it was chosen."""
    if flops_per_cycle is not None:
        fpc, reason = flops_per_cycle, "given with --flops-per-cycle"
    else:
        arch = microarch_of(topo)
        derived = flops_from_flags(topo.flags, topo.architecture)
        if arch:
            fpc, reason = arch.flops_per_cycle, f"{arch.name}: {arch.note}"
        elif derived:
            fpc, reason = derived
        else:
            fpc, reason = None, "unknown microarchitecture and no ISA flags"
    freq, fsrc = topo.frequency_mhz, topo.frequency_source
    if frequency_mhz is not None:
        freq, fsrc = frequency_mhz, "given with --frequency"
    elif freq is None:
        for model, mhz in NOMINAL_MHZ.items():
            if model.lower() in (topo.model_name or "").lower():
                freq, fsrc = float(mhz), f"nominal frequency of {model} (built-in table)"
                break
    return PeakEstimate(fpc, reason, freq, fsrc, topo.cores_total)
