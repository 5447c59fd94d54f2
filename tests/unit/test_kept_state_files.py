"""The kept state of a local deployment, as files (``lakeline.runtimes.deployed.local_aws.kept_state``): a ``keep`` that
stopped between its two renames loses nothing, and parked messages are told apart by command (#20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakeline.runtimes.deployed.local_aws import kept_state
from lakeline.runtimes.deployed.run import _parked_since


def write_manifest(
    folder: Path, uploads: dict[str, str], buckets: dict[str, list[dict[str, str]]] | None = None
) -> None:
    folder.mkdir(parents=True)
    manifest = {
        "format": kept_state.KEPT_STATE_FORMAT,
        "stacks": ["lakeline-dev-storage"],
        "outputs": {},
        "extra": {"uploads": uploads},
        "buckets": buckets or {},
        "tables": {},
        "catalog": [],
        "queues": {},
    }
    (folder / kept_state.MANIFEST).write_text(json.dumps(manifest))


def test_a_keep_stopped_between_its_renames_leaves_the_state_before(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    write_manifest(tmp_path / "state.old", {"a.csv": "1"})  # set aside; the new one never put in place
    assert kept_state.exists(folder)
    assert kept_state.kept_extra(folder) == {"uploads": {"a.csv": "1"}}
    # Reading moves nothing (a keep may be running); the next writer puts the state back in place.
    assert (tmp_path / "state.old" / kept_state.MANIFEST).is_file() and not folder.exists()
    kept_state.recover(folder)
    assert (folder / kept_state.MANIFEST).is_file() and not (tmp_path / "state.old").exists()


def test_a_half_written_new_state_is_not_taken_for_the_kept_one(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    write_manifest(folder, {"a.csv": "1"})
    (tmp_path / "state.new").mkdir()  # a keep that stopped while writing
    assert kept_state.kept_extra(folder) == {"uploads": {"a.csv": "1"}}


def test_nothing_kept_is_nothing(tmp_path: Path) -> None:
    assert not kept_state.exists(tmp_path / "state")
    assert kept_state.kept_extra(tmp_path / "state") == {}
    assert kept_state.kept_messages(tmp_path / "state") == ({}, {})


def test_what_a_command_parked_is_what_is_parked_beyond_what_was_before() -> None:
    before = {"StageA": ["bad.csv: header", "bad.csv: header"], "StageB": ["x"]}
    now = {"StageA": ["bad.csv: header", "bad.csv: header", "bad.csv: header", "other.csv: y"], "StageB": ["x"]}
    assert _parked_since(now, before) == {"StageA": ["bad.csv: header", "other.csv: y"]}
    assert _parked_since(before, before) == {}
    assert _parked_since({"Lineage": ["z"]}, {}) == {"Lineage": ["z"]}


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda manifest: manifest.write_text(manifest.read_text()[:40]), "cannot be read"),
        (lambda manifest: manifest.write_bytes(b"\x00\xff"), "cannot be read"),
        (lambda manifest: manifest.write_text('{"format": 1}'), "stacks is missing"),
        (lambda manifest: manifest.write_text("[]"), "the whole file is missing"),
        (lambda manifest: (manifest.parent / "objects" / "ab12").unlink(), "lacks the content of s3://raw/a.csv"),
    ],
)
def test_a_damaged_kept_state_is_refused_whole_saying_what_to_do(tmp_path: Path, damage: object, words: str) -> None:
    """#37: before, a manifest of another shape stopped ``lakeline run`` with a KeyError traceback after the
    stand-up, and ``status`` reported it as no deployment kept at all."""
    folder = tmp_path / "state"
    write_manifest(folder, {}, {"raw": [{"key": "a.csv", "sha256": "ab12"}]})
    (folder / "objects").mkdir()
    (folder / "objects" / "ab12").write_bytes(b"store,amount\n")
    kept_state.check(folder)  # whole
    damage(folder / kept_state.MANIFEST)  # type: ignore[operator]
    with pytest.raises(kept_state.KeptStateError, match="move it aside and run again") as refused:
        kept_state.check(folder)
    assert words in str(refused.value)


def test_a_kept_object_is_read_by_its_location_from_the_folder_alone(tmp_path: Path) -> None:
    """What ``status`` reads of a kept deployment's buckets (a published version's quality report, #41)."""
    folder = tmp_path / "state"
    entry = {"key": "eng/t/quality.json", "sha256": "abc", "content_type": "", "metadata": {}}
    write_manifest(folder, {}, {"stage": [entry]})  # type: ignore[list-item]
    (folder / "objects").mkdir()
    (folder / "objects" / "abc").write_text('{"table": "t"}')
    read = kept_state.kept_object_reader(folder)
    assert read("s3://stage/eng/t/quality.json") == '{"table": "t"}'
    assert read("s3://stage/eng/u/quality.json") is None
    assert read("s3://other/eng/t/quality.json") is None
    assert kept_state.kept_object_reader(tmp_path / "nothing")("s3://stage/eng/t/quality.json") is None
