"""The deployed state machines' executions, run as Step Functions runs them.

When anything starts an execution on the local endpoint (a router's ``StartExecution``, a redrive, a
test), its state machine's definition, as CloudFormation created it from the synthesized template, is
run by a real Amazon States Language interpreter, ``aws-local-stepfunctions`` (npm, pinned in
package.json; ``run_execution.mjs`` drives it): JSON paths, ``Parameters``/``ItemSelector``,
``ResultSelector``/``ResultPath``, Map, Choice, Retry and Catch are the interpreter's, not Lakeline's.
Each Task state's work is done here by what serves its resource on the endpoint, called through the
endpoint's API as Step Functions calls it:

- ``arn:aws:states:::lambda:invoke``: Lambda ``Invoke`` (the bundled functions, ``functions.py``); the
  result is the integration's ``{"ExecutedVersion", "Payload", "StatusCode"}``; an unhandled function
  error is the task's error, named by the function's ``errorType``.
- ``arn:aws:states:::athena:startQueryExecution.sync``: Athena ``StartQueryExecution`` with the task's
  parameters, then ``GetQueryExecution`` until the query ends; the result is ``{"QueryExecution": …}``;
  a failed or cancelled query is ``States.TaskFailed`` with the query execution as its cause, as in AWS.
- Another service's resource is served by what registered itself in ``TASK_SERVERS`` (the Glue job
  runs: ``glue.py``, while it is installed).
- Any other resource fails the task with ``States.Runtime`` naming it: a rehearsal that cannot do what
  a state asks says so instead of skipping it.

The execution's end (status, output, error, cause) is what ``DescribeExecution`` then reports, and Step
Functions' "Execution Status Change" event of it goes to the default event bus (``events.put_status_change``),
whose rules deliver it. ``StopExecution`` aborts the interpreted execution: the task under way runs to its end
(an Athena query is not cancelled), nothing after it runs, and the execution ends ABORTED.

Step Functions' payload quota holds as in AWS: ``StartExecution`` refuses an input over 256 KiB (UTF-8) with a
``ValidationException`` and starts nothing; a state whose input (after ``Parameters``), task result or output is
over it fails the execution with ``States.DataLimitExceeded``, which no Retry or Catch takes
(``interpreter_fixes.mjs``).

Known differences, on purpose: a retrier's interval is not waited (its attempts still count), state
timeouts are the interpreter's, and the execution history is not recorded (``records`` keeps each
task's input and result for tests instead).
"""

from __future__ import annotations

import collections
import datetime
import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeline.errors import LakelineError
from lakeline.repository import REPOSITORY
from lakeline.runtimes.deployed.local_aws import events, timings
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.holds import Holds
from lakeline.runtimes.deployed.local_aws.iam import Credentials
from lakeline.runtimes.deployed.local_aws.pollers import Pollers

EXECUTION_RUNNER = Path(__file__).with_name("run_execution.mjs")
INTERPRETER = "aws-local-stepfunctions"
NODE_AT_LEAST = (20, 6)  # ``register`` of ``node:module``, which run_execution.mjs loads its fix with
QUERY_POLL_SECONDS = 5.0
"""The longest an Athena task waits between two ``GetQueryExecution`` calls: the local Athena wakes it as
soon as its query ends (``query_ended``), so it asks again when there is news, not 20 times a second
(each call signed, authorized and served in this process, beside the query worker)."""
ENDED_QUERY_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
PAYLOAD_LIMIT = 262_144
"""Step Functions' quota on an execution's, a state's or a task's data: 256 KiB as UTF-8."""


def check_execution_input(execution_input: str | None) -> None:
    """Refuse a ``StartExecution`` input over ``PAYLOAD_LIMIT`` as Step Functions does (moto starts it)."""
    from moto.stepfunctions.exceptions import ValidationException

    if execution_input is not None and len(execution_input.encode()) > PAYLOAD_LIMIT:
        raise ValidationException(
            "1 validation error detected: Value at 'input' failed to satisfy constraint: "
            f"Member must have length less than or equal to {PAYLOAD_LIMIT}"
        )


_queries = threading.Condition()
_watched: set[str] = set()  # the queries Athena tasks wait on
_ended: set[str] = set()  # of those, the ones that have ended


