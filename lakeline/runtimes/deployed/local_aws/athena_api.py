"""moto's Athena API, made to run its queries on the local Athena (``lakeline.runtimes.deployed.local_aws.athena``).

``install_endpoint`` patches moto once: ``StartQueryExecution`` answers at once (QUEUED) and gives the query to the
endpoint installed (its one worker runs it), ``GetQueryExecution`` and ``GetQueryResults`` answer from the
query's ``QueryOutcome`` as Athena does (``StateChangeReason``, ``AthenaError``, statistics, result pages), a
``ClientRequestToken`` used again gets the query it started, and a query string over Athena's quota is refused.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from lakeline.runtimes.deployed.local_aws.athena_answers import column_info, statement_type
from lakeline.runtimes.deployed.local_aws.athena_caller import caller_of
from lakeline.runtimes.deployed.local_aws.executions import query_ended

MAX_QUERY_BYTES = 262_144  # Athena's quota on a query string (its StartQueryExecution refuses a longer one)

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"
FINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})


@dataclass
class QueryOutcome:
    """What a finished query left for ``GetQueryExecution`` and ``GetQueryResults``."""

    statement_type: str = "DML"
    reason: str = ""
    columns: list[tuple[str, str]] = field(default_factory=list)  # (name, Athena type)
    rows: list[list[str | None]] = field(default_factory=list)  # header row first for a query
    queued_ms: int = 0
    engine_ms: int = 0


_execution_class: Any = None


def local_execution_class() -> Any:
    """moto's ``Execution`` with a status of its own: moto's advances to SUCCEEDED whenever it is read."""
    global _execution_class
    if _execution_class is None:
        from moto.athena.models import Execution

        class LocalExecution(Execution):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.local_status = QUEUED
                self.outcome = QueryOutcome()
                self.submitted = time.time()

            @property
            def status(self) -> str:
                return str(self.local_status)

            @status.setter
            def status(self, value: str) -> None:
                # An end state is final: StopQueryExecution cancels only what has not finished, and a
                # cancelled query that was running already does not become SUCCEEDED when it ends.
                if self.local_status in FINAL:
                    return
                self.local_status = value
                if value == CANCELLED and not self.outcome.reason:
                    self.outcome.reason = "Query was cancelled by the user"
                if value in FINAL:
                    self.end_time = time.time()
                    query_ended(self.id)  # the Athena task waiting on it asks now

        _execution_class = LocalExecution
    return _execution_class


class Endpoint(Protocol):
    """What the patched API needs of the local Athena: its query tokens, and a worker to give queries to."""

    tokens_lock: threading.Lock
    tokens: dict[tuple[str, str, str], tuple[str, str]]

    def submit(self, backend: Any, execution: Any) -> None: ...

    def stop(self) -> None: ...


E = TypeVar("E", bound=Endpoint)
_installed = threading.Lock()
_callers = threading.local()  # who signs the StartQueryExecution being handled in this thread
_patched = False
current: Endpoint | None = None
"""The endpoint moto's Athena runs queries on (``None``: moto's own behaviour)."""


def install_endpoint(make: Callable[[], E]) -> E:
    """Patch moto (once), stop the endpoint installed before, and install the one ``make`` makes."""
    global _patched, current
    with _installed:
        if not _patched:
            _patch_moto()
            _patched = True
        if current is not None:
            current.stop()
        endpoint = make()
        current = endpoint
        return endpoint


def uninstall_endpoint(endpoint: Endpoint) -> None:
    """moto's own Athena answers again, unless another endpoint was installed since ``endpoint``."""
    global current
    if current is endpoint:
        current = None


