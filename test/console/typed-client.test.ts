import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The console is typed from docs/openapi.json, so an API change it does not follow fails the build (what
 * `make build` runs: openapi-typescript, then tsc on console/). Proved on a copy of the console: the
 * document as it is type-checks; with an operation the approvals page calls removed, or a field it reads
 * renamed, the same check fails and names the page.
 */
const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const bin = (name: string) => path.join(ROOT, 'node_modules/.bin', name);

describe('console: typed from the OpenAPI document', () => {
  let dir: string;
  const document = JSON.parse(readFileSync(path.join(ROOT, 'docs/openapi.json'), 'utf8')) as {
    paths: Record<string, Record<string, any>>;
  };

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'tollgate-console-types-'));
    cpSync(path.join(ROOT, 'console'), path.join(dir, 'console'), { recursive: true, filter: (src) => !src.endsWith('schema.gen.ts') });
    // The copy resolves its packages (React's and Vite's types) from the repository's node_modules.
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Generates the console's types from `doc` and type-checks the console copy: tsc's output, or '' when clean. */
  async function check(doc: unknown): Promise<string> {
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    await run(bin('openapi-typescript'), [file, '-o', path.join(dir, 'console/src/api/schema.gen.ts')], { cwd: dir });
    try {
      await run(bin('tsc'), ['-p', path.join(dir, 'console/tsconfig.json')], { cwd: dir });
      return '';
    } catch (err) {
      return String((err as { stdout?: string }).stdout ?? err);
    }
  }

  it('type-checks against the document as it is', async () => {
    expect(await check(document)).toBe('');
  }, 120_000);

  it('fails, naming the page, when an operation it calls is gone', async () => {
    const changed = structuredClone(document);
    delete changed.paths['/approvals/{approval_id}/decision'];
    const out = await check(changed);
    expect(out).toContain('src/pages/approvals.tsx');
    expect(out).toContain('/approvals/{approval_id}/decision');
  }, 120_000);

  it('fails when a field it reads is renamed', async () => {
    const changed = structuredClone(document);
    const schema = changed.paths['/approvals/{approval_id}']!.get.responses['200'].content['application/json'].schema;
    schema.properties.approvals_needed = schema.properties.approvals_required;
    delete schema.properties.approvals_required;
    schema.required = schema.required.map((k: string) => (k === 'approvals_required' ? 'approvals_needed' : k));
    const out = await check(changed);
    expect(out).toContain('src/pages/approvals.tsx');
    expect(out).toContain('approvals_required');
  }, 120_000);
});
