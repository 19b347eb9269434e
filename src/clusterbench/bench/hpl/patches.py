"""Source patches applied to a copy of an HPL tree before it is built (never to the user's files).

- MPI-3 removed the MPI-1 calls `MPI_Address`, `MPI_Type_struct`, `MPI_Type_hvector`,
  `MPI_Type_hindexed` (and deprecated `MPI_Errhandler_set`, `MPI_Attr_get`); HPL 2.0-2.2 and
  HPCC's HPL still call some of them, so they fail to link against an MPI built without the
  MPI-1 compatibility layer. Their MPI-2 replacements take the same arguments.
- HPCC's HPL is a library whose driver `HPL_main` reads `hpccinf.txt`, always appends its
  results to `hpccoutf.txt`, and silently falls back to built-in defaults on a bad input
  file. A standalone `xhpl` must read `HPL.dat`, honour the file's output device line, and
  stop on bad input like netlib's, so those three places are patched; `hpl_main.c` (shipped
  with clusterbench) supplies `main`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MPI1_RENAMES = {
    "MPI_Address": "MPI_Get_address",
    "MPI_Type_struct": "MPI_Type_create_struct",
    "MPI_Type_hvector": "MPI_Type_create_hvector",
    "MPI_Type_hindexed": "MPI_Type_create_hindexed",
    "MPI_Errhandler_set": "MPI_Comm_set_errhandler",
    "MPI_Attr_get": "MPI_Comm_get_attr",
}
_MPI1 = re.compile(r"\b(" + "|".join(MPI1_RENAMES) + r")\b(?=\s*\()")


def replace_mpi1_calls(text: str) -> tuple[str, int]:
    """The text with MPI-1 calls renamed to their MPI-2 forms, and how many were renamed."""
    return _MPI1.subn(lambda m: MPI1_RENAMES[m.group(1)], text)


def patch_mpi1_tree(root: Path) -> dict[str, int]:
    """Rename removed MPI-1 calls in every C file under `root`; {relative path: calls renamed}."""
    changed = {}
    for path in sorted(root.rglob("*.c")):
        text = path.read_text(errors="replace")
        new, count = replace_mpi1_calls(text)
        if count:
            path.write_text(new)
            changed[str(path.relative_to(root))] = count
    return changed


@dataclass(frozen=True)
class Patch:
    why: str
    pattern: re.Pattern
    replacement: str


_EXIT_ON_BAD_INPUT = ('if( rank == 0 ) HPL_pwarn( stderr, __LINE__, "HPL_pdinfo", '
                      '"Illegal input in file " INFILE ". Exiting ..." );\n'
                      '     MPI_Finalize();\n     exit( 1 );')

HPCC_DRIVER_PATCHES = (
    Patch("read HPL.dat, not hpccinf.txt",
          re.compile(r'#define\s+INFILE\s+"hpccinf\.txt"'), '#define INFILE "HPL.dat"'),
    Patch("honour the output device line of HPL.dat instead of always appending to hpccoutf.txt",
          re.compile(r'fid\s*=\s*8;[^\n]*\n\s*strcpy\(\s*file,\s*"hpccoutf\.txt"\s*\);'), ""),
    Patch("stop on a bad HPL.dat instead of running HPCC's default problem",
          re.compile(r"HPCC_Defaults\(\s*TEST,.*?MPI_COMM_WORLD\s*\);", re.S), _EXIT_ON_BAD_INPUT),
)


class PatchError(Exception):
    """A patch did not find its target: the tree is not the source this build expects."""


def patch_text(text: str, patches: tuple[Patch, ...], name: str) -> str:
    for patch in patches:
        text, count = patch.pattern.subn(lambda _m, p=patch: p.replacement, text)
        if count != 1:
            raise PatchError(f"{name}: cannot apply patch '{patch.why}' (its target was found {count} times)")
    return text


def patch_hpcc_driver(hpl_root: Path) -> list[str]:
    """Turn HPCC's HPL driver into a standalone xhpl driver (see the module docstring)."""
    info = hpl_root / "testing" / "ptest" / "HPL_pdinfo.c"
    info.write_text(patch_text(info.read_text(errors="replace"), HPCC_DRIVER_PATCHES, str(info.name)))
    return [p.why for p in HPCC_DRIVER_PATCHES]
