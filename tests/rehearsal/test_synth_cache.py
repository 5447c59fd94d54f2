"""The local deployment's synth is made once per digest of what it depends on, then copied (#36)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakeline.local.rehearsal import system
from lakeline.local.rehearsal.system import synth_digest, synthesize_cached


def test_the_same_inputs_are_synthesized_once_and_copied_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    context = {"environment": "dev", "engine": "athena", "trace_settle_seconds": "0"}
    cache = tmp_path / "cache"
    first = synthesize_cached(tmp_path / "one" / "cdk.out", context, cache=cache)

    def no_second_synth(outdir: Path, context: dict[str, object]) -> Path:
        raise AssertionError("synthesized again with the same inputs")

    monkeypatch.setattr(system, "synthesize", no_second_synth)
    second = synthesize_cached(tmp_path / "two" / "cdk.out", context, cache=cache)
    files = sorted(path.relative_to(first).as_posix() for path in first.rglob("*") if path.is_file())
    assert files == sorted(path.relative_to(second).as_posix() for path in second.rglob("*") if path.is_file())
    templates = [name for name in files if name.endswith(".template.json")]
    assert templates
    for name in templates:
        assert json.loads((second / name).read_text()) == json.loads((first / name).read_text())
    assert [path.name for path in cache.iterdir()] == [synth_digest(context)]  # no staging folder left
    # The copy is the workspace's own: replacing it leaves the cached assembly whole.
    synthesize_cached(tmp_path / "two" / "cdk.out", context, cache=cache)
    assert (cache / synth_digest(context) / "manifest.json").is_file()


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_digest_changes_with_the_context_and_the_files_synth_reads(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "app")
    write(tmp_path, "stacks/pipeline.py", "stack")
    write(tmp_path, "lakeline/engines/athena.py", "engine")
    context = {"environment": "dev"}
    digest = synth_digest(context, tmp_path)
    assert synth_digest(dict(context), tmp_path) == digest
    assert synth_digest({"environment": "prod"}, tmp_path) != digest
    write(tmp_path, "lakeline/engines/__pycache__/athena.cpython-311.pyc", "compiled")
    write(tmp_path, "tests/test_any.py", "not bundled")
    assert synth_digest(context, tmp_path) == digest  # neither is read by synth
    write(tmp_path, "lakeline/engines/athena.py", "engine changed")
    assert synth_digest(context, tmp_path) != digest
    write(tmp_path, "lakeline/engines/athena.py", "engine")
    write(tmp_path, "stage_b/plan.py", "a new bundled file")
    assert synth_digest(context, tmp_path) != digest
