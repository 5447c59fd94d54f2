"""The partition version query (``athena_queries/lineage/partition_version.sql``) on 100k archived nodes, locally.

Writes an archive of ``--nodes`` lineage nodes with the trace's own code (``harness.versions_archive``: per
arrival a raw file, the stage A run that made a version of an ``orders`` partition and ``--chain`` stage B runs
after it; every partition has ``--versions`` versions), in two layouts of the same lines:

- per root: one object per arrival's root in the day folder, as the trace wrote them before the compaction
  (and as archives written then still hold them);
- compacted: staged by the trace and folded by the compaction (``lakeline.lineage.records.compact``), the
  day's lines in its ``ARCHIVE_BUCKETS`` objects, as the trace and the compaction leave them (the
  compaction's own time is printed too).

Each is registered as the archive table on embedded Spark (``local[2]``, as ``lakeline lineage query`` does) and
the query asks for the newest version of one partition: the first run (Spark plans, lists and opens the files)
and the best of ``--repeat`` after it are printed. Then the same answer from ``lakeline lineage show``'s reader
(``lakeline.lineage.records.versions``, in Python), over the traced layout. The machine's load average is
printed with the figures: on a shared machine they are not the engine's alone.

    .venv/bin/python -m benchmarks.partition_version [--nodes 100000] [--chain 8] [--versions 10] [--repeat 3]

No baseline to divide by: the figure to hold is under a second for the query on 100k nodes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from harness.versions_archive import DAILY, partition_of, write_history
from lakeline.engines.spark import SparkEngine
from lakeline.lineage.records.archive import LocalArchiveStore
from lakeline.lineage.records.archive_table import ARCHIVE_TABLE, DEFAULT_TABLE, LINEAGE_DATABASE
from lakeline.lineage.records.query import VERSION_QUERY, bind_version_query
from lakeline.lineage.records.versions import answer, archive_nodes, partition_versions


def time_query(engine: SparkEngine, folder: Path, table: str, partition: str, repeat: int) -> tuple[float, float, str]:
    ARCHIVE_TABLE.register_local(engine, folder, LINEAGE_DATABASE, table)
    bound = bind_version_query(VERSION_QUERY.read_text(), DAILY, partition, archive_table=table)
    started = time.perf_counter()
    result = engine.execute(bound)
    first = time.perf_counter() - started
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        again = engine.execute(bound)
        best = min(best, time.perf_counter() - started)
        assert again.rows == result.rows and result.rows, "the query found the partition's newest version"
    return first, best, str(result.rows[0][result.columns.index("version")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--chain", type=int, default=8, help="stage B runs after each stage A run")
    parser.add_argument("--versions", type=int, default=10, help="versions of each partition")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    per_root = args.chain + 2
    partitions = max(1, args.nodes // (per_root * args.versions))
    with tempfile.TemporaryDirectory(prefix="lakeline-versions-") as folder:
        root = Path(folder)
        store = LocalArchiveStore(root / "per-root")
        nodes = write_history(store, partitions, args.versions, chain=args.chain, per_root=True)
        started = time.perf_counter()
        compacted = LocalArchiveStore(root / "compacted")
        write_history(compacted, partitions, args.versions, chain=args.chain)  # staged, then compacted
        staged_and_compacted = time.perf_counter() - started
        objects = store.keys()
        size = sum(len(store.get(key) or b"") for key in objects)
        print(
            f"archive: {nodes:,} nodes, {per_root} per arrival, {partitions:,} partitions x {args.versions} versions, "
            f"{size / nodes:.0f} bytes per node; per root: {len(objects):,} objects, compacted: "
            f"{len(compacted.keys())} objects (staging and compaction {staged_and_compacted:.1f} s)"
        )
        partition = partition_of(partitions // 2)
        engine = SparkEngine.local(root / "spark", master="local[2]", shuffle_partitions=4, driver_memory="2g")
        found = []
        try:
            for layout in ("per-root", "compacted"):
                first, best, version = time_query(
                    engine, root / layout, f"{DEFAULT_TABLE}_{layout.replace('-', '_')}", partition, args.repeat
                )
                found.append(version)
                print(
                    f"query on Spark, {layout}: first {first:.2f} s, best of {args.repeat} after it {best:.2f} s "
                    f"(load average {os.getloadavg()[0]:.1f}) -> {DAILY} {partition} {version}"
                )
        finally:
            engine.stop()
        started = time.perf_counter()
        shown = answer(partition_versions(archive_nodes(compacted, DAILY), DAILY, partition), DAILY, partition, None)
        elapsed = time.perf_counter() - started
        assert [shown.version.token] * 2 == found, (shown.version.token, found)
        print(f"lineage show's reader (Python), compacted: {elapsed:.2f} s -> the same version")


if __name__ == "__main__":
    main()
