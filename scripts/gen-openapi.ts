import { writeFileSync } from 'node:fs';
import { openApiDocument, render } from './openapi-document.js';

/** Regenerates docs/openapi.json, the checked-in copy of the API document (a test fails on drift). */
writeFileSync(new URL('../docs/openapi.json', import.meta.url), render(await openApiDocument()));
process.stdout.write('wrote docs/openapi.json\n');
