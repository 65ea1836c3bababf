import { readFileSync } from 'node:fs';
import path from 'node:path';
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
    expect([...packages].sort()).toEqual(['pino', 'prom-client', 'undici']);
  });

  it('speaks the protocol versions of the MCP SDK it no longer loads', async () => {
    const sdk = await import('@modelcontextprotocol/sdk/types.js');
    expect([...PROTOCOL_VERSIONS]).toEqual(sdk.SUPPORTED_PROTOCOL_VERSIONS);
    expect(LATEST_PROTOCOL_VERSION).toBe(sdk.LATEST_PROTOCOL_VERSION);
  });
});
