"""The deployed path needs Node ≥ 20.6 and ``npm ci``'s ASL interpreter: a command says so at once, before it
synthesizes and deploys, instead of every execution failing later (#20)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from lakeline.runtimes.deployed.local_aws import executions
from lakeline.runtimes.deployed.local_aws.executions import InterpreterMissing, check_interpreter


def fake_node(folder: Path, version: str) -> str:
    path = folder / f"node-{version}"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_this_machines_node_and_interpreter_pass() -> None:
    check_interpreter()


@pytest.mark.parametrize("version", ["v18.19.0", "v20.5.1"])
def test_a_node_older_than_20_6_is_named_with_its_version(tmp_path: Path, version: str) -> None:
    with pytest.raises(InterpreterMissing, match=rf"Node.js 20.6 or newer; .* is {version}"):
        check_interpreter(fake_node(tmp_path, version))


def test_no_node_at_all_says_to_install_it() -> None:
    with pytest.raises(InterpreterMissing, match=r"could not be run.*install Node 20.6 or newer"):
        check_interpreter("/nonexistent/node")


def test_without_npm_ci_it_says_to_run_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executions, "EXECUTION_RUNNER", tmp_path / "a" / "b" / "c" / "run_execution.mjs")
    with pytest.raises(InterpreterMissing, match=r"run `npm ci`"):
        check_interpreter(fake_node(tmp_path, "v22.1.0"))
