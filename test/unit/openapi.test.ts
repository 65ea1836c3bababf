import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openApiDocument, render } from '../../scripts/openapi-document.js';

type Operation = { 'x-tollgate-caller'?: string; 'x-tollgate-extension'?: boolean; responses: Record<string, unknown> };
type Paths = Record<string, Record<string, Operation>>;

/** The spec's operations.tsv (copied into test/fixtures): method, path, caller, success status. */
const specOperations = new Map(
  readFileSync(new URL('../fixtures/operations.tsv', import.meta.url), 'utf8')
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => line.split('\t'))
    .map(([method, path, caller, success]) => [`${method} ${path}`, { caller: caller!, success: success! }]),
);

/**
 * The operations docs/operations.md lists under "Extensions beyond the spec": rows of
 * | `METHOD` | `/path` | `caller` | status | what |.
 */
const documentedExtensions = new Map(
  [...readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8')
    .split('## Extensions beyond the spec')[1]!
    .split('\n## ')[0]!
    .matchAll(/^\| `(GET|POST|PATCH|PUT|DELETE)` \| `([^`]+)` \| `([^`]+)` \| (\d{3}) \|/gm)].map(
    ([, method, path, caller, success]) => [`${method} ${path}`, { caller: caller!, success: success! }],
  ),
);

describe('OpenAPI document', async () => {
  const doc = await openApiDocument();
  const paths = doc.paths as Paths;
  const operations = Object.entries(paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, op })),
  );

  it('is OpenAPI 3.1 at API version 0.1.0', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect((doc.info as { version: string }).version).toBe('0.1.0');
  });

  it('matches the checked-in docs/openapi.json (run `make docs` after changing a route)', () => {
    const checkedIn = readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8');
    expect(render(doc)).toBe(checkedIn);
  });

  const ofSpec = operations.filter(({ op }) => !op['x-tollgate-extension']);
  const extensions = operations.filter(({ op }) => op['x-tollgate-extension'] === true);

  it('lists only operations of the spec, each with the caller and success status the spec gives, besides marked extensions', () => {
    expect(ofSpec.length).toBeGreaterThan(0);
    for (const { key, op } of ofSpec) {
      const spec = specOperations.get(key);
      expect(spec, `${key} is not an operation of the spec`).toBeDefined();
      // "public (disabled in production)" is the public caller with a note.
      expect(op['x-tollgate-caller'], key).toBe(spec!.caller.replace(/ \(.*\)$/, ''));
      expect(Object.keys(op.responses), key).toContain(spec!.success);
    }
  });

  it('marks as extensions only operations outside the spec, each listed in docs/operations.md with its caller and status', () => {
    expect(extensions.length).toBeGreaterThan(0);
    for (const { key, op } of extensions) {
      expect(specOperations.has(key), `${key} is an operation of the spec, not an extension`).toBe(false);
      const documented = documentedExtensions.get(key);
      expect(documented, `${key} is missing from docs/operations.md, Extensions beyond the spec`).toBeDefined();
      expect(op['x-tollgate-caller'], key).toBe(documented!.caller);
      expect(Object.keys(op.responses), key).toContain(documented!.success);
    }
    expect([...documentedExtensions.keys()].sort()).toEqual(extensions.map((e) => e.key).sort());
  });

  it('documents the error envelope for every operation', () => {
    for (const { key, op } of operations) expect(Object.keys(op.responses), key).toEqual(expect.arrayContaining(['4XX', '5XX']));
  });
});
