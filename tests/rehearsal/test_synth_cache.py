"""The local deployment's synth is made once per digest of what it depends on, then copied (#36)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from lakeline.runtimes.deployed.local_aws import system
from lakeline.runtimes.deployed.local_aws.system import synth_digest, synthesize_cached


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
    assert [path.name for path in cache.iterdir() if path.is_dir()] == [synth_digest(context)]  # no staging left
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


def test_a_synth_in_progress_is_never_cleaned_up_by_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two commands (or test workers) sharing the cache: the second one's clean-up, which keeps the most
    recently used assemblies only, must not delete the assembly the first one is still synthesizing."""
    monkeypatch.setattr(system, "SYNTHS_KEPT", 1)
    inside, go_on = threading.Event(), threading.Event()

    def slow_synth(outdir: Path, context: dict[str, object]) -> Path:
        if context["environment"] == "first":
            inside.set()
            go_on.wait(timeout=30)
        (outdir / "manifest.json").write_text(json.dumps(context))
        return outdir

    monkeypatch.setattr(system, "synthesize", slow_synth)
    cache = tmp_path / "cache"
    results: dict[str, Path | BaseException] = {}

    def synth(name: str) -> None:
        try:
            results[name] = synthesize_cached(tmp_path / name / "cdk.out", {"environment": name}, cache=cache)
        except BaseException as error:  # reported by the assertion below
            results[name] = error

    first = threading.Thread(target=synth, args=("first",))
    first.start()
    assert inside.wait(timeout=30)
    second = threading.Thread(target=synth, args=("second",))
    second.start()
    second.join(timeout=2)  # the gate: the second command runs while the first one is synthesizing
    go_on.set()
    first.join(timeout=30)
    second.join(timeout=30)
    for name in ("first", "second"):
        made = results[name]
        assert isinstance(made, Path), made
        assert json.loads((made / "manifest.json").read_text()) == {"environment": name}
