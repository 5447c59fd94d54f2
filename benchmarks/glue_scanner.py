"""Glue scanner: lineage of a corpus of Glue scripts against the lineage written by hand, and its speed.

The corpus is ``tests/fixtures/glue/corpus``: a connection folder (catalog, Glue Connections, region and
account) whose jobs are small scripts in the shapes of public Glue jobs (AWS Glue blueprints with
optional arguments under ``sys.argv`` tests, JDBC through ``catalog_connection`` and connectors,
DynamoDB, Kinesis and Kafka streaming, relationalize, resolveChoice, Map, a Glue 0.9 Python 2 script).
Each job folder holds ``expected.json``, written by hand before the scanner ran: the datasets read
(``inputs``) and written (``outputs``), and the DIRECT column edges ``[output, column, input, field]``.

Figures:
- exact scripts: inputs and outputs both exactly as expected;
- dataset recall (and precision): over (job, input|output, dataset);
- DIRECT column edges: precision and recall over (job, output, column, input, field);
- speed: scripts analysed per second, in process, best of ``--repeat`` passes;
- the datasets missed and the edges wrong or missed, by job.

    .venv/bin/python -m benchmarks.glue_scanner [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from lakeline.glue_scanner.folder import GlueFolder, load_folder
from lakeline.glue_scanner.lineage import JobResult, analyse_job
from lakeline.lineage.columns.model import TransformationType

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "glue" / "corpus"
EXPECTED = "expected.json"

Dataset = tuple[str, str, str]
"""(job, "input" | "output", dataset)"""
ColumnEdge = tuple[str, str, str, str, str]
"""(job, output, column, input, field)"""


@dataclass
class Lineage:
    datasets: set[Dataset] = field(default_factory=set)
    edges: set[ColumnEdge] = field(default_factory=set)


def expected_lineage(folder: GlueFolder) -> tuple[dict[str, Lineage], int]:
    found: dict[str, Lineage] = {}
    for job in folder.jobs:
        document = json.loads((job.path / EXPECTED).read_text(encoding="utf-8"))
        lineage = Lineage()
        lineage.datasets.update((job.name, "input", d) for d in document["inputs"])
        lineage.datasets.update((job.name, "output", d) for d in document["outputs"])
        lineage.edges.update((job.name, *edge) for edge in document["edges"])
        found[job.name] = lineage
    return found, len(folder.jobs)


def scanned_lineage(result: JobResult) -> Lineage:
    lineage = Lineage()
    analysis = result.analysis
    if analysis is None:
        return lineage
    reads = set(analysis.reads)
    for write in analysis.writes:
        reads.update(write.inputs)
        if write.target is None:
            continue
        lineage.datasets.add((result.name, "output", write.target))
        for column in write.columns:
            for edge in column.dependencies:
                if edge.transformation.type is TransformationType.DIRECT:
                    source = edge.source
                    lineage.edges.add((result.name, write.target, column.name, source.dataset, source.field))
    lineage.datasets.update((result.name, "input", d) for d in reads)
    return lineage


def analyse_corpus(folder: GlueFolder) -> list[JobResult]:
    return [analyse_job(job, folder, {}) for job in folder.jobs]


def _ratio(part: int, whole: int) -> str:
    return f"{part / whole:.2f} ({part} / {whole})" if whole else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="timed passes over the corpus (best one counts)")
    arguments = parser.parse_args()

    folder = load_folder(CORPUS)
    expected, scripts = expected_lineage(folder)
    results = analyse_corpus(folder)
    failed = [r for r in results if r.error]
    scanned = {r.name: scanned_lineage(r) for r in results}

    exact = 0
    datasets_expected = datasets_found = datasets_right = 0
    edges_expected = edges_found = edges_right = 0
    differences: list[str] = []
    for name, wanted in sorted(expected.items()):
        got = scanned[name]
        if got.datasets == wanted.datasets:
            exact += 1
        datasets_expected += len(wanted.datasets)
        datasets_found += len(got.datasets)
        datasets_right += len(wanted.datasets & got.datasets)
        edges_expected += len(wanted.edges)
        edges_found += len(got.edges)
        edges_right += len(wanted.edges & got.edges)
        for _, role, dataset in sorted(wanted.datasets - got.datasets):
            differences.append(f"{name}: {role} {dataset} missed")
        for _, role, dataset in sorted(got.datasets - wanted.datasets):
            differences.append(f"{name}: {role} {dataset} not expected")
        for edge in sorted(wanted.edges - got.edges):
            differences.append(f"{name}: edge {edge[1]}.{edge[2]} <- {edge[3]}.{edge[4]} missed")
        for edge in sorted(got.edges - wanted.edges):
            differences.append(f"{name}: edge {edge[1]}.{edge[2]} <- {edge[3]}.{edge[4]} wrong")

    best = float("inf")
    for _ in range(max(1, arguments.repeat)):
        started = time.perf_counter()
        analyse_corpus(folder)
        best = min(best, time.perf_counter() - started)

    print(f"Glue scanner on {scripts} scripts of {CORPUS.relative_to(CORPUS.parents[3])}")
    print(f"  scripts not analysed:            {len(failed)}")
    print(f"  table-level lineage exact:       {_ratio(exact, scripts)}")
    print(f"  datasets recall:                 {_ratio(datasets_right, datasets_expected)}")
    print(f"  datasets precision:              {_ratio(datasets_right, datasets_found)}")
    print(f"  DIRECT column edges recall:      {_ratio(edges_right, edges_expected)}")
    print(f"  DIRECT column edges precision:   {_ratio(edges_right, edges_found)}")
    print(f"  speed:                           {scripts / best:,.0f} scripts/s (best of {arguments.repeat})")
    python2 = [r.name for r in results if r.analysis is not None and r.analysis.python2]
    print(f"  Python 2 scripts analysed:       {len(python2)} ({', '.join(python2) or 'none'})")
    reported = sum(len(r.unresolved) for r in results)
    print(f"  unresolved parts reported:       {reported}, each with its line")
    for result in failed:
        print(f"  not analysed: {result.name}: {result.error}")
    if differences:
        print("Differences from the hand-written lineage:")
        for line in differences:
            print(f"  {line}")


if __name__ == "__main__":
    main()
