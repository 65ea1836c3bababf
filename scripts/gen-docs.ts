import { readFileSync, writeFileSync } from 'node:fs';
import { openApiDocument, render } from './openapi-document.js';
import { withMatrix } from './roles-document.js';

/**
 * Regenerates the generated documents: docs/openapi.json and the role matrix in docs/roles.md.
 * Tests fail when the checked-in copies drift from the code.
 */
writeFileSync(new URL('../docs/openapi.json', import.meta.url), render(await openApiDocument()));
const roles = new URL('../docs/roles.md', import.meta.url);
writeFileSync(roles, withMatrix(readFileSync(roles, 'utf8')));
process.stdout.write('wrote docs/openapi.json and the role matrix of docs/roles.md\n');
