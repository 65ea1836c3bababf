import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_PATHS } from '../../api/platform/console.js';
import { OTHER_PATHS, SECTIONS } from '../../console/src/sections.js';
import { consoleDir } from '../support/browser.js';
import { startTestApp, type TestApp } from '../support/harness.js';

/**
 * `tollgate api` serving the built console (dist/console): the page at the console's paths with
 * no-cache, the hashed assets cached for good, the strict Content-Security-Policy on both, and every
 * other path keeping its JSON answer.
 */
type Res = { statusCode: number; headers: Record<string, unknown>; body: string };

function cspOf(res: Res): Map<string, string> {
  const csp = String(res.headers['content-security-policy'] ?? '');
  return new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name!, values.join(' ')]));
}

function expectStrictPolicy(res: Res, what: string): void {
  const csp = cspOf(res);
  expect(csp.get('script-src'), what).toBe("'self'");
  expect(csp.get('style-src'), what).toBe("'self'");
  expect(csp.get('script-src-attr'), what).toBe("'none'");
  expect(csp.get('connect-src'), what).toBe("'self'");
  expect(csp.get('frame-ancestors'), what).toBe("'none'");
  expect(String(res.headers['content-security-policy']), what).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
  expect(res.headers['x-content-type-options'], what).toBe('nosniff');
}

function expectEnvelope(res: Res, status: number, code: string): void {
  expect(res.statusCode).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  expect(JSON.parse(res.body).error.code).toBe(code);
}

describe('console: served by tollgate api', () => {
  let t: TestApp;
  let page: string;
  let assets: string[];

  beforeAll(async () => {
    const dir = consoleDir();
    page = readFileSync(path.join(dir, 'index.html'), 'utf8');
    assets = [...page.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    t = await startTestApp({ env: { CONSOLE_DIR: dir } });
  });
  afterAll(async () => t.close());

  it('lists the same top-level paths as the console’s router', () => {
    const consolePaths = [...SECTIONS.map((s) => s.path), ...OTHER_PATHS].sort();
    expect([...CONSOLE_PATHS].sort()).toEqual(consolePaths);
  });

  it('answers the page at every console path and under it, revalidated on every load, with the strict policy', async () => {
    const paths = [...CONSOLE_PATHS, '/agents/2f1c1d1e-0000-4000-8000-000000000000', '/inventory/tools', '/approvals/x?status=approved'];
    for (const url of paths) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type'], url).toBe('text/html; charset=utf-8');
      expect(res.headers['cache-control'], url).toBe('no-cache');
      expect(res.headers['set-cookie'], url).toBeUndefined();
      expect(res.body, url).toBe(page);
      expectStrictPolicy(res, url);
    }
    const head = await t.app.inject({ method: 'HEAD', url: '/approvals' });
    expect(head.statusCode).toBe(200);
    expect(head.body).toBe('');
  });

  it('builds a page with no inline script or style, so the policy needs no exception', () => {
    expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page).not.toMatch(/<style\b/);
    expect(page).not.toMatch(/\sstyle="/);
    expect(page).not.toMatch(/\son[a-z]+="/);
    expect(assets.some((a) => a.endsWith('.js'))).toBe(true);
    expect(assets.some((a) => a.endsWith('.css'))).toBe(true);
  });

  it('serves the hashed assets with a year’s immutable cache and their media types', async () => {
    for (const url of assets) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['cache-control'], url).toBe('public, max-age=31536000, immutable');
      expect(String(res.headers['content-type']), url).toMatch(url.endsWith('.js') ? /^(text|application)\/javascript/ : /^text\/css/);
      expect(res.headers.etag, url).toBeTruthy();
      expectStrictPolicy(res, url);
      const again = await t.app.inject({ method: 'GET', url, headers: { 'if-none-match': String(res.headers.etag) } });
      expect(again.statusCode, url).toBe(304);
    }
    const icon = await t.app.inject({ method: 'GET', url: '/favicon.svg' });
    expect(icon.statusCode).toBe(200);
    expect(icon.headers['content-type']).toBe('image/svg+xml');
  });

  it('keeps the JSON envelope everywhere else: unknown paths, missing assets, the API, other methods', async () => {
    expectEnvelope(await t.app.inject({ method: 'GET', url: '/nowhere' }), 404, 'not_found');
    expectEnvelope(await t.app.inject({ method: 'GET', url: '/assets/missing-0000.js' }), 404, 'not_found');
    expectEnvelope(await t.app.inject({ method: 'GET', url: '/api/v1/nowhere' }), 404, 'not_found');
    expectEnvelope(await t.app.inject({ method: 'GET', url: '/api/v1/agents' }), 401, 'unauthenticated');
    const post = await t.app.inject({ method: 'POST', url: '/approvals', payload: {} });
    expectEnvelope(post, 405, 'method_not_allowed');
    expect(post.headers.allow).toBe('GET, HEAD');
  });

  it('never serves a file from outside the assets folder', async () => {
    for (const url of ['/assets/../index.html', '/assets/%2e%2e/%2e%2e/package.json', '/assets/..%2f..%2fpackage.json', '/assets/.hidden']) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).not.toBe(200);
      expect(res.body, url).not.toContain('"name": "tollgate"');
    }
  });

  it('keeps the console out of the OpenAPI document', async () => {
    const doc = JSON.parse((await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).body) as { paths: Record<string, unknown> };
    const paths = Object.keys(doc.paths);
    expect(paths.filter((p) => p === '/' || /(^|\/)\*$/.test(p) || p.startsWith('/assets') || p === '/favicon.svg' || p === '/sign-in' || p === '/onboarding')).toEqual([]);
  });

  it('without a built console, / answers the JSON 404 and says why in the log', async () => {
    const empty = mkdtempSync(path.join(tmpdir(), 'tollgate-no-console-'));
    const bare = await startTestApp({ env: { CONSOLE_DIR: empty } });
    try {
      expectEnvelope(await bare.app.inject({ method: 'GET', url: '/' }), 404, 'not_found');
      expect(bare.logs.some((l) => l.includes('CONSOLE_DIR holds no index.html'))).toBe(true);
      expect((await bare.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await bare.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
