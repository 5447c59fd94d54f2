"""The partition version query (``athena_queries/lineage/partition_version.sql``) on 100k archived nodes, locally.

Writes an archive of ``--nodes`` lineage nodes with the trace's own renderer (``harness.versions_archive``: per
arrival a raw file, the stage A run that made a version of an ``orders`` partition and ``--chain`` stage B runs
after it, one object per arrival's root as the nightly trace writes them; every partition has ``--versions``
versions), registers it as the archive table on embedded Spark (as ``lakeline lineage query`` does), and times
the query for the newest version of one partition: the first run (Spark plans and reads the files' listing
once) and the best of ``--repeat`` after it. Then the same answer from ``lakeline lineage show``'s reader
(``lakeline.lineage.records.versions``: every archive object read and parsed in Python).

    .venv/bin/python -m benchmarks.partition_version [--nodes 100000] [--chain 8] [--versions 10] [--repeat 5]

No baseline to divide by: the figure to hold is under a second for the query on 100k nodes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harness.versions_archive import DAILY, partition_of, write_history
from lakeline.engines.spark import SparkEngine
from lakeline.lineage.records.archive import LocalArchiveStore
from lakeline.lineage.records.archive_table import ARCHIVE_TABLE, DEFAULT_TABLE, LINEAGE_DATABASE
from lakeline.lineage.records.query import VERSION_QUERY, bind_version_query
from lakeline.lineage.records.versions import answer, archive_nodes, partition_versions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--chain", type=int, default=8, help="stage B runs after each stage A run")
    parser.add_argument("--versions", type=int, default=10, help="versions of each partition")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    per_root = args.chain + 2
    partitions = max(1, args.nodes // (per_root * args.versions))
    with tempfile.TemporaryDirectory(prefix="lakeline-versions-") as folder:
        root = Path(folder)
        store = LocalArchiveStore(root / "lineage-archive")
        started = time.perf_counter()
        nodes = write_history(store, partitions, args.versions, chain=args.chain)
        objects = partitions * args.versions
        print(
            f"archive: {nodes:,} nodes in {objects:,} objects ({partitions:,} partitions x {args.versions} versions, "
            f"{per_root} nodes per arrival), written in {time.perf_counter() - started:.1f} s"
        )
        engine = SparkEngine.local(root / "spark", master="local[2]", shuffle_partitions=4, driver_memory="2g")
        try:
            ARCHIVE_TABLE.register_local(engine, root / "lineage-archive", LINEAGE_DATABASE, DEFAULT_TABLE)
            partition = partition_of(partitions // 2)
            sql = bind_version_query(VERSION_QUERY.read_text(), DAILY, partition)
            started = time.perf_counter()
            result = engine.execute(sql)
            first = time.perf_counter() - started
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                again = engine.execute(sql)
                times.append(time.perf_counter() - started)
            assert again.rows == result.rows and result.rows, "the query found the partition's newest version"
            version = result.rows[0][result.columns.index("version")]
            print(
                f"query (Spark, local[2]): first {first:.2f} s, best of {args.repeat} after it {min(times):.2f} s "
                f"-> {DAILY} {partition} {version}, {len(result.rows)} rows"
            )
        finally:
            engine.stop()
        started = time.perf_counter()
        shown = answer(partition_versions(archive_nodes(store), DAILY, partition), DAILY, partition, None)
        elapsed = time.perf_counter() - started
        assert shown.version.token == version, (shown.version.token, version)
        print(f"lineage show's reader (Python, every object parsed): {elapsed:.2f} s -> the same version")


if __name__ == "__main__":
    main()