def query_ended(query_id: str) -> None:
    """Wake the Athena task waiting on ``query_id``, if one is (the local Athena calls it as each query ends)."""
    with _queries:
        if query_id in _watched:
            _ended.add(query_id)
            _queries.notify_all()


@contextmanager
def _watching(query_id: str) -> Iterator[None]:
    """While inside, ``query_ended(query_id)`` is kept for ``_wait_for_the_end``: from before the task first
    asks, so an end between its asking and its waiting is not missed."""
    with _queries:
        _watched.add(query_id)
    try:
        yield
    finally:
        with _queries:
            _watched.discard(query_id)
            _ended.discard(query_id)


def _wait_for_the_end(query_id: str) -> None:
    """Until ``query_id`` ends, or ``QUERY_POLL_SECONDS``. Only its own end wakes the task into asking again:
    with a hundred executions waiting, waking all of them at each query's end made each end cost a hundred
    requests to the endpoint (#39)."""
    with _queries:
        _queries.wait_for(lambda: query_id in _ended, QUERY_POLL_SECONDS)


TASK_SERVERS: dict[str, Callable[[TaskHost, Any], Any]] = {}
"""Servers of further task resources, by the resource's part after ``arn:aws:states:::`` (e.g.
``glue:startJobRun.sync``): ``server(task host, the task's parameters)`` returns the task's result or
raises ``TaskFailed``."""


class InterpreterMissing(LakelineError):
    """Node, or the ASL interpreter's package, is not there to run the state machines."""

    def __str__(self) -> str:
        return f"{super().__str__()} (or run the pipeline's code in-process with --embedded)"


def check_interpreter(node: str = "node") -> None:
    """Fail at once, saying what to do, if Node is missing or too old, or ``npm ci`` has not been run."""
    try:
        answer = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as error:
        raise InterpreterMissing(
            f"the state machines run on Node.js ({node!r} could not be run: {error}): install Node "
            f"{'.'.join(map(str, NODE_AT_LEAST))} or newer"
        ) from error
    version = answer.stdout.strip()
    parts = tuple(int(part) for part in version.lstrip("v").split(".")[:2] if part.isdigit())
    if parts < NODE_AT_LEAST:
        raise InterpreterMissing(
            f"the state machines run on Node.js {'.'.join(map(str, NODE_AT_LEAST))} or newer; {node} is {version}"
        )
    if not any((folder / "node_modules" / INTERPRETER).is_dir() for folder in EXECUTION_RUNNER.parents):
        raise InterpreterMissing(
            f"the ASL interpreter ({INTERPRETER}) is not installed: run `npm ci` in the repository "
            f"({REPOSITORY}); `make demo` runs it"
        )


