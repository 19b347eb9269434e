"""Raw outputs as stored: once per content (table `blobs`, keyed by SHA-256), zlib-compressed when
that saves space, or compressed against an earlier file of the same import (its base).

An imported file with fifty results is stored once, not fifty times, and an identical stdout of a
thousand runs costs one copy. Reading a blob back checks it against its recorded size and hash
(`unpack`), so damaged bytes are refused (BlobDamaged), never handed on.
"""

from __future__ import annotations

import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path

# Raw outputs up to this size are kept inside the database as well as on disk.
MAX_BLOB_BYTES = 8 * 1024 * 1024
ZLIB_LEVEL = 6  # level 9 saves under 2% more on benchmark outputs, at twice the time


@dataclass
class ArtifactFile:
    """A run's output file as read for storing: its bytes, hash and packed form."""

    name: str
    path: str
    sha256: str
    size: int
    data: bytes | None  # None when larger than MAX_BLOB_BYTES (only the path is kept)
    packed: tuple[str, bytes | None]


def _read_artifact(path: Path) -> ArtifactFile:
    import hashlib  # here: OpenSSL's start costs ~5 ms of every command that opens the store only to read it

    data = path.read_bytes()
    kept = data if len(data) <= MAX_BLOB_BYTES else None
    return ArtifactFile(path.name, str(path.resolve()), hashlib.sha256(data).hexdigest(), len(data), kept,
                        pack(kept))


def pack(data: bytes | None) -> tuple[str, bytes | None]:
    """(codec, content) for a blob: zlib when it saves space, else the bytes as they are; 'none'
    for bytes not kept."""
    if data is None:
        return "none", None
    packed = zlib.compress(data, ZLIB_LEVEL)
    return ("zlib", packed) if len(packed) < len(data) else ("raw", data)


BASE_DICT_BYTES = 32768  # of a base's bytes, the last this many are the dictionary (zlib's window: no use for more)
DELTA_CODEC = "zlib+base"


def pack_against(data: bytes, base: bytes) -> bytes:
    """`data` compressed with the end of `base` (an earlier file's bytes) as zlib's preset dictionary."""
    packer = zlib.compressobj(ZLIB_LEVEL, zdict=base[-BASE_DICT_BYTES:])
    return packer.compress(data) + packer.flush()


class BlobDamaged(ValueError):
    """Stored bytes that do not decode to their recorded size and hash."""


def unpack(codec: str | None, content, size: int, sha256: str, base: bytes | None = None) -> bytes | None:
    """The original bytes of a blob, checked against its size and hash; None when they were not
    kept (codec 'none', or no blob). Decompression stops one byte past `size`: a damaged or
    hostile blob cannot make it allocate more than the output it claims to be. `base`: the
    original bytes of the blob a 'zlib+base' blob was compressed against."""
    if codec in (None, "none") or content is None:
        return None
    data = content.encode() if isinstance(content, str) else bytes(content)
    if codec in ("zlib", DELTA_CODEC):
        if not isinstance(size, int) or not 0 <= size <= MAX_BLOB_BYTES:
            raise BlobDamaged(f"its recorded size {size!r} is not a size it could have been kept at")
        if codec == DELTA_CODEC and base is None:
            raise BlobDamaged("the blob it was compressed against is missing or damaged")
        inflater = zlib.decompressobj(zdict=base[-BASE_DICT_BYTES:]) if base is not None else zlib.decompressobj()
        try:
            data = inflater.decompress(data, size + 1)
        except zlib.error as exc:
            raise BlobDamaged(f"it does not decompress ({exc})") from None
    elif codec != "raw":
        raise BlobDamaged(f"unknown codec {codec!r}")
    if len(data) != size:
        raise BlobDamaged(f"{len(data)} bytes where {size} were stored")
    import hashlib

    if hashlib.sha256(data).hexdigest() != sha256:
        raise BlobDamaged("its SHA-256 differs from the one recorded when it was stored")
    return data


def _store_blob(conn: sqlite3.Connection, digest: str, size: int, data: bytes | None,
                packed: tuple[str, bytes | None] | None = None, base: tuple[str, bytes] | None = None) -> str | None:
    """Keep these bytes under their hash unless they are kept already (then nothing is compressed
    or written). A blob recorded as not kept ('none') gets the bytes when a later writer has them.
    With `base` (the SHA-256 and bytes of a blob compressed alone: the caller checked it is stored),
    compressed against it (raw when that is no smaller). Returns the codec written (None: nothing written)."""
    row = conn.execute("SELECT codec FROM blobs WHERE sha256=?", (digest,)).fetchone()
    if row is not None and (row[0] != "none" or data is None):
        return None
    kept = data if data is not None and len(data) <= MAX_BLOB_BYTES else None
    against = None
    if base is not None and kept is not None and packed is None and base[0] != digest:
        delta = pack_against(kept, base[1])  # alone it would hardly be smaller: not compressed twice
        codec, content, against = (DELTA_CODEC, delta, base[0]) if len(delta) < len(kept) else ("raw", kept, None)
    else:
        codec, content = packed if packed is not None else pack(kept)
    values = (digest, size, 0 if content is None else len(content), codec, content)
    if against is None:
        conn.execute("INSERT INTO blobs (sha256, size, stored, codec, content) VALUES (?,?,?,?,?)"
                     " ON CONFLICT(sha256) DO UPDATE SET stored=excluded.stored, codec=excluded.codec,"
                     " content=excluded.content", values)
    else:
        conn.execute("INSERT INTO blobs (sha256, size, stored, codec, content, base) VALUES (?,?,?,?,?,?)"
                     " ON CONFLICT(sha256) DO UPDATE SET stored=excluded.stored, codec=excluded.codec,"
                     " content=excluded.content, base=excluded.base", (*values, against))
    return codec


def _base_of(conn: sqlite3.Connection, sha256: str | None) -> bytes | None:
    """The original bytes of the base blob a 'zlib+base' blob needs, None when missing or damaged."""
    row = conn.execute("SELECT codec, content, size FROM blobs WHERE sha256=?", (sha256,)).fetchone() \
        if sha256 else None
    try:
        return unpack(row[0], row[1], row[2], str(sha256)) if row is not None else None
    except BlobDamaged:
        return None
