"""CSV read by header name: a copy of a file in its table's column order, loaded in its place.

Athena's SerDes and Spark read a CSV table by position, so a file whose header names the table's
columns in another order (``stage_a.contract.ColumnsByName``) would load its values into the wrong
columns. The door writes a copy next to it, ``<name>.lakeline-by-name.csv[.gz]``, with the same
values under the header in the table's order (and the columns it adds after them), in the table's
dialect and encoding. The copy arrives like any file (its S3 event, or the local flow's), passes the
door and is loaded; the original is never loaded.

Once a file has a copy, every later version of it goes through a copy too, even in the table's order:
the loaded key is the copy's, so a new version replaces the copy's rows instead of adding its own (and
a version loaded before the copy existed is left out of the partition from then on: ``stage_a.plan``).
A copy records the version (S3 sequencer) it was made from and is written only if its place holds
what the router read, so a redelivery writes nothing and an older version never replaces a newer
version's copy (``stage_a.start.admit``).

The raw table itself still lists the original (read by position) next to its copy: stage A reads only
the files it accepted (``"$path" IN (...)``), but a query of the raw table sees both.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import re
import tempfile
from typing import IO, cast

from stage_a.arrivals import Arrival
from stage_a.contract import RawContract, RawFile

MARKER = ".lakeline-by-name"
_HEX = re.compile(r"[0-9A-Fa-f]+")
_SPOOL_BYTES = 64 * 1024 * 1024  # larger copies spill to a temporary file instead of memory


def copy_key(key: str) -> str | None:
    """Where the copy of ``key`` in its table's order goes; ``None`` if ``key`` is itself a copy or not CSV."""
    folder, _, name = key.rpartition("/")
    lowered = name.lower()
    if MARKER in lowered:
        return None
    suffix = next((end for end in (".csv.gz", ".csv") if lowered.endswith(end)), None)
    if suffix is None:
        return None
    # The suffix in lower case: the router may write only "*.lakeline-by-name.csv*" (IAM matches case).
    copy = f"{name[: -len(suffix)]}{MARKER}{suffix}"
    return f"{folder}/{copy}" if folder else copy


def copy_version(arrival: Arrival) -> str:
    """What a copy records of the file version it was made from: the S3 sequencer (ordered), else a
    digest of the arrival (S3 metadata is ASCII)."""
    return arrival.sequencer or hashlib.sha256(arrival.identity.encode()).hexdigest()


def newer_version(version: str, than: str) -> bool:
    """Whether ``version`` is a later version of the same key than ``than``. S3 sequencers order the
    events of one key once the shorter is right-padded with zeros; anything else is taken as newer
    (a local flow writes its copies one at a time)."""
    if not (_HEX.fullmatch(version) and _HEX.fullmatch(than)):
        return version != than
    width = max(len(version), len(than))
    return version.upper().ljust(width, "0") > than.upper().ljust(width, "0")


def _dialect(contract: RawContract) -> dict[str, object]:
    if contract.quote:
        return {"delimiter": contract.delimiter, "quotechar": contract.quote, "doublequote": True}
    return {"delimiter": contract.delimiter, "quoting": csv.QUOTE_NONE, "quotechar": None}


def in_table_order(contract: RawContract, raw: RawFile) -> IO[bytes]:
    """``raw`` (already checked against ``contract``) with its columns in the table's order, then the
    columns it adds in its own order: a readable binary stream at its start."""
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - returned to the caller
    compressed = raw.name.lower().endswith(".gz")
    with raw.open() as binary:
        source = cast(IO[bytes], gzip.GzipFile(fileobj=binary)) if compressed else binary
        text = io.TextIOWrapper(source, encoding=contract.reading_encoding, errors="strict", newline="")
        reader = csv.reader(text, strict=True, **_dialect(contract))  # type: ignore[arg-type]
        header = next(reader)
        names = [name.strip().lower() for name in header]
        table = [column.name.lower() for column in contract.columns]
        order = [names.index(name) for name in table] + [i for i, name in enumerate(names) if name not in table]
        target = cast(IO[bytes], gzip.GzipFile(fileobj=spool, mode="wb", mtime=0)) if compressed else spool
        out = io.TextIOWrapper(target, encoding=contract.encoding, errors="strict", newline="")
        # RFC 4180's CRLF: the writer then quotes a value holding a bare CR as well as one holding LF
        # (before Python 3.13 it quotes only the characters of its line terminator).
        writer = csv.writer(out, lineterminator="\r\n", **_dialect(contract))  # type: ignore[arg-type]
        writer.writerow([header[i].strip() for i in order])
        for record in reader:
            if record:
                writer.writerow([record[i] for i in order])
        out.flush()
        out.detach()
        if compressed:
            target.close()  # writes the gzip trailer; the spool stays open
    spool.seek(0)
    return cast(IO[bytes], spool)
