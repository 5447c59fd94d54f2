"""Partition commits: one protocol for every write of a table partition (stage A and stage B, cloud and
local), kept in DynamoDB (the pipeline-state table) with conditional writes.

One item per partition, key ``commit#<db>.<table>/<col=value/...>``, holds:

- ``version``, ``published``, ``files``: the published version of the partition (its run prefix), which
  only a run holding the lease moves on, one version at a time (compare-and-swap on ``version``);
- ``lease_owner``/``lease_expires``/``lease_location``/``lease_seq``: the one run that may write the
  partition now, until its lease expires (so a crashed run cannot block the partition for ever);
- ``pending`` (a set) and ``arrival_seq``: arrivals waiting for a run. An arrival while a run holds the
  lease is added here and the run's ``finish`` hands the lease to one follow-up run that takes them
  all, so a burst of arrivals costs at most two runs; ``pending_bytes`` counts what they hold, which is
  capped (``MAX_PENDING_BYTES``: past it an arrival waits in its queue instead);
- ``applied_list``: where the ids of the arrivals whose rows are in the published version are kept (stage A
  files loaded, stage B messages applied; ``lakeline.commits.applied``), swapped in the same conditional
  update as the publish, so an arrival is applied exactly once whatever is redelivered or retried (an item
  from before the lists holds its ids in ``applied`` until its next commit moves them);
- ``retired``: ``<epoch>|<location>`` of superseded versions, deleted only after a grace period and
  only when neither the published version nor a run in flight references them;
- ``contributions``: ``<key>|<file name>`` for the published version of a stage B ``append`` target:
  which of its files hold which contribution's rows, so that a contribution applied again (a new
  version of the partition that triggered it) replaces its own files instead of adding to them.

The commit (DynamoDB) comes before the catalog is pointed at the new prefix, and every run first points
the catalog at the committed version: a crash between the two is repaired by the next run, and the
partition a reader sees never moves backwards.
"""

from lakeline.commits.follow_up import FOLLOW_UP, finish_run, follow_up_body, parse_follow_up, send_follow_up
from lakeline.commits.keys import (
    COMMIT_PREFIX,
    commit_key,
    commit_partition,
    commit_table_root,
    contribution_entry,
    contribution_files,
    parse_retired,
    retired_entry,
)
from lakeline.commits.state import Finished, Lease, LeaseLost, PartitionFull, PartitionState, TakenBatch
from lakeline.commits.store import DEFAULT_LEASE_SECONDS, MAX_BEGIN_ATTEMPTS, MAX_PENDING_BYTES, PartitionCommits
from lakeline.commits.sweep import DEFAULT_GRACE_SECONDS, referenced, sweep_partition, with_manifests

__all__ = [
    "COMMIT_PREFIX",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_LEASE_SECONDS",
    "FOLLOW_UP",
    "MAX_BEGIN_ATTEMPTS",
    "MAX_PENDING_BYTES",
    "Finished",
    "Lease",
    "LeaseLost",
    "PartitionCommits",
    "PartitionFull",
    "PartitionState",
    "TakenBatch",
    "commit_key",
    "commit_partition",
    "commit_table_root",
    "contribution_entry",
    "contribution_files",
    "finish_run",
    "follow_up_body",
    "parse_follow_up",
    "parse_retired",
    "referenced",
    "retired_entry",
    "send_follow_up",
    "sweep_partition",
    "with_manifests",
]
