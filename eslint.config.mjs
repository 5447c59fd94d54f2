// ESLint for the lineage viewer's own JS and CSS and the rehearsal's Node script (`make lint`); the vendored
// layout library is left out.
import css from "@eslint/css";
import js from "@eslint/js";
import globals from "globals";

const ASSETS = "lakeline/lineage/viewer/assets";
// The rules every JS file of ours is held to; the viewer's script adds those of a classic script.
const JS_RULES = {
  ...js.configs.recommended.rules,
  eqeqeq: "error",
  "no-var": "error",
  "prefer-const": "error",
  "no-shadow": "error",
};

export default [
  { ignores: [`${ASSETS}/vendor/`] },
  {
    files: [`${ASSETS}/**/*.js`],
    ...js.configs.recommended,
    languageOptions: {
      ecmaVersion: 2022,
      // Inlined into the page as a classic script, after dagre's, which defines the global `dagre`.
      sourceType: "script",
      globals: { ...globals.browser, dagre: "readonly" },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: { ...JS_RULES, "no-implicit-globals": "error", strict: ["error", "function"] },
  },
  {
    // Drives aws-local-stepfunctions for lakeline/runtimes/deployed/local_aws/executions.py.
    files: ["lakeline/runtimes/deployed/local_aws/*.mjs"],
    ...js.configs.recommended,
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.node } },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: JS_RULES,
  },
  {
    files: [`${ASSETS}/**/*.css`],
    plugins: { css },
    language: "css/css",
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: { ...css.configs.recommended.rules },
  },
];
