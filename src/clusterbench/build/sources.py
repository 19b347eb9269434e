"""Where a benchmark's source comes from: a tree or tarball the user gives, or Debian's archive.

With no source given on Debian/Ubuntu, HPL comes from the `hpcc` source package (HPCC bundles
HPL 2.0 under `hpl/`). It is downloaded with apt through a private configuration (its own
deb-src list, package lists and cache under the builds folder), so the machine's apt setup is
neither needed nor touched; apt verifies the files against the archive's signed index. The
deb-src entries copy the URIs, suites, components and keyrings of the system's own `deb`
entries. Only the upstream tarball (`*.orig.tar.*`) is used: Debian's packaging is not.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from clusterbench.build.cache import locked
from clusterbench.errors import MissingToolError, UserInputError


@dataclass(frozen=True)
class AptSource:
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: str | None = None

    def deb_src(self) -> str:
        lines = ["Types: deb-src", f"URIs: {' '.join(self.uris)}", f"Suites: {' '.join(self.suites)}",
                 f"Components: {' '.join(self.components)}"]
        if self.signed_by:
            lines.append(f"Signed-By: {self.signed_by}")
        return "\n".join(lines) + "\n"


def parse_deb822(text: str) -> list[AptSource]:
    """`deb` stanzas of a `.sources` file (deb822 format)."""
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
            out.append(AptSource(tuple(fields.get("uris", "").split()), tuple(fields.get("suites", "").split()),
                                 tuple(fields.get("components", "").split()), fields.get("signed-by")))
    return [s for s in out if s.uris and s.suites]


_ONE_LINE = re.compile(r"^\s*deb\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)\s+(?P<comps>.+)$")


def parse_one_line(text: str) -> list[AptSource]:
    """`deb URI SUITE COMPONENTS...` lines of a `sources.list` file."""
    out = []
    for line in text.splitlines():
        m = _ONE_LINE.match(line.split("#", 1)[0])
        if m:
            signed = re.search(r"signed-by=(\S+)", m.group("opts") or "")
            out.append(AptSource((m.group("uri"),), (m.group("suite"),), tuple(m.group("comps").split()),
                                 signed.group(1) if signed else None))
    return out


def system_apt_sources(etc: Path = Path("/etc/apt")) -> list[AptSource]:
    """The machine's `deb` entries, from sources.list and sources.list.d/*.list|*.sources."""
    found = []
    files = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list")),
             *sorted((etc / "sources.list.d").glob("*.sources"))]
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        found += parse_deb822(text) if path.suffix == ".sources" else parse_one_line(text)
    return found


@dataclass(frozen=True)
class SourcePackage:
    name: str
    version: str
    tarball: Path
    sha256: str
    origin: str  # where it came from, for the provenance


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_debian_source(package: str, dest: Path) -> SourcePackage:
    """Download the upstream tarball of a Debian source package into `dest` (reused if there).

    Under a lock in `dest`: two builds starting at once download once, and neither reads the
    tarball while the other is still writing it."""
    if not shutil.which("apt-get"):
        raise MissingToolError("apt-get not found: cannot fetch Debian's source of " + package,
                               hint="give the source with --source PATH (a tree or a tarball)")
    with locked(dest / f".{package}.lock"):
        return _downloaded(package, dest) or _download(package, dest)


def _download(package: str, dest: Path) -> SourcePackage:
    sources = system_apt_sources()
    if not sources:
        raise UserInputError("no apt 'deb' entries found in /etc/apt to derive deb-src entries from",
                             hint="give the source with --source PATH")
    apt = dest / "apt"
    for sub in ("lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    (apt / "sources.list.d" / "clusterbench-src.sources").write_text("\n".join(s.deb_src() for s in sources))
    options = ["-oDir::Etc::SourceList=/dev/null", f"-oDir::Etc::SourceParts={apt / 'sources.list.d'}",
               f"-oDir::State::Lists={apt / 'lists'}", f"-oDir::Cache={apt / 'cache'}",
               "-oDir::Etc::Preferences=/dev/null", f"-oDir::Etc::PreferencesParts={apt / 'preferences.d'}",
               "-oAPT::Sandbox::User=root", "-qq"]
    _apt(["apt-get", *options, "update"], "updating the private deb-src package lists")
    # The Debian part (debian.tar.*) may be missing from a partial mirror; only the upstream
    # tarball is needed, so the status is judged by what arrived.
    done = subprocess.run(["apt-get", *options, "source", "--download-only", package], cwd=dest,
                          capture_output=True, text=True)
    found = _downloaded(package, dest)
    if not found:
        raise UserInputError(f"apt-get source {package} did not deliver the upstream tarball:\n"
                             + (done.stderr or done.stdout).strip()[-800:],
                             hint="check network access to the Debian archive, or give --source PATH")
    return found


def _apt(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise UserInputError(f"{what} failed (exit code {done.returncode}):\n$ {' '.join(cmd)}\n"
                             + (done.stderr or done.stdout).strip()[-800:],
                             hint="check network access to the Debian archive, or give --source PATH")


def _downloaded(package: str, dest: Path) -> SourcePackage | None:
    """The upstream tarball and version from a .dsc already in `dest`, checked against it."""
    for dsc in sorted(dest.glob(f"{package}_*.dsc"), reverse=True):
        text = dsc.read_text(errors="replace")
        version = re.search(r"^Version:\s*(\S+)", text, re.M)
        for sha, name in re.findall(r"^ ([0-9a-f]{64}) \d+ (\S+\.orig\.tar\.\w+)$", text, re.M):
            tarball = dest / name
            if tarball.is_file() and sha256_of(tarball) == sha:
                return SourcePackage(package, version.group(1) if version else "?", tarball, sha,
                                     f"Debian source package {package} {version.group(1) if version else ''}".strip())
    return None


def unpack(tarball: Path, into: Path) -> Path:
    """Extract a source tarball safely (no absolute paths or links out); its top folder."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise UserInputError(f"cannot unpack {tarball}: {exc}", hint="give an HPL source tarball or tree") from None
    tops = [p for p in into.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else into


def tree_digest(root: Path) -> str:
    """Checksum of a source tree (paths and contents), for the build key and the provenance."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