class TaskFailed(LakelineError):
    """A Task state's work failed: ``error`` is the name Retry and Catch match, ``cause`` its detail."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error = error
        self.cause = cause


@dataclass
class TaskRecord:
    state: str
    resource: str
    input: Any
    output: Any = None
    error: str | None = None
    cause: str | None = None


@dataclass
class ExecutionRecord:
    arn: str
    input: Any
    status: str = "RUNNING"
    output: Any = None
    error: str | None = None
    cause: str | None = None
    tasks: list[TaskRecord] = field(default_factory=list)
    started: float = field(default_factory=time.time)  # epoch seconds, as S3's and SQS's times
    ended: float | None = None

    def states(self) -> list[str]:
        """The Task states that ran, in order (a retried one once per attempt)."""
        return [task.state for task in self.tasks]


class ExecutionHost:
    """Runs every execution started on the deployment's endpoint; install it in the moto server's process."""

    def __init__(
        self,
        deployment: Deployment,
        pollers: Pollers,
        *,
        node: str = "node",
        role_credentials: Callable[[str], Credentials] | None = None,
    ) -> None:
        """``pollers``: the functions' (``FunctionHost.pollers``). ``role_credentials(role ARN)``: the credentials
        a machine's tasks act with (IAM enforced); without it, they sign as the deployment's clients do."""
        self.deployment = deployment
        self.node = node
        self.role_credentials = role_credentials
        self.records: dict[str, ExecutionRecord] = {}
        self._interpreter = Interpreter(node)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._uninstall: Callable[[], None] = lambda: None
        self._holds = Holds()
        self.pollers = pollers
        """Lambda's SQS pollers (``FunctionHost.pollers``): the deployment is at rest only when they are."""

    def held(self, state: str) -> AbstractContextManager[threading.Event]:
        """Inside the block, an execution that reaches a Task state named ``state`` waits there (before its task
        runs) until the block ends, as a long query would keep it (a test stops it mid-run); the event yielded
        is set once one waits."""
        return self._holds.held(state)

    def install(self) -> None:
        import moto.stepfunctions.models as sfn_models

        check_interpreter(self.node)

        original = sfn_models.StateMachine.start_execution
        host = self

        def start_execution(machine: Any, region_name: str, account_id: str, *args: Any, **kwargs: Any) -> Any:
            check_execution_input(kwargs.get("execution_input", args[1] if len(args) > 1 else None))
            known = {execution.execution_arn for execution in machine.executions}
            execution = original(machine, region_name, account_id, *args, **kwargs)
            if execution.execution_arn not in known:  # not an idempotent restart of the same name and input
                host._start(machine, execution)
            return execution

        original_stop = sfn_models.StateMachine.stop_execution

        def stop_execution(machine: Any, execution_arn: str) -> Any:
            execution = original_stop(machine, execution_arn)
            host._interpreter.send_abort(execution_arn)
            return execution

        setattr(sfn_models.StateMachine, "start_execution", start_execution)  # noqa: B010
        setattr(sfn_models.StateMachine, "stop_execution", stop_execution)  # noqa: B010

        def uninstall() -> None:
            setattr(sfn_models.StateMachine, "start_execution", original)  # noqa: B010
            setattr(sfn_models.StateMachine, "stop_execution", original_stop)  # noqa: B010
            self._interpreter.stop()

        self._uninstall = uninstall

    def uninstall(self) -> None:
        """Let moto's executions be moto's again (other users of this process), once none runs."""
        self.wait()
        self._uninstall()

    def wait(self, timeout: float = 300.0) -> list[ExecutionRecord]:
        """Wait until the deployment is at rest: no execution runs (including those that running ones
        start), no queue with a function has a message visible, delayed or being delivered (``pollers``);
        the records, in order."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            # Work moves from a batch under way to an execution it starts (or the reverse) before the one it
            # leaves ends: the pollers are asked before and after the executions, with no batch begun between.
            self.pollers.settle(timeout, deadline)
            began = self.pollers.deliveries
            with self._lock:
                running = [thread for thread in self._threads if thread.is_alive()]
            if running:
                if remaining <= 0:
                    raise LakelineError(f"{len(running)} execution(s) still running after {timeout:.0f} s")
                running[0].join(remaining)
                continue
            if not self.pollers.at_rest() or self.pollers.deliveries != began:
                continue
            delayed = self.pollers.next_delayed()
            if delayed is None:
                return list(self.records.values())
            if remaining <= 0:
                raise LakelineError(f"messages sent back to wait in their queues after {timeout:.0f} s")
            time.sleep(min(delayed + 0.05, remaining))  # a record sent back to wait (a full partition, no slot)

    def _start(self, machine: Any, execution: Any) -> None:
        record = ExecutionRecord(execution.execution_arn, json.loads(execution.execution_input or "{}"))
        thread = threading.Thread(
            target=self._run, args=(machine, execution, record), name=f"execution {execution.name}", daemon=True
        )
        with self._lock:
            self.records[record.arn] = record
            self._threads.append(thread)
        thread.start()

    def _run(self, machine: Any, execution: Any, record: ExecutionRecord) -> None:
        context = {
            "Execution": {"Id": execution.execution_arn, "Name": execution.name, "RoleArn": machine.roleArn},
            "StateMachine": {"Id": machine.arn, "Name": machine.name},
        }
        tasks = TaskHost(self.deployment, self.role_credentials(machine.roleArn) if self.role_credentials else None)
        tasks.execution = record.arn
        try:
            with timings.phase("execution", record.arn):
                ended = self._interpret(json.loads(machine.definition), record.input, context, record, tasks)
        except Exception as error:  # the interpreter itself broke: the execution fails, saying so
            ended = {"status": "FAILED", "error": "States.Runtime", "cause": f"rehearsal interpreter: {error}"}
        record.output = ended.get("output")
        record.error = ended.get("error")
        record.cause = ended.get("cause")
        record.status = ended["status"]
        record.ended = time.time()
        execution.stop_date = datetime.datetime.now(datetime.UTC)
        if record.status == "SUCCEEDED":
            execution.output = json.dumps(record.output)
        else:
            execution.error, execution.cause = record.error, record.cause
        execution.status = record.status  # last: whoever sees it ended sees its output or error too
        events.put_status_change(
            self.deployment.account,
            self.deployment.region,
            {
                "executionArn": record.arn,
                "stateMachineArn": machine.arn,
                "name": execution.name,
                "status": record.status,
                "input": execution.execution_input,
                "inputDetails": {"included": True},
                "output": execution.output if record.status == "SUCCEEDED" else None,
                "error": record.error,
                "cause": record.cause,
            },
        )

    def _interpret(
        self, definition: Any, input: Any, context: Any, record: ExecutionRecord, tasks: TaskHost
    ) -> dict[str, Any]:
        started = time.perf_counter()
        key = record.arn
        messages = self._interpreter.start(key, {"definition": definition, "input": input, "context": context})
        try:
            while True:
                message = messages.get()
                if started:  # the machine's first state reached (its first task, or its end)
                    timings.record("interpreter: start to first task", time.perf_counter() - started, key)
                    started = 0.0
                if message is None:
                    raise LakelineError(f"the interpreter stopped without an end: {self._interpreter.stderr_tail()}")
                if "done" in message:
                    return dict(message["done"])
                task = message["task"]
                self._holds.wait_at(task["state"])
                done = TaskRecord(task["state"], task["resource"], task["input"])
                record.tasks.append(done)
                try:
                    done.output = tasks.run(task["resource"], task["input"])
                    reply: dict[str, Any] = {"id": task["id"], "output": done.output}
                except TaskFailed as failure:
                    done.error, done.cause = failure.error, failure.cause
                    reply = {"id": task["id"], "error": failure.error, "cause": failure.cause}
                except Exception as error:  # the task host broke: a task error, which Retry and Catch see
                    done.error, done.cause = "States.TaskFailed", f"rehearsal task host: {error!r}"
                    reply = {"id": task["id"], "error": done.error, "cause": done.cause}
                self._interpreter.send(key, reply)
        finally:
            self._interpreter.forget(key)


class Interpreter:
    """One Node process running ``run_execution.mjs``, which runs every execution started on it side by side
    (Node's start and the interpreter's load paid once, not once per execution): started on the first
    execution, again if it died; each execution's messages are handed to its own queue (``None``: the
    process ended)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()  # the process and the queues (never held while writing to it)
        self._writing = threading.Lock()  # one message at a time on its stdin
        self._queues: dict[str, tuple[subprocess.Popen[str], queue.Queue[dict[str, Any] | None]]] = {}
        self._errors: collections.deque[str] = collections.deque(maxlen=50)

    def start(self, key: str, request: dict[str, Any]) -> queue.Queue[dict[str, Any] | None]:
        """Start execution ``key`` (its definition, input and context); the queue its messages arrive on."""
        messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = self._spawn()
            process = self._process
            self._queues[key] = (process, messages)
        self._write(process, {"start": key, **request})
        return messages

    def send(self, key: str, message: dict[str, Any]) -> None:
        """A task's reply to execution ``key``."""
        with self._lock:
            found = self._queues.get(key)
        if found is not None:
            self._write(found[0], {"execution": key, **message})

    def send_abort(self, key: str) -> None:
        """Stop execution ``key`` (``StopExecution``): it ends ABORTED once the task under way returns."""
        with self._lock:
            found = self._queues.get(key)
        if found is not None:
            self._write(found[0], {"abort": key})

    def forget(self, key: str) -> None:
        with self._lock:
            self._queues.pop(key, None)

    def stderr_tail(self) -> str:
        """The end of what the process wrote to stderr."""
        return "".join(self._errors)[-2000:]

    def stop(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()

    def _write(self, process: subprocess.Popen[str], message: dict[str, Any]) -> None:
        assert process.stdin is not None
        with self._writing:
            try:
                process.stdin.write(json.dumps(message, default=str) + "\n")
                process.stdin.flush()
            except (BrokenPipeError, ValueError):  # it ended: its reader tells every execution waiting on it
                pass

    def _spawn(self) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [self.node, str(EXECUTION_RUNNER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=EXECUTION_RUNNER.parent,
        )
        threading.Thread(target=self._read, args=(process,), name="interpreter-out", daemon=True).start()
        threading.Thread(target=self._drain, args=(process,), name="interpreter-err", daemon=True).start()
        return process

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            message = json.loads(line)
            with self._lock:
                found = self._queues.get(message.pop("execution"))
            if found is not None:
                found[1].put(message)
        process.wait()
        with self._lock:  # the process ended: whoever still waits on it is told
            waiting = [messages for owner, messages in self._queues.values() if owner is process]
        for messages in waiting:
            messages.put(None)

    def _drain(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self._errors.append(line)


class TaskHost:
    """Does the work of a machine's Task states, through the endpoint's API, signed as the machine's role."""

    def __init__(self, deployment: Deployment, credentials: Credentials | None) -> None:
        self.deployment = deployment
        self.credentials = credentials
        self.execution: str | None = None
        """The ARN of the execution whose tasks these are (what ``timings`` files them under)."""
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        """The service's client the tasks of this execution share, signed as the machine's role."""
        return self._client(service)

    def _client(self, service: str) -> Any:
        """One client per service for the execution's tasks (making one costs more than a call)."""
        if service not in self._clients:
            self._clients[service] = self.deployment.client(service, credentials=self.credentials)
        return self._clients[service]

    def run(self, resource: str, parameters: Any) -> Any:
        """Do the work of one Task state whose resource is ``resource``, with its effective input."""
        service = resource.split(":states:::", 1)[-1]
        with timings.phase(f"task: {service}", self.execution):
            if service == "lambda:invoke":
                return self._invoke(parameters)
            if service == "athena:startQueryExecution.sync":
                return self._query(parameters)
            served = TASK_SERVERS.get(service)
            if served is not None:
                return served(self, parameters)
        raise TaskFailed("States.Runtime", f"the rehearsal serves no task resource {resource}")

    def _invoke(self, parameters: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self._client("lambda").invoke(
                FunctionName=parameters["FunctionName"], Payload=json.dumps(parameters.get("Payload"))
            )
        except ClientError as error:  # refused or throttled: what Step Functions names Lambda's errors
            code = error.response["Error"]["Code"]
            known = code in {"TooManyRequestsException", "ServiceException"}
            raise TaskFailed(f"Lambda.{code}" if known else "Lambda.AWSLambdaException", str(error)) from error
        except BotoCoreError as error:
            raise TaskFailed("Lambda.SdkClientException", str(error)) from error
        payload = json.loads(response["Payload"].read() or b"null")
        if response.get("FunctionError"):
            error_type = payload.get("errorType") if isinstance(payload, dict) else None
            raise TaskFailed(str(error_type or "Lambda.Unknown"), json.dumps(payload))
        return {"ExecutedVersion": "$LATEST", "Payload": payload, "StatusCode": response["StatusCode"]}

    def _query(self, parameters: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        athena = self._client("athena")
        try:
            query_id = athena.start_query_execution(**parameters)["QueryExecutionId"]
            if self.execution is not None:
                timings.link(query_id, self.execution)
            with _watching(query_id):
                while True:
                    described = athena.get_query_execution(QueryExecutionId=query_id)
                    if described["QueryExecution"]["Status"]["State"] in ENDED_QUERY_STATES:
                        break
                    _wait_for_the_end(query_id)
        except ClientError as error:
            raise TaskFailed(f"Athena.{error.response['Error']['Code']}", str(error)) from error
        described.pop("ResponseMetadata", None)
        result = json.loads(json.dumps(described, default=str))
        if described["QueryExecution"]["Status"]["State"] != "SUCCEEDED":
            raise TaskFailed("States.TaskFailed", json.dumps(result))
        return dict(result)
