"""Emitting RunEvents: always kept in process, and sent through openlineage-python transports if configured.

``MemoryTransport`` is an ordinary openlineage-python ``Transport`` that keeps events in a list; the
pipeline drains it and stores the events with its lineage records. A configured transport (file,
console, http to Marquez, Amazon DataZone, composite, ...) is built by openlineage-python's own factory
and driven through an ``OpenLineageClient``. A transport that fails (Marquez down) is logged and
counted, and never fails the step it describes.

The client adds a ``tags`` run facet (its own version, the config's run tags) and, with job tags
configured, a ``tags`` job facet to the event it is given, in place. So the client gets a copy, and
the copy already carries Lakeline's tags facets: the client fills an existing tags facet and keeps it
(``OpenLineageClient.update_event_tags_facets``), so every facet sent names Lakeline as its producer,
and the events kept (and archived) are the events Lakeline made.

Every event is kept and sent in parts of at most 300,000 bytes (``bound``): the bound is applied to the event
as the client will send it (what the client adds, its tags and any environment facets, is measured on a copy
and taken off the bound), so the parts kept are the parts sent. Each part is sent with its client token in
``datazone.sending_token``, which the DataZone transport puts on its request.
"""

from __future__ import annotations

import copy
import logging
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError
from openlineage.client import OpenLineageClient
from openlineage.client.client import Event
from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.facet_v2 import tags_job, tags_run
from openlineage.client.transport import Transport, get_default_factory
from openlineage.client.transport.transport import Config

from lakeline.errors import ConfigError
from lakeline.lineage.openlineage.bound import (
    EVENT_SIZE_LIMIT,
    EventPart,
    EventTooLarge,
    event_size,
    in_order,
    split_event,
)
from lakeline.lineage.openlineage.config import OpenLineageSettings
from lakeline.lineage.openlineage.datazone import register_datazone_transport, sending_token
from lakeline.lineage.openlineage.events import StepRun, now, run_event
from lakeline.lineage.openlineage.producer import owned

logger = logging.getLogger(__name__)


class MemoryConfig(Config):
    """``MemoryTransport`` takes no settings."""


class MemoryTransport(Transport):
    """Keeps every event (as its parts, ``bound.EventPart``) in process until ``drain``; thread-safe."""

    kind = "lakeline_memory"
    config_class = MemoryConfig

    def __init__(self, config: MemoryConfig | None = None) -> None:
        self.config = config or MemoryConfig()
        self._parts: list[EventPart] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        if isinstance(event, RunEvent):
            self.keep(EventPart(event, event.eventType.value if event.eventType else "OTHER"))

    def keep(self, part: EventPart) -> None:
        with self._lock:
            self._parts.append(part)

    def drain(self) -> list[EventPart]:
        with self._lock:
            parts, self._parts = self._parts, []
        return parts

    def peek(self) -> list[EventPart]:
        with self._lock:
            return list(self._parts)


def build_transport(config: dict[str, Any]) -> Transport:
    """A transport from an openlineage.yml ``transport`` section, by openlineage-python's factory
    (``amazon_datazone_api``: Lakeline's, which sends each event's client token)."""
    register_datazone_transport()
    try:
        return get_default_factory().create(dict(config))
    except (KeyError, TypeError, ValueError, RuntimeError, ImportError, BotoCoreError) as error:  # boto3's: no region
        raise ConfigError(f"cannot build OpenLineage transport {config.get('type')!r}: {error}") from error


class LineageEmitter:
    """Emits the events of pipeline steps; see the module docstring."""

    def __init__(
        self,
        settings: OpenLineageSettings | None = None,
        *,
        transport: Transport | None = None,
        clock: Callable[[], datetime] = now,
    ) -> None:
        self.settings = settings or OpenLineageSettings()
        self.collector = MemoryTransport()
        self.clock = clock
        self.failures = 0
        external = transport
        if external is None and self.settings.transport and not self.settings.disabled:
            external = build_transport(self.settings.transport)
        self._client = (
            OpenLineageClient(transport=external, config=dict(self.settings.client_config))
            if external is not None
            else None
        )

    @property
    def sends_events(self) -> bool:
        """Whether events leave the process (a transport is configured)."""
        return self._client is not None

    def emit(self, event: RunEvent) -> None:
        try:
            parts = in_order(split_event(event, EVENT_SIZE_LIMIT - self._client_adds(event)))
        except EventTooLarge as error:
            # Kept whole (nothing is lost from the records and the archive), not sent: no consumer takes it.
            self.failures += 1
            logger.error("OpenLineage %s event of %s not sent: %s", event.eventType, event.job.name, error)
            self.collector.emit(event)
            return
        for part in parts:
            self.collector.keep(part)
            if self._client is None:
                continue
            try:
                with sending_token(part.client_token):
                    self._client.emit(self._for_client(self._client, part.event))
            except Exception as error:
                self.failures += 1
                # Some transports put the whole event in their message: the first line is enough.
                logger.warning(
                    "OpenLineage transport failed to emit %s event: %s", part.event.eventType, str(error)[:500]
                )

    def _client_adds(self, event: RunEvent) -> int:
        """How many bytes the client adds to an event (its tags, environment, source facets), measured on a
        copy of the event without datasets: they go on the run and the job, the same on every part."""
        if self._client is None:
            return 0
        bare = copy.copy(event)
        bare.inputs, bare.outputs = [], []
        made = self._for_client(self._client, bare)
        for add in (
            self._client.add_environment_facets,
            self._client.update_event_tags_facets,
            self._client.add_source_code_location_facet,
        ):
            made = add(made)  # type: ignore[assignment]
        return max(0, event_size(made) - event_size(bare))

    @staticmethod
    def _for_client(client: OpenLineageClient, event: RunEvent) -> RunEvent:
        """A copy of ``event`` for ``client`` to change, with Lakeline's tags facets for it to fill."""
        sent = copy.deepcopy(event)
        sent.run.facets = dict(sent.run.facets or {})
        # The client always tags the run (openlineage_client_version); the job only with configured tags.
        sent.run.facets.setdefault("tags", tags_run.TagsRunFacet(tags=[]))
        if client.config.tags.job:
            sent.job.facets = dict(sent.job.facets or {})
            sent.job.facets.setdefault("tags", tags_job.TagsJobFacet(tags=[]))
        return owned(sent)

    def drain(self) -> list[RunEvent]:
        """The events emitted so far (and not yet drained), in order, each as its parts."""
        return [part.event for part in self.collector.drain()]

    def drain_parts(self) -> list[EventPart]:
        """``drain``, with what names each part (its event's type and its number) for the archive."""
        return self.collector.drain()

    def emit_state(
        self,
        step: StepRun,
        state: RunState,
        *,
        error: BaseException | str | None = None,
        at: datetime | None = None,
    ) -> RunEvent:
        """One event of ``step``, dated ``at`` (default: now)."""
        stack = None
        if isinstance(error, BaseException):
            stack = "".join(traceback.format_exception(error))
        event = run_event(step, state, at=at or self.clock(), error=error, stack_trace=stack)
        self.emit(event)
        return event

    @contextmanager
    def run(self, step: StepRun) -> Iterator[StepRun]:
        """START now; COMPLETE if the block finishes, FAIL (with the error) if it raises."""
        self.emit_state(step, RunState.START)
        try:
            yield step
        except BaseException as error:
            self.emit_state(step, RunState.FAIL, error=error)
            raise
        self.emit_state(step, RunState.COMPLETE)

    def close(self, timeout: float = -1.0) -> bool:
        return self._client.close(timeout) if self._client is not None else True
