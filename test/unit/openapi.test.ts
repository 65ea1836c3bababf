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

  it('declares If-Match where the services check it: required (with its 428) on policy changes, optional on record patches', () => {
    type Parameter = { in: string; name: string; required?: boolean; schema?: { pattern?: string } };
    const ifMatch = (op: Operation) =>
      ((op as { parameters?: Parameter[] }).parameters ?? []).find((p) => p.in === 'header' && p.name.toLowerCase() === 'if-match');
    const declared = operations.filter(({ op }) => ifMatch(op)).map(({ key, op }) => ({ key, required: ifMatch(op)!.required, op }));
    // The services call checkIfMatch(..., true) for these three, (..., false) for the patches.
    expect(declared.filter((d) => d.required).map((d) => d.key).sort()).toEqual([
      'POST /policies/{policy_id}/status',
      'POST /policies/{policy_id}/versions',
      'POST /policies/{policy_id}/versions/{number}/publish',
    ]);
    expect(declared.filter((d) => !d.required).map((d) => d.key).sort()).toEqual([
      'PATCH /agents/{agent_id}',
      'PATCH /findings/{finding_id}',
      'PATCH /settings',
      'PATCH /tenants/current',
      'PATCH /users/{user_id}',
    ]);
    for (const { key, required, op } of declared) {
      expect(Object.keys(op.responses).includes('428'), key).toBe(required);
      const pattern = new RegExp(ifMatch(op)!.schema!.pattern!);
      for (const ok of ['3', '"3"', 'W/"3"']) expect(pattern.test(ok), `${key} ${ok}`).toBe(true);
      expect(pattern.test('yesterday'), key).toBe(false);
    }
    // No other operation answers 428.
    for (const { key, op } of operations.filter(({ op }) => !ifMatch(op))) expect(Object.keys(op.responses), key).not.toContain('428');
  });

  it('describes the opaque cursor of every paged list and the confirm rule of every body that takes one', () => {
    type Parameter = { in: string; name: string; description?: string };
    const cursors = operations.flatMap(({ key, op }) =>
      ((op as { parameters?: Parameter[] }).parameters ?? []).filter((p) => p.in === 'query' && p.name === 'cursor').map((p) => ({ key, p })),
    );
    expect(cursors.length).toBeGreaterThan(5);
    for (const { key, p } of cursors) expect(p.description, key).toMatch(/next_cursor.*invalid_cursor/s);

    type Body = { requestBody?: { content: { 'application/json': { schema: { properties?: Record<string, { description?: string }> } } } } };
    const confirms = operations.flatMap(({ key, op }) => {
      const confirm = (op as Body).requestBody?.content['application/json'].schema.properties?.confirm;
      return confirm ? [{ key, confirm }] : [];
    });
    expect(confirms.length).toBeGreaterThan(5);
    for (const { key, confirm } of confirms) expect(confirm.description, key).toMatch(/true/);
  });

  it('documents the error envelope for every operation', () => {
    for (const { key, op } of operations) expect(Object.keys(op.responses), key).toEqual(expect.arrayContaining(['4XX', '5XX']));
  });
});
