"""The door (``stage_a.contract``) and the by-name copy (``stage_a.by_name``) on large files: seconds and
peak memory for a CSV and a JSON-lines file of ``--megabytes`` (default 100), against the baseline of the
same process checking the whole file in Python (the door before #39, which the router ran within a
60 s, 512 MB Lambda for a batch of up to ten files).

Rows: ``door (bounded)`` reads the header and the first ``DOOR_CHECK_CHARACTERS`` of text;
``door (whole file)`` the baseline; ``by-name copy (streamed)`` reads the copy of a file in another
column order / key spelling to its end, as ``S3RawFiles.write_copy`` uploads it a part at a time (its
peak is what the router holds; the baseline's copy was spooled whole to memory up to 64 MiB, then to
``/tmp``). Peak memory is Python's allocations (``tracemalloc``), measured in a second pass so the
seconds are not slowed by tracing.

    .venv/bin/python -m benchmarks.door [--megabytes 100]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import stage_a.by_name as by_name
import stage_a.contract as contract_module
from lakeline.engines.base import Column
from stage_a.by_name import in_table_order
from stage_a.contract import ColumnsByName, RawContract, check_raw_file
from stage_a.raw_files import COPY_PART_BYTES, LocalRawFile

COLUMNS = (Column("id", "bigint"), Column("store", "string"), Column("amount", "decimal(12,2)"), Column("day", "date"))


def write_csv(path: Path, size: int, *, moved: bool) -> None:
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("store,id,amount,day\n" if moved else "id,store,amount,day\n")
        row = 0
        while out.tell() < size:
            lines = []
            for _ in range(10_000):
                row += 1
                store, amount, day = (
                    f"store-{row % 97}",
                    f"{row % 100_000}.{row % 100:02d}",
                    f"2026-11-{row % 28 + 1:02d}",
                )
                lines.append(f"{store},{row},{amount},{day}\n" if moved else f"{row},{store},{amount},{day}\n")
            out.write("".join(lines))


def write_json(path: Path, size: int, *, respelled: bool) -> None:
    store = "Store" if respelled else "store"
    with path.open("w", encoding="utf-8") as out:
        row = 0
        while out.tell() < size:
            lines = []
            for _ in range(10_000):
                row += 1
                record = {"id": row, store: f"store-{row % 97}", "day": f"2026-11-{row % 28 + 1:02d}"}
                lines.append(json.dumps(record)[:-1] + f', "amount": {row % 100_000}.{row % 100:02d}}}\n')
            out.write("".join(lines))


def door(contract: RawContract, path: Path) -> Callable[[], None]:
    def check() -> None:
        check_raw_file(contract, LocalRawFile(path))

    return check


def copy(contract: RawContract, path: Path) -> Callable[[], None]:
    def stream() -> None:
        with contextlib.suppress(ColumnsByName):  # the door, then the copy, as the router does
            check_raw_file(contract, LocalRawFile(path))
        # The copy itself at any size: the router refuses files over BY_NAME_MAX_BYTES before copying.
        limit, by_name.BY_NAME_MAX_BYTES = by_name.BY_NAME_MAX_BYTES, 1 << 62
        try:
            body = in_table_order(contract, LocalRawFile(path))
        finally:
            by_name.BY_NAME_MAX_BYTES = limit
        with body:
            while body.read(COPY_PART_BYTES):  # what the upload holds: one part at a time
                pass

    return stream


def measured(action: Callable[[], None], limit: int) -> tuple[float, float]:
    """Seconds, then peak MiB of Python allocations, with the door's bound at ``limit``."""
    bound = contract_module.DOOR_CHECK_CHARACTERS
    contract_module.DOOR_CHECK_CHARACTERS = limit
    try:
        started = time.perf_counter()
        action()
        seconds = time.perf_counter() - started
        tracemalloc.start()
        action()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    finally:
        contract_module.DOOR_CHECK_CHARACTERS = bound
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=100)
    size = parser.parse_args().megabytes * 1_000_000
    console = Console()
    table = Table(
        title=f"the door on {size / 1e6:.0f} MB files (bound {contract_module.DOOR_CHECK_CHARACTERS >> 20} MiB)"
    )
    for heading in ("file", "what", "seconds", "peak MiB", "baseline s", "baseline MiB", "time ratio"):
        table.add_column(heading)
    whole = 1 << 62
    with tempfile.TemporaryDirectory() as folder:
        for fmt in ("csv", "json"):
            contract = RawContract("bench.sales", fmt, COLUMNS)
            plain, other = Path(folder, f"plain.{fmt}"), Path(folder, f"other.{fmt}")
            if fmt == "csv":
                write_csv(plain, size, moved=False)
                write_csv(other, size, moved=True)
            else:
                write_json(plain, size, respelled=False)
                write_json(other, size, respelled=True)
            bounded = measured(door(contract, plain), contract_module.DOOR_CHECK_CHARACTERS)
            baseline = measured(door(contract, plain), whole)
            streamed = measured(copy(contract, other), contract_module.DOOR_CHECK_CHARACTERS)
            rows = (("door (bounded)", bounded, baseline), ("by-name copy (streamed)", streamed, None))
            for what, (seconds, peak), base in rows:
                table.add_row(
                    f"{plain.stat().st_size / 1e6:.0f} MB {fmt}",
                    what,
                    f"{seconds:.2f}",
                    f"{peak:.2f}",
                    f"{base[0]:.2f}" if base else "",
                    f"{base[1]:.2f}" if base else "",
                    f"{seconds / base[0]:.3f}" if base else "",
                )
    console.print(table)


if __name__ == "__main__":
    main()
