"""The end of a stage run, in the order it must happen: after the publish (``complete_stage_a``,
``complete_stage_b``) or after a failed step (``fail_stage_a``, ``fail_stage_b``), given the run's
clients (``stage_end.runtime``). The post-update and failure functions parse their event and call one."""
