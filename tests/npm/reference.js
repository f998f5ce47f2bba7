// The one rule for a parity test whose reference is an npm package (installed into BUILD/npm by
// scripts/npm_setup.sh). When the package is missing:
//   - SKIP (exit 77, the reason printed) only if npm_setup.sh's install failed with a network
//     error (its log says which): the machine cannot reach the registry;
//   - otherwise, under CI=true, FAIL (exit 1): no npm, a failed install, a forgotten setup;
//   - otherwise (a developer's machine), SKIP naming the command that installs it.
// Used as a module (need(npmDir, pkg, what) returns the package's path) or from a shell test:
//   node reference.js NPM_DIR PACKAGE WHAT   -> exit 0 (present), 77 or 1, as above
'use strict';
const fs = require('fs');
const path = require('path');

function need(npmDir, pkg, what) {
  const dir = path.resolve(npmDir, 'node_modules', pkg);
  if (fs.existsSync(dir)) return dir;
  const marker = path.join(npmDir, 'UNAVAILABLE');
  const why = fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8').trim() : '';
  const logFile = path.join(npmDir, 'npm-install.log');
  const log = why + (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '');
  const unreachable = why.startsWith('npm install failed') &&
    /E(NOTFOUND|AI_AGAIN|TIMEDOUT|CONNREFUSED|CONNRESET|NETUNREACH|HOSTUNREACH)|network|proxy|fetch failed|socket hang up/i.test(log);
  if (unreachable) {
    console.log(`SKIPPED: npm registry unreachable, ${what} not checked: ${why}`);
    process.exit(77);
  }
  const msg = `${dir} missing${why ? ` (${why})` : ''} (run: bash scripts/npm_setup.sh BUILD)`;
  if (process.env.CI === 'true') {
    console.log(`FAIL: ${msg}; under CI=true ${what} needs it unless the npm registry is unreachable`);
    process.exit(1);
  }
  console.log(`SKIPPED: ${msg}`);
  process.exit(77);
}

module.exports = { need };

if (require.main === module) {
  const [npmDir, pkg, what] = process.argv.slice(2);
  if (!npmDir || !pkg) {
    console.error('usage: node reference.js NPM_DIR PACKAGE [WHAT]');
    process.exit(2);
  }
  need(npmDir, pkg, what || `the ${pkg} parity`);
}
