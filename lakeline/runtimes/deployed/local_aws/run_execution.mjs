// Runs Step Functions executions of synthesized state machine definitions with aws-local-stepfunctions
// (an Amazon States Language interpreter: paths, Parameters, ResultSelector, Map, Choice, Retry, Catch),
// for lakeline/runtimes/deployed/local_aws/executions.py, which drives it over stdin/stdout, one JSON document a line.
// One process runs every execution of a deployment, side by side (Node's start and the interpreter's load
// are paid once, not per execution); each message names its execution:
//   in:  {"start": execution, "definition", "input", "context"} starts one; then one
//        {"execution", "id", "output"} or {"execution", "id", "error", "cause"} per task it reached;
//        {"abort": execution} stops it (StopExecution), its end then ABORTED
//   out: {"execution", "task": {"id", "state", "resource", "input"}} per Task state reached (the task host
//        does the work the resource names), then {"execution", "done": {"status", "output" | "error", "cause"}}
// The process ends when its stdin closes and the executions under way have ended.
import { register } from "node:module";
import { createInterface } from "node:readline";

// Where the interpreter differs from Step Functions, corrected as it is loaded (interpreter_fixes.mjs).
register("./interpreter_fixes.mjs", import.meta.url);

// aws-local-stepfunctions 3 uses Promise.withResolvers (Node 22); Node 20 is what the project requires.
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new Promise((yes, no) => {
      resolve = yes;
      reject = no;
    });
    return { promise, resolve, reject };
  };
}

const { StateMachine, ExecutionError, ExecutionAbortedError, ExecutionTimeoutError } = await import(
  "aws-local-stepfunctions"
);

const lines = createInterface({ input: process.stdin });
const pending = new Map(); // task id → its promise's resolve and reject
const running = new Set(); // the executions' promises, until each has sent its end
const started = new Map(); // execution → the interpreter's run, which an abort message stops
let counter = 0;

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

// Every state, at any depth (Map item processors, Parallel branches), with its name.
function* allStates(states) {
  for (const [name, state] of Object.entries(states)) {
    yield [name, state];
    const processor = state.ItemProcessor ?? state.Iterator;
    if (processor) {
      yield* allStates(processor.States);
    }
    for (const branch of state.Branches ?? []) {
      yield* allStates(branch.States);
    }
  }
}

function taskHandler(execution, state, resource) {
  return (input) =>
    new Promise((resolve, reject) => {
      counter += 1;
      const id = counter;
      pending.set(id, { resolve, reject });
      send({ execution, task: { id, state, resource, input } });
    });
}

async function run(execution, request) {
  const definition = request.definition;
  const handlers = {};
  // A retrier's wait: none, so that a rehearsed retry costs no time (the attempts still count).
  const retryWaits = {};
  for (const [name, state] of allStates(definition.States)) {
    if (state.Type === "Task") {
      handlers[name] = taskHandler(execution, name, state.Resource);
      // Step Functions lets a task without a timeout run for a year; the interpreter would stop it at 60 s.
      // The longest a Node timer can wait instead (2^31 - 1 ms, about 24 days; a longer one fires at once).
      if (state.TimeoutSeconds === undefined && state.TimeoutSecondsPath === undefined) {
        state.TimeoutSeconds = 2147483;
      }
    }
    if (state.Retry) {
      retryWaits[name] = 0;
    }
  }
  try {
    const machine = new StateMachine(definition);
    const interpreted = machine.run(request.input, {
      overrides: { taskResourceLocalHandlers: handlers, retryIntervalOverrides: retryWaits },
      context: request.context,
    });
    started.set(execution, interpreted);
    const output = await interpreted.result;
    send({ execution, done: { status: "SUCCEEDED", output } });
  } catch (error) {
    // Step Functions ends these itself, outside any Catch: no error of a state's.
    if (error instanceof ExecutionAbortedError) {
      send({ execution, done: { status: "ABORTED" } });
    } else if (error instanceof ExecutionTimeoutError) {
      send({ execution, done: { status: "TIMED_OUT", error: "States.Timeout", cause: "the execution timed out" } });
    } else if (error instanceof ExecutionError) {
      const cause = error.cause ?? error; // the error the execution failed with (a Fail state's, or a task's)
      send({ execution, done: { status: "FAILED", error: cause.name, cause: cause.message } });
    } else {
      send({ execution, done: { status: "FAILED", error: "States.Runtime", cause: String(error?.stack ?? error) } });
    }
  } finally {
    started.delete(execution);
  }
}

lines.on("line", (line) => {
  const message = JSON.parse(line);
  if ("abort" in message) {
    started.get(message.abort)?.abort();
    return;
  }
  if ("start" in message) {
    const execution = run(message.start, message);
    running.add(execution);
    execution.finally(() => running.delete(execution));
    return;
  }
  const waiting = pending.get(message.id);
  if (waiting === undefined) {
    return; // a task of an execution that ended meanwhile (a state timeout): nothing waits for it
  }
  pending.delete(message.id);
  if ("error" in message) {
    const failure = new Error(message.cause ?? "");
    failure.name = message.error;
    waiting.reject(failure);
  } else {
    waiting.resolve(message.output);
  }
});
// No more input (the host stopped, or died): an execution waiting for a task's reply would wait forever, so
// the process ends at once then; else once the executions under way have ended.
lines.on("close", () => {
  if (pending.size > 0) {
    process.exit(0);
  }
  Promise.allSettled([...running]).then(() => process.exit(0));
});
