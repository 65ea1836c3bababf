import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { promisify } from 'node:util';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LATEST_PROTOCOL_VERSION, PROTOCOL_VERSIONS } from '../../sidecar/mcp-upstream.js';
import { ROOT } from '../support/processes.js';

/** The modules a source file loads when it is evaluated: its static imports that are not `import type`. */
function staticImports(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const found: string[] = [];
  // `import x from '...'`, `import { a, type B } from '...'`, `export { a } from '...'`, `import '...'`; not `import type`.
  for (const m of source.matchAll(/^(?:import|export)\s+(?!type\s)(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) found.push(m[1]!);
  return found;
}

/** Every module `entry` loads before it runs: project files followed, packages listed by name. */
function loadedBy(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    for (const spec of staticImports(file)) {
      if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec.replace(/\.js$/, '.ts')));
      else if (!spec.startsWith('node:')) packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  };
  visit(entry);
  return { files, packages };
}

/**
 * Issue 20, point 6: `tollgate sidecar` (one per agent pod) loads only what the sidecar needs. cli.ts imports no
 * command's code up front, and what `sidecar/main.ts` loads holds no module of the API or the controller, no
 * Kubernetes client and no MCP SDK (the proxy speaks JSON-RPC itself). bench/sidecar.ts measures what this buys
 * (RSS, start-up).
 */
describe('what tollgate sidecar loads', () => {
  it('cli.ts loads no command up front', () => {
    const { files, packages } = loadedBy(path.join(ROOT, 'cli.ts'));
    expect([...files].map((f) => path.relative(ROOT, f))).toEqual(['cli.ts']);
    expect([...packages]).toEqual([]);
  });

  it("the sidecar's modules: sidecar/, client/, lib/ and a few packages, nothing of the API, the controller, Kubernetes or the MCP SDK", () => {
    const { files, packages } = loadedBy(path.join(ROOT, 'sidecar', 'main.ts'));
    const folders = new Set([...files].map((f) => path.relative(ROOT, f).split(path.sep)[0]));
    expect([...folders].sort()).toEqual(['client', 'lib', 'sidecar']);
    // undici comes through lib/undici-dispatchers.ts (its Agent and Pool, not its entry point): see below.
    expect([...packages].sort()).toEqual(['pino', 'prom-client', 'undici']);
  });

  it('is built into one file: dist/sidecar/main.js loads nothing from node_modules, only Node\'s own modules', async () => {
    // `make build` (package.json's build:sidecar) bundles sidecar/main.ts with what it imports, over tsc's output, so
    // that the pod's process resolves and reads no package at start (bench/sidecar.ts: some 4 MB of RSS and a third
    // of the start-up time; docs/sidecar.md, Footprint).
    const bundle = path.join(ROOT, 'dist', 'sidecar', 'main.js');
    const code = readFileSync(bundle, 'utf8');
    const specifiers = [
      // Statements (esbuild writes them minified: `import{x as y}from"node:http";`), dynamic imports, and the
      // CommonJS code's require calls.
      ...[...code.matchAll(/(?:^|[;}\s])import\s*(?:[\w$*{}\s,]+?\s*from\s*)?["']([^"']+)["']/g)].map((m) => m[1]!),
      ...[...code.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]!),
      ...[...code.matchAll(/\b(?:__)?require\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]!),
    ];
    expect(specifiers).toEqual(expect.arrayContaining(['node:module', 'node:http', 'node:http2', 'worker_threads']));
    // node:sqlite is Node 22's (undici probes for it, for a cache store the sidecar does not make).
    expect(specifiers.filter((s) => !isBuiltin(s) && s !== 'node:sqlite')).toEqual([]);
    // Loaded, it has its classes and reads no file of a package: no CommonJS module in the cache, and no use of
    // the lexer Node runs over a CommonJS module that an ES module imports.
    const script = `
      import { createRequire } from 'node:module';
      const sidecar = await import(${JSON.stringify(pathToFileURL(bundle).href)});
      console.log(JSON.stringify({
        exports: Object.keys(sidecar).sort(),
        cached: Object.keys(createRequire(import.meta.url).cache),
        lexer: process.moduleLoadList.some((m) => m.includes('cjs-module-lexer')),
      }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT });
    const seen = JSON.parse(stdout.trim().split('\n').pop()!) as { exports: string[]; cached: string[]; lexer: boolean };
    expect(seen.exports).toEqual(expect.arrayContaining(['SidecarConfigError', 'sidecarConfig', 'startSidecar']));
    expect(seen.cached).toEqual([]);
    expect(seen.lexer).toBe(false);
  });

  it('talks HTTP with undici\'s Agent and Pool alone: not the whole package, and not Node\'s own copy of undici', async () => {
    // The sidecar's modules loaded and one request made to the API and one to an MCP server, as a pod's first call
    // does; then what the process holds. undici's entry point would load fetch and the rest, and through them
    // Node's bundled undici (a second HTTP client): some 4-5 MB of RSS per pod (bench/sidecar.ts).
    const script = `
      import { createServer } from 'node:http';
      import { createRequire } from 'node:module';
      await import('./sidecar/main.ts');
      const { Transport } = await import('./client/transport.ts');
      const { UpstreamClient } = await import('./sidecar/mcp-upstream.ts');
      const server = createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      const origin = 'http://127.0.0.1:' + server.address().port;
      const api = new Transport(origin, { timeoutMs: 2000, connectTimeoutMs: 2000 });
      const answer = await api.send({ method: 'GET', path: '/auth/me', correlationId: 'c' });
      const upstream = new UpstreamClient(origin + '/mcp');
      await upstream.request('tools/list', {}).catch(() => undefined); // '{}' is no MCP answer: sent and read all the same
      await upstream.close();
      await api.close();
      server.close();
      const cached = Object.keys(createRequire(import.meta.url).cache);
      console.log(JSON.stringify({
        status: answer.status,
        undiciFiles: cached.filter((f) => f.includes('/node_modules/undici/')).length,
        entryPoint: cached.some((f) => f.endsWith('/node_modules/undici/index.js')),
        nodesUndici: process.moduleLoadList.includes('NativeModule internal/deps/undici/undici'),
      }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT });
    const seen = JSON.parse(stdout.trim().split('\n').pop()!) as { status: number; undiciFiles: number; entryPoint: boolean; nodesUndici: boolean };
    expect(seen.status).toBe(200);
    expect(seen.undiciFiles).toBeGreaterThan(0);
    expect(seen.entryPoint).toBe(false);
    expect(seen.nodesUndici).toBe(false);
  });

  it('speaks the protocol versions of the MCP SDK it no longer loads', async () => {
    const sdk = await import('@modelcontextprotocol/sdk/types.js');
    expect([...PROTOCOL_VERSIONS]).toEqual(sdk.SUPPORTED_PROTOCOL_VERSIONS);
    expect(LATEST_PROTOCOL_VERSION).toBe(sdk.LATEST_PROTOCOL_VERSION);
  });
});
