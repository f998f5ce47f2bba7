// The shared pieces of the npm-client tests (openai_client_test.mjs, structured_output_test.mjs,
// anthropic_client_test.mjs, chat_page_test.mjs): the npm folder's require, named checks that
// keep going after a failure, and the exit status they add up to.
import { createRequire } from "node:module";
import path from "node:path";

// require() of the packages scripts/npm_setup.sh installed into BUILD/npm ($MMX_NPM).
export const require = createRequire(path.resolve(process.env.MMX_NPM, "package.json"));

let failed = 0;
// Runs one named check; a failure is printed with its stack and counted, and the next check runs.
export async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}

// Prints the tally and exits 1 if any check failed.
export function finish() {
  console.log(failed ? `${failed} check(s) FAILED` : "all checks passed");
  process.exit(failed ? 1 : 0);
}
