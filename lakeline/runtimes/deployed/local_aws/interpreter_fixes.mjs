// A module loader hook (node:module register) that corrects aws-local-stepfunctions 3.0.0 where it differs
// from Step Functions, for run_execution.mjs. Each fix names the source it replaces; a version whose source
// differs stops the run instead of running unfixed (an upgrade must look at the fix again).
//
// Intrinsic functions' escapes: the interpreter takes every backslash out of an intrinsic function's string
// result (meant for the escapes of its string literals, "\\{" in States.Format), so States.JsonToString of a
// value holding a quote or a backslash gave invalid JSON (a stage plan's arrivals are JSON strings: every
// Glue job task's --plan was broken). Step Functions unescapes the literals, not the results: so here.
//
// States.Hash: the interpreter's own SHA-256 (and SHA-384, SHA-512) gives one digest for every input longer than
// a block (64 bytes): the Athena tasks' ClientRequestToken, a hash of the execution's id and the state, was then
// the same for each state. Node's crypto computes the digests instead, lowercase hexadecimal as Step Functions'.
//
// Payload size: the interpreter passes on data of any size; Step Functions fails a state whose input (after
// Parameters), task result or output is over 256 KiB as UTF-8 with States.DataLimitExceeded, a terminal error
// no Retry or Catch takes (not even States.ALL): so here, each checked where the state executor makes it.
const PACKAGE = "/node_modules/aws-local-stepfunctions/build/";
const PAYLOAD_LIMIT = 262144; // bytes: Step Functions' quota for a task's, a state's or an execution's data
const DATA_LIMIT = `
function lakelineDataLimit(stateName, what, value) {
  const text = JSON.stringify(value);
  if (text !== undefined && Buffer.byteLength(text, "utf8") > ${PAYLOAD_LIMIT}) {
    const error = new Error(
      \`The state/task '\${stateName}' \${what} with a size exceeding the maximum number of bytes service limit.\`
    );
    error.name = "States.DataLimitExceeded";
    error.isRetryable = false;
    error.isCatchable = false;
    throw error;
  }
  return value;
}
`;
const FIXES = [
  {
    name: "States.Hash digests with Node's crypto (the module's import)",
    before: "// src/util/hash/BaseHash.ts\n",
    after: 'import { createHash as lakelineCreateHash } from "node:crypto";\n// src/util/hash/BaseHash.ts\n',
  },
  {
    name: "States.Hash digests with Node's crypto",
    before: '    switch (algorithm) {\n      case "MD5":\n        return md5.getDigest(str);\n',
    after:
      '    return lakelineCreateHash(algorithm.replace("-", "").toLowerCase()).update(str, "utf8").digest("hex");\n' +
      '    switch (algorithm) {\n      case "MD5":\n        return md5.getDigest(str);\n',
  },
  {
    name: "an intrinsic function's string result keeps its backslashes",
    before: 'if (typeof result === "string") {\n      result = result.replaceAll("\\\\", "");\n    }\n',
    after: "",
  },
  {
    name: "a string literal argument of an intrinsic function is unescaped",
    before: "return arg.slice(1, lastSingleQuote);",
    after: 'return arg.slice(1, lastSingleQuote).replace(/\\\\(.)/g, "$1");',
  },
  {
    name: "payloads over 256 KiB fail with States.DataLimitExceeded (the check itself)",
    before: "// src/stateMachine/StateExecutor.ts\n",
    after: `// src/stateMachine/StateExecutor.ts\n${DATA_LIMIT}`,
  },
  {
    name: "a state's input after Parameters over 256 KiB fails it",
    before: "      const processedInput = this.processInput(input, context);\n",
    after:
      "      const processedInput = lakelineDataLimit(this.stateName, " +
      '"has an input", this.processInput(input, context));\n',
  },
  {
    name: "a task's result or a state's output over 256 KiB fails it",
    before: "      const processedResult = this.processResult(currResult, rawInput, context);\n",
    after:
      '      lakelineDataLimit(this.stateName, "returned a result", currResult);\n' +
      "      const processedResult = lakelineDataLimit(this.stateName, " +
      '"returned a result", this.processResult(currResult, rawInput, context));\n',
  },
];

export async function load(url, context, nextLoad) {
  const loaded = await nextLoad(url, context);
  if (!url.includes(PACKAGE) || !url.endsWith(".js")) {
    return loaded;
  }
  let source = String(loaded.source);
  for (const fix of FIXES) {
    if (!source.includes(fix.before)) {
      throw new Error(`aws-local-stepfunctions changed: cannot apply the rehearsal's fix "${fix.name}" to ${url}`);
    }
    source = source.replace(fix.before, fix.after);
  }
  return { ...loaded, source };
}
