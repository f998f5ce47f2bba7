// The one rule for a parity or client test whose reference is an npm package (installed into
// BUILD/npm by scripts/npm_setup.sh). When a package is missing:
//   - under CI=true, FAIL (exit 1), naming every missing package and why it is missing (no npm,
//     a failed install, an unreachable registry, a forgotten setup): a CI run never passes with
//     a client or reference test that did not run;
//   - otherwise (a developer's machine), SKIP (exit 77) with the same names and reason and the
//     command that installs them.
// Not here: installing anything (scripts/npm_setup.sh does, once per build folder).
// Used as a module (need(npmDir, pkgs, what) returns the first package's path; pkgs is a name or
// an array of names) or from a shell test:
//   node reference.js NPM_DIR PACKAGE[,PACKAGE...] [WHAT]   -> exit 0 (all present), 77 or 1
'use strict';
const fs = require('fs');
const path = require('path');

// Why npm_setup.sh could not install the packages, as it left it in NPM_DIR ('' = it never ran).
function whyMissing(npmDir) {
  const marker = path.join(npmDir, 'UNAVAILABLE');
  const why = fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8').trim() : '';
  if (!why) return 'scripts/npm_setup.sh has not installed them';
  const logFile = path.join(npmDir, 'npm-install.log');
  const log = why + (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '');
  const unreachable = why.startsWith('npm install failed') &&
    /E(NOTFOUND|AI_AGAIN|TIMEDOUT|CONNREFUSED|CONNRESET|NETUNREACH|HOSTUNREACH)|network|proxy|fetch failed|socket hang up/i.test(log);
  return unreachable ? `the npm registry is unreachable (${why})` : why;
}

function need(npmDir, pkgs, what) {
  const names = Array.isArray(pkgs) ? pkgs : [pkgs];
  const dirs = names.map((p) => path.resolve(npmDir, 'node_modules', p));
  const missing = names.filter((p, i) => !fs.existsSync(dirs[i]));
  if (missing.length === 0) return dirs[0];
  const msg = `npm package${missing.length > 1 ? 's' : ''} ${missing.join(', ')} missing from ` +
    `${path.resolve(npmDir)}: ${whyMissing(npmDir)} (install: bash scripts/npm_setup.sh BUILD)`;
  if (process.env.CI === 'true') {
    console.log(`FAIL: ${msg}; under CI=true ${what} must run`);
    process.exit(1);
  }
  console.log(`SKIPPED: ${what} not checked: ${msg}`);
  process.exit(77);
}

module.exports = { need };

if (require.main === module) {
  const [npmDir, pkgs, what] = process.argv.slice(2);
  if (!npmDir || !pkgs) {
    console.error('usage: node reference.js NPM_DIR PACKAGE[,PACKAGE...] [WHAT]');
    process.exit(2);
  }
  const names = pkgs.split(',').filter(Boolean);
  need(npmDir, names, what || `the ${names.join(', ')} test`);
}
