"""The synth cache's digest reads every package the function assets bundle: a change only in one of them must
make a new synth, or the rehearsal runs stale assets."""

from lakeline.runtimes.deployed.local_aws.system import SYNTH_INPUTS
from stacks.constructs.bundling import CODE_PACKAGES


def test_every_bundled_package_is_a_synth_input() -> None:
    assert set(CODE_PACKAGES) <= set(SYNTH_INPUTS)
