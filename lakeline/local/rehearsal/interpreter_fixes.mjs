// A module loader hook (node:module register) that corrects aws-local-stepfunctions 3.0.0 where it differs
// from Step Functions, for run_execution.mjs. Each fix names the source it replaces; a version whose source
// differs stops the run instead of running unfixed (an upgrade must look at the fix again).
//
// Intrinsic functions' escapes: the interpreter takes every backslash out of an intrinsic function's string
// result (meant for the escapes of its string literals, "\\{" in States.Format), so States.JsonToString of a
// value holding a quote or a backslash gave invalid JSON (a stage plan's arrivals are JSON strings: every
// Glue job task's --plan was broken). Step Functions unescapes the literals, not the results: so here.
const PACKAGE = "/node_modules/aws-local-stepfunctions/build/";
const FIXES = [
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
