"""HPL.dat and hpccinf.txt, written line for line in the format HPL reads.

HPL reads each line's leading values and ignores the rest, so the second column is a
human-readable label exactly as in the netlib sample file. hpccinf.txt is HPL.dat plus a
separator line (line 32, ignored) and four PTRANS lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PFACT = {"left": 0, "crout": 1, "right": 2}
BCAST = {"1rg": 0, "1rm": 1, "2rg": 2, "2rm": 3, "lng": 4, "lnm": 5}
SWAP = {"bin-exch": 0, "long": 1, "mix": 2}
PMAP = {"row": 0, "column": 1}
RFACT = PFACT  # the recursive panel factorisation takes the same three variants


@dataclass
class HplInput:
    """Every parameter of HPL.dat. Defaults are those of a tuned single-node run."""

    ns: list[int]
    nbs: list[int]
    grids: list[tuple[int, int]]
    pmap: int = 0  # 0 row-major, 1 column-major
    threshold: float = 16.0
    pfacts: list[int] = field(default_factory=lambda: [2])
    nbmins: list[int] = field(default_factory=lambda: [4])
    ndivs: list[int] = field(default_factory=lambda: [2])
    rfacts: list[int] = field(default_factory=lambda: [1])
    bcasts: list[int] = field(default_factory=lambda: [1])
    depths: list[int] = field(default_factory=lambda: [1])
    swap: int = 2
    swap_threshold: int = 64
    l1_transposed: bool = True
    u_transposed: bool = True
    equilibration: bool = True
    alignment: int = 8
    output_file: str = "HPL.out"
    device_out: int = 6  # 6 = stdout, 7 = stderr, other = the file above
    ptrans_ns: list[int] = field(default_factory=list)
    ptrans_nbs: list[int] = field(default_factory=list)

    @property
    def test_count(self) -> int:
        """How many result lines HPL will print for this input."""
        return (len(self.ns) * len(self.nbs) * len(self.grids) * len(self.pfacts) * len(self.nbmins)
                * len(self.ndivs) * len(self.rfacts) * len(self.bcasts) * len(self.depths))


def _line(values: list | int | float | str, label: str) -> str:
    text = " ".join(str(v) for v in values) if isinstance(values, list) else str(values)
    return f"{text:<12} {label}"


def render_hpl_dat(inp: HplInput) -> str:
    ps = [p for p, _ in inp.grids]
    qs = [q for _, q in inp.grids]
    lines = [
        "HPLinpack benchmark input file",
        "Innovative Computing Laboratory, University of Tennessee",
        _line(inp.output_file, "output file name (if any)"),
        _line(inp.device_out, "device out (6=stdout,7=stderr,file)"),
        _line(len(inp.ns), "# of problems sizes (N)"),
        _line(inp.ns, "Ns"),
        _line(len(inp.nbs), "# of NBs"),
        _line(inp.nbs, "NBs"),
        _line(inp.pmap, "PMAP process mapping (0=Row-,1=Column-major)"),
        _line(len(inp.grids), "# of process grids (P x Q)"),
        _line(ps, "Ps"),
        _line(qs, "Qs"),
        _line(f"{inp.threshold:g}" if inp.threshold < 0.1 else f"{inp.threshold:.1f}", "threshold"),
        _line(len(inp.pfacts), "# of panel fact"),
        _line(inp.pfacts, "PFACTs (0=left, 1=Crout, 2=Right)"),
        _line(len(inp.nbmins), "# of recursive stopping criterium"),
        _line(inp.nbmins, "NBMINs (>= 1)"),
        _line(len(inp.ndivs), "# of panels in recursion"),
        _line(inp.ndivs, "NDIVs"),
        _line(len(inp.rfacts), "# of recursive panel fact."),
        _line(inp.rfacts, "RFACTs (0=left, 1=Crout, 2=Right)"),
        _line(len(inp.bcasts), "# of broadcast"),
        _line(inp.bcasts, "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"),
        _line(len(inp.depths), "# of lookahead depth"),
        _line(inp.depths, "DEPTHs (>=0)"),
        _line(inp.swap, "SWAP (0=bin-exch,1=long,2=mix)"),
        _line(inp.swap_threshold, "swapping threshold"),
        _line(0 if inp.l1_transposed else 1, "L1 in (0=transposed,1=no-transposed) form"),
        _line(0 if inp.u_transposed else 1, "U  in (0=transposed,1=no-transposed) form"),
        _line(1 if inp.equilibration else 0, "Equilibration (0=no,1=yes)"),
        _line(inp.alignment, "memory alignment in double (> 0)"),
    ]
    return "\n".join(lines) + "\n"


def render_hpccinf(inp: HplInput) -> str:
    """HPCC writes its own output to hpccoutf.txt; the PTRANS lines add sizes to its defaults."""
    extra = [
        "##### This line (no. 32) is ignored (it serves as a separator). ######",
        _line(len(inp.ptrans_ns), "Number of additional problem sizes for PTRANS"),
        _line(inp.ptrans_ns or [1200, 10000, 30000], "values of N"),
        _line(len(inp.ptrans_nbs), "number of additional blocking sizes for PTRANS"),
        _line(inp.ptrans_nbs or [40, 9, 8, 13, 13, 20, 16, 32, 64], "values of NB"),
    ]
    return render_hpl_dat(inp) + "\n".join(extra) + "\n"
