// Prints vitest's JSON result as the plain closing line "N passed, N failed, N skipped".
import { existsSync, readFileSync } from 'node:fs';

const file = process.argv[2];
if (!file || !existsSync(file)) {
  console.log('tests: 0 passed, 1 failed');
  process.exit(0);
}
const r = JSON.parse(readFileSync(file, 'utf8'));
const failed = r.numFailedTests + (r.numFailedTestSuites > 0 && r.numFailedTests === 0 ? r.numFailedTestSuites : 0);
console.log(`tests: ${r.numPassedTests} passed, ${failed} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
