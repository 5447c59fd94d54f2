"""Each stage's run order, stated once (#38): the tasks of a stage's state machine in the order they run, each
named as ``$.failed_step`` names it when it fails (what the stage's failure function is told).

A run is the engine's writes (its own steps, which differ by engine), then the quality checks of the new version,
the partition commit and the catalog swap (only when the run wrote), then the post-update; a failed step goes to
the failure function, told which.
The CDK construct that builds the state machines (``stacks.constructs.stage``) and the embedded runtime
(``lakeline.runtimes.embedded.event_flow``) both read it; ``tests/infrastructure/test_run_order.py`` walks the
synthesized state machines and ``tests/reliability/test_embedded_catch.py`` the embedded runtime against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

FailedStep = Literal[
    "reconcile", "register", "type_check", "ctas", "steps", "spark", "quality", "commit", "publish", "post_update"
]
"""The step of a stage's state machine that failed (``$.failed_step``, set by its Catch): the engine's writes
(stage A's ``reconcile``, ``register``, ``type_check``, ``ctas`` on Athena; stage B's ``reconcile``, ``steps`` on
Athena; ``spark``, the Glue job, for either stage), then both stages' ``quality``, ``commit``, ``publish`` and
``post_update``."""

StepKind = Literal["writes", "quality", "commit", "publish", "post_update"]
"""What a step is: one of the engine's writes (into the run's prefix, not committed yet), the quality checks of
what the commit would publish (#41; a ``block`` rule that fails stops the run before it), the partition commit
(the prefix becomes the partition's version), the catalog swap to it, or the post-update (the run's end)."""

EngineName = Literal["athena", "spark"]

PUBLISHING: frozenset[StepKind] = frozenset({"quality", "commit", "publish"})
"""The kinds of step that run only when the engine wrote (a run with nothing new goes from its writes to its
post-update): the ones that check the run's prefix and make it the partition's published version."""


@dataclass(frozen=True)
class RunStep:
    name: FailedStep
    kind: StepKind


AFTER_WRITES: tuple[RunStep, ...] = (
    RunStep("quality", "quality"),
    RunStep("commit", "commit"),
    RunStep("publish", "publish"),
    RunStep("post_update", "post_update"),
)
"""What follows the engine's writes, for every stage and engine."""


@dataclass(frozen=True)
class RunOrder:
    """One stage's order: the engine's writes (``writes``, by engine), then ``AFTER_WRITES``."""

    stage: Literal["A", "B"]
    writes: Mapping[EngineName, tuple[FailedStep, ...]]

    def steps(self, engine: EngineName) -> tuple[RunStep, ...]:
        """The stage's steps on ``engine``, in the order they run."""
        return (*(RunStep(name, "writes") for name in self.writes[engine]), *AFTER_WRITES)

    @property
    def failed_steps(self) -> frozenset[FailedStep]:
        """Every name a failure of this stage's runs may give, on any engine (what its failure function takes)."""
        return frozenset(step.name for engine in self.writes for step in self.steps(engine))

    def write_step(self, engine: EngineName, name: FailedStep) -> FailedStep:
        """``name``, checked to be one of ``engine``'s writes in this stage (the state machine's marker of it)."""
        if name not in self.writes[engine]:
            raise ValueError(f"{name!r} is not one of stage {self.stage}'s writes on {engine}: {self.writes[engine]}")
        return name


STAGE_A = RunOrder(
    "A",
    {
        # Point the partition at its committed version, register the raw partition, check the text files' types,
        # CTAS into the run's prefix (from the table over its manifest, when it has one), drop the temp tables.
        "athena": ("reconcile", "register", "type_check", "ctas"),
        "spark": ("spark",),  # all of it in one Glue job run
    },
)
STAGE_B = RunOrder(
    "B",
    {
        "athena": ("reconcile", "steps"),  # the steps in order, then the DROP of the temp table
        "spark": ("spark",),
    },
)

EMBEDDED_ENGINE: EngineName = "athena"
"""The embedded runtime runs a stage's writes as one call on embedded Spark (``execute_stage_a``,
``execute_stage_b``: the statements the Athena engine's tasks run) and names a failed one as the Athena engine's
task (``lakeline.runtimes.embedded.event_flow``)."""

AFTER_PUBLISH: frozenset[FailedStep] = frozenset(step.name for step in AFTER_WRITES if step.kind in PUBLISHING)
"""The failed steps that come after every one of the engine's writes ran: the run failed, its steps completed
(a failed quality check among them: the writes completed, their version was refused)."""


@dataclass(frozen=True)
class StepFailed:
    """The step a run stopped at, named as its failure function is told (``$.failed_step``), and its error."""

    step: RunStep
    error: Exception


Entering = Callable[[FailedStep], object]
"""Told each of the engine's write steps as it begins (``execute_stage_a``'s and ``execute_stage_b``'s ``entering``)."""


def run_in_order(
    order: RunOrder,
    run: Mapping[StepKind, Callable[[], object]],
    *,
    writes: Callable[[Entering], object],
    wrote: bool,
    written: Callable[[], object],
    engine: EngineName = EMBEDDED_ENGINE,
) -> StepFailed | None:
    """Run a stage's steps in ``order`` on ``engine``, as its state machine does: the engine's writes (``writes``,
    one call for all of them, which tells its ``Entering`` each step as it begins: a failure is named by the last,
    the first of them if none began), then, only if the run ``wrote``, the steps that publish them, then
    ``written`` (the state machine's ``Written`` state, where a run with nothing new joins), then the post-update
    (``run``'s call for each of those kinds of step). The first step that raises ends the run: returned, with its
    error (``written`` is not called then)."""
    names = order.writes[engine]
    entered: list[FailedStep] = []
    for index, step in enumerate(order.steps(engine)):
        if step.kind == "writes" and index > 0:
            continue  # the first of the writes ran them all
        if step.kind in PUBLISHING and not wrote:
            continue
        if step.kind == "post_update":
            written()
        try:
            if step.kind == "writes":
                writes(entered.append)
            else:
                run[step.kind]()
        except Exception as error:
            if step.kind != "writes":
                return StepFailed(step, error)
            name = entered[-1] if entered else names[0]
            if name not in names:
                raise ValueError(f"stage {order.stage}'s writes on {engine} have no step {name!r}: {names}") from error
            return StepFailed(RunStep(name, "writes"), error)
    return None