def _patch_moto() -> None:
    from moto.athena.models import AthenaBackend
    from moto.athena.responses import AthenaResponse

    original_start = AthenaBackend.start_query_execution
    original_response_start = AthenaResponse.start_query_execution

    def response_start_query_execution(self: Any) -> Any:
        _callers.current = caller_of(self.headers)  # the backend's call below runs in this thread
        _callers.token = self._get_param("ClientRequestToken")
        try:
            return original_response_start(self)
        finally:
            _callers.current = _callers.token = None

    original_get = AthenaBackend.get_query_execution
    original_response = AthenaResponse.get_query_execution
    original_results = AthenaResponse.get_query_results

    def start_query_execution(
        self: Any,
        query: str,
        context: Any,
        config: Any,
        workgroup: str,
        execution_parameters: list[str] | None,
    ) -> str:
        if len(query.encode()) > MAX_QUERY_BYTES:
            # Athena refuses it at once (its quota, which botocore's model states but does not check).
            from moto.core.exceptions import JsonRESTError

            raise JsonRESTError(
                "InvalidRequestException",
                f"the query string is {len(query.encode())} bytes; Athena takes at most {MAX_QUERY_BYTES}",
            )
        local = current
        if local is None:
            return str(original_start(self, query, context, config, workgroup, execution_parameters))
        token = getattr(_callers, "token", None)
        request = json.dumps([query, context, config, workgroup, execution_parameters], sort_keys=True, default=str)
        with local.tokens_lock:  # two starts with one token at once make one query, as in Athena
            if token:
                started = local.tokens.get((self.account_id, self.region_name, token))
                if started is not None:
                    # Athena's idempotency: the same token and request are the query already started.
                    known, query_id = started
                    if known != request:
                        from moto.core.exceptions import JsonRESTError

                        raise JsonRESTError("InvalidRequestException", "Idempotent parameters do not match")
                    return query_id
            group = self.work_groups.get(workgroup or "primary")
            execution = local_execution_class()(query, context or {}, dict(config or {}), group, execution_parameters)
            execution.config = _result_configuration(config, group, execution.id, query)
            execution.caller = getattr(_callers, "current", None)
            self.executions[execution.id] = execution
            if token:
                local.tokens[(self.account_id, self.region_name, token)] = (request, str(execution.id))
        local.submit(self, execution)
        return str(execution.id)

    def get_query_execution(self: Any, exec_id: str) -> Any:
        execution = self.executions[exec_id]
        if isinstance(execution, local_execution_class()):
            return execution
        return original_get(self, exec_id)

    def get_query_results(self: Any, exec_id: str) -> Any:
        from moto.athena.exceptions import QueryStillRunning
        from moto.athena.models import QueryResults

        execution = self.executions.get(exec_id)
        if not isinstance(execution, local_execution_class()):
            return original_backend_results(self, exec_id)
        if execution.status != SUCCEEDED:
            raise QueryStillRunning(current_status=execution.status)
        outcome = execution.outcome
        rows = [{"Data": [{} if value is None else {"VarCharValue": value} for value in row]} for row in outcome.rows]
        return QueryResults(rows=rows, column_info=[column_info(name, kind) for name, kind in outcome.columns])

    def response_get_query_execution(self: Any) -> Any:
        execution = self.athena_backend.executions.get(self._get_param("QueryExecutionId"))
        if not isinstance(execution, local_execution_class()):
            return original_response(self)
        return json.dumps({"QueryExecution": _described(execution)})

    def response_get_query_results(self: Any) -> Any:
        exec_id = self._get_param("QueryExecutionId")
        if not isinstance(self.athena_backend.executions.get(exec_id), local_execution_class()):
            return original_results(self)
        result = self.athena_backend.get_query_results(exec_id).to_dict()
        rows = result["ResultSet"]["Rows"]
        start = int(self._get_param("NextToken") or 0)
        size = int(self._get_param("MaxResults") or 1000)
        result["ResultSet"]["Rows"] = rows[start : start + size]
        if start + size < len(rows):
            result["NextToken"] = str(start + size)
        result["UpdateCount"] = 0
        return json.dumps(result)

    original_backend_results = AthenaBackend.get_query_results
    setattr(AthenaBackend, "start_query_execution", start_query_execution)  # noqa: B010
    setattr(AthenaBackend, "get_query_execution", get_query_execution)  # noqa: B010
    setattr(AthenaBackend, "get_query_results", get_query_results)  # noqa: B010
    # moto's response leaves out StateChangeReason, AthenaError and real statistics.
    setattr(AthenaResponse, "get_query_execution", response_get_query_execution)  # noqa: B010
    setattr(AthenaResponse, "get_query_results", response_get_query_results)  # noqa: B010
    setattr(AthenaResponse, "start_query_execution", response_start_query_execution)  # noqa: B010


def _result_configuration(config: Any, workgroup: Any, exec_id: str, query: str) -> dict[str, Any]:
    """Athena's: the caller's output location, else the workgroup's; the file is ``<id>.csv`` for a
    query and ``<id>.txt`` for DDL."""
    configured = dict(config or {})
    output = configured.get("OutputLocation")
    if not output and workgroup is not None:
        output = (workgroup.configuration or {}).get("ResultConfiguration", {}).get("OutputLocation")
    if output:
        suffix = "txt" if statement_type(query) != "DML" else "csv"
        configured["OutputLocation"] = f"{output.rstrip('/')}/{exec_id}.{suffix}"
    return configured


def _described(execution: Any) -> dict[str, Any]:
    outcome: QueryOutcome = execution.outcome
    status: dict[str, Any] = {"State": execution.status, "SubmissionDateTime": execution.start_time}
    if execution.status in FINAL:
        status["CompletionDateTime"] = execution.end_time
    if outcome.reason:
        status["StateChangeReason"] = outcome.reason
        if execution.status == FAILED:
            status["AthenaError"] = {"ErrorCategory": 2, "Retryable": False, "ErrorMessage": outcome.reason}
    total = int(((execution.end_time if execution.status in FINAL else time.time()) - execution.submitted) * 1000)
    described: dict[str, Any] = {
        "QueryExecutionId": execution.id,
        "Query": execution.query,
        "StatementType": statement_type(execution.query),
        "ResultConfiguration": execution.config,
        "QueryExecutionContext": execution.context,
        "Status": status,
        "Statistics": {
            "EngineExecutionTimeInMillis": outcome.engine_ms,
            "DataScannedInBytes": 0,
            "TotalExecutionTimeInMillis": max(total, 0),
            "QueryQueueTimeInMillis": outcome.queued_ms,
            "ServicePreProcessingTimeInMillis": 0,
            "QueryPlanningTimeInMillis": 0,
            "ServiceProcessingTimeInMillis": 0,
            "ResultReuseInformation": {"ReusedPreviousResult": False},
        },
        "WorkGroup": execution.workgroup.name if execution.workgroup else "primary",
        "EngineVersion": {"SelectedEngineVersion": "AUTO", "EffectiveEngineVersion": "Athena engine version 3"},
    }
    if execution.execution_parameters is not None:
        described["ExecutionParameters"] = execution.execution_parameters
    return described
