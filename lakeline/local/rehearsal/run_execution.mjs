// Runs one Step Functions execution of a synthesized state machine definition with aws-local-stepfunctions
// (an Amazon States Language interpreter: paths, Parameters, ResultSelector, Map, Choice, Retry, Catch),
// for lakeline/local/rehearsal/executions.py, which drives it over stdin/stdout, one JSON document a line:
//   in:  {"definition", "input", "context"}, then one {"id", "output"} or {"id", "error", "cause"} per task
//   out: {"task": {"id", "state", "resource", "input"}} per Task state reached (the task host does the
//        work the resource names), then {"done": {"status", "output" | "error", "cause"}}
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

const { StateMachine, ExecutionError } = await import("aws-local-stepfunctions");

const lines = createInterface({ input: process.stdin });
const pending = new Map();
let started = null;
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

function taskHandler(state, resource) {
  return (input) =>
    new Promise((resolve, reject) => {
      counter += 1;
      const id = counter;
      pending.set(id, { resolve, reject });
      send({ task: { id, state, resource, input } });
    });
}

async function run(request) {
  const definition = request.definition;
  const handlers = {};
  // A retrier's wait: none, so that a rehearsed retry costs no time (the attempts still count).
  const retryWaits = {};
  for (const [name, state] of allStates(definition.States)) {
    if (state.Type === "Task") {
      handlers[name] = taskHandler(name, state.Resource);
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
  const machine = new StateMachine(definition);
  const execution = machine.run(request.input, {
    overrides: { taskResourceLocalHandlers: handlers, retryIntervalOverrides: retryWaits },
    context: request.context,
  });
  try {
    const output = await execution.result;
    send({ done: { status: "SUCCEEDED", output } });
  } catch (error) {
    if (error instanceof ExecutionError) {
      const cause = error.cause ?? error; // the error the execution failed with (a Fail state's, or a task's)
      send({ done: { status: "FAILED", error: cause.name, cause: cause.message } });
    } else {
      send({ done: { status: "FAILED", error: "States.Runtime", cause: String(error?.stack ?? error) } });
    }
  }
  process.exit(0);
}

lines.on("line", (line) => {
  const message = JSON.parse(line);
  if (started === null) {
    started = run(message);
    return;
  }
  const waiting = pending.get(message.id);
  pending.delete(message.id);
  if ("error" in message) {
    const failure = new Error(message.cause ?? "");
    failure.name = message.error;
    waiting.reject(failure);
  } else {
    waiting.resolve(message.output);
  }
});
