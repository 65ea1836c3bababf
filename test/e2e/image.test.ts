import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { freshDatabase } from '../support/harness.js';
import { loopbackServingCert, startKube, type KubeCluster } from '../support/kube-cluster.js';
import { HttpClient } from '../support/http-client.js';
import { eventually, installCrds, kubectlFor } from '../support/kubectl.js';
import { startPaymentsMcpServer } from '../support/mcp-server.js';
import { freePort } from '../support/postgres-cluster.js';
import { ROOT, stop, waitForHttp } from '../support/processes.js';

/**
 * The container image, without a container engine (none runs here). First the Dockerfile itself, parsed:
 * multi-stage, the same base pinned by digest in both stages, production dependencies only in the runtime
 * stage, a non-root numeric user, the CLI as entrypoint, a .dockerignore that keeps the machine's trees out.
 * Then its two stages reproduced in a temp dir, instruction by instruction as the Dockerfile lists them (so
 * the test and the Dockerfile cannot drift): the build stage's COPYs and build command, then the runtime
 * stage's COPYs and its `npm ci --omit=dev` against the registry. From that tree `api`, `worker`, `sidecar`
 * and `controller` start and do real work (sign-in and registry writes, a job queue on PostgreSQL, an MCP call
 * through the proxy, a reconcile on a real Kubernetes API server), so that a runtime import of a dev
 * dependency, or a data file the build stage forgets, fails here rather than in a cluster.
 */

const exec = promisify(execFile);
const DOCKERFILE = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const PKG = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  bin: Record<string, string>;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

// -- A small Dockerfile parser: instructions with their continuation lines joined, comments dropped, by stage.

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  /** The image reference of FROM, and the stage's name after AS. */
  image: string;
  name?: string;
  instructions: Instruction[];
}

function parseDockerfile(text: string): Stage[] {
  const instructions: Instruction[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    // Comment lines end nothing: Docker drops them, even between continuation lines.
    if (line.startsWith('#') || (line === '' && pending === '')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    const full = `${pending}${line}`.trim();
    pending = '';
    if (!full) continue;
    const m = /^([A-Za-z]+)\s+([\s\S]*)$/.exec(full);
    if (!m) throw new Error(`Dockerfile: cannot read "${full}"`);
    instructions.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.trim() });
  }
  if (pending) throw new Error('Dockerfile: ends inside a continuation line');
  const stages: Stage[] = [];
  for (const i of instructions) {
    if (i.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(i.args);
      if (!m) throw new Error(`Dockerfile: cannot read FROM ${i.args}`);
      stages.push({ image: m[1]!, name: m[2], instructions: [] });
    } else if (i.keyword === 'ARG' && stages.length === 0) {
      continue; // a global ARG before the first FROM
    } else {
      const stage = stages.at(-1);
      if (!stage) throw new Error(`Dockerfile: ${i.keyword} before the first FROM`);
      stage.instructions.push(i);
    }
  }
  return stages;
}

/** Words of a shell-form argument list, with "double" and 'single' quotes. */
function words(args: string): string[] {
  return [...args.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
}

interface Copy {
  from?: string;
  sources: string[];
  dest: string;
}
function copyOf(i: Instruction): Copy {
  const parts = i.args.startsWith('[') ? (JSON.parse(i.args) as string[]) : words(i.args);
  let from: string | undefined;
  const rest: string[] = [];
  for (const p of parts) {
    if (p.startsWith('--from=')) from = p.slice('--from='.length);
    else if (!p.startsWith('--')) rest.push(p);
  }
  if (rest.length < 2) throw new Error(`COPY ${i.args}: needs a source and a destination`);
  return { from, sources: rest.slice(0, -1), dest: rest.at(-1)! };
}

function envOf(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of stage.instructions.filter((x) => x.keyword === 'ENV')) {
    for (const w of words(i.args)) {
      const eq = w.indexOf('=');
      if (eq < 1) throw new Error(`ENV ${i.args}: use the KEY=value form`);
      env[w.slice(0, eq)] = w.slice(eq + 1);
    }
  }
  return env;
}

/** The stage's working directory after its WORKDIR instructions (Docker's default: /). */
function workdirOf(stage: Stage): string {
  let dir = '/';
  for (const i of stage.instructions.filter((x) => x.keyword === 'WORKDIR')) dir = path.posix.resolve(dir, i.args);
  return dir;
}

/** The shell commands of RUN lines, each `a && b` split into its commands. */
function commandsOf(stage: Stage): string[] {
  return stage.instructions
    .filter((i) => i.keyword === 'RUN')
    .flatMap((i) => i.args.replace(/^(--\S+\s+)+/, '').split('&&').map((c) => c.trim()));
}

const stages = parseDockerfile(DOCKERFILE);
const runtime = stages.at(-1)!;
const fromBuild = runtime.instructions.filter((i) => i.keyword === 'COPY').map(copyOf).filter((c) => c.from !== undefined);
const build = stages.find((s) => s.name === fromBuild[0]?.from);

describe('the Dockerfile', () => {
  it('has a build stage and a runtime stage; the runtime copies only build output from it', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(build, 'the runtime stage copies --from a named earlier stage').toBeDefined();
    expect(build).not.toBe(runtime);
    for (const c of fromBuild) {
      expect(c.from).toBe(build!.name);
      for (const s of c.sources) {
        expect(s, 'no node_modules from the build stage: the runtime installs its own').not.toMatch(/node_modules/);
        // Not the whole build directory, which holds the dev tree.
        expect(path.posix.resolve(workdirOf(build!), s)).not.toBe(workdirOf(build!));
      }
    }
  });

  it('pins one base image by digest, with no registry host, in both stages', () => {
    for (const s of stages) expect(s.image).toMatch(/^node:20-bookworm-slim@sha256:[0-9a-f]{64}$/);
    expect(runtime.image).toBe(build!.image);
    // No host in front: the builder's configured registry resolves it.
    expect(DOCKERFILE).not.toMatch(/\b(docker\.io|ghcr\.io|quay\.io|gcr\.io|registry\.)/);
  });

  it('build stage: the dev install, every source root of tsconfig.json, and the build script with its data files', () => {
    const commands = commandsOf(build!);
    expect(commands.some((c) => /^npm ci\b/.test(c) && !c.includes('--omit=dev'))).toBe(true);
    const copied = build!.instructions.filter((i) => i.keyword === 'COPY').map(copyOf).flatMap((c) => c.sources);
    const tsconfig = JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8')) as { include: string[] };
    const roots = new Set(tsconfig.include.map((p) => p.split('/')[0]!));
    for (const root of [...roots, 'tsconfig.json', 'package.json', 'package-lock.json']) expect(copied, root).toContain(root);
    // The build command is package.json's `build` script, which must copy what the Makefile's dist/cli.js rule copies.
    expect(commands).toContain('npm run build');
    const script = PKG.scripts.build!;
    const makefile = readFileSync(path.join(ROOT, 'Makefile'), 'utf8');
    const dataFiles = [/^FRAMEWORKS := \$\(wildcard (\S+)\)/m, /^PRICING := (\S+)/m].map((re) => re.exec(makefile)?.[1]);
    for (const f of dataFiles) {
      expect(f, 'the Makefile names the data files').toBeDefined();
      expect(script).toContain(f!);
    }
    expect(script).toMatch(/^tsc -p tsconfig\.json\b/);
  });

  it('runtime stage: production dependencies only from the lockfile, NODE_ENV=production, writable paths under /tmp', () => {
    const commands = commandsOf(runtime);
    const installs = commands.filter((c) => /^npm (ci|install|i)\b/.test(c));
    expect(installs).toHaveLength(1);
    expect(installs[0]).toMatch(/^npm ci\b/);
    expect(words(installs[0]!)).toContain('--omit=dev');
    const env = envOf(runtime);
    expect(env.NODE_ENV).toBe('production');
    // The app writes only the embedded database (DATA_DIR); with a read-only root that must be under /tmp.
    expect(env.DATA_DIR).toMatch(/^\/tmp\//);
    expect(env.HOME ?? '/tmp').toMatch(/^\/tmp\b/);
  });

  it('runs as the numeric non-root user the chart expects, with the CLI as ENTRYPOINT', () => {
    const users = runtime.instructions.filter((i) => i.keyword === 'USER');
    const user = users.at(-1)?.args ?? 'root';
    expect(user).toMatch(/^\d+(:\d+)?$/); // numeric, so that runAsNonRoot can verify it
    const [uid, gid] = user.split(':').map(Number);
    const values = parseYaml(readFileSync(path.join(ROOT, 'charts/tollgate/values.yaml'), 'utf8')) as {
      podSecurityContext: { runAsUser: number; runAsGroup: number };
      image: { repository: string };
    };
    expect(uid).not.toBe(0);
    expect(uid).toBe(values.podSecurityContext.runAsUser);
    if (gid !== undefined) expect(gid).toBe(values.podSecurityContext.runAsGroup);
    expect(values.image.repository).toBe('tollgate');

    const entrypoint = runtime.instructions.filter((i) => i.keyword === 'ENTRYPOINT').at(-1);
    expect(entrypoint, 'an ENTRYPOINT').toBeDefined();
    const argv = JSON.parse(entrypoint!.args) as string[]; // exec form: signals reach node, not a shell
    const cli = path.posix.join(workdirOf(runtime), PKG.bin.tollgate!);
    expect(argv).toEqual(['node', cli]);
    // The compiled CLI lands where the entrypoint looks for it.
    const dist = fromBuild.find((c) => c.sources.some((s) => path.posix.basename(s) === 'dist'));
    expect(path.posix.resolve(workdirOf(runtime), dist!.dest)).toBe(path.posix.dirname(cli));
  });

  it('.dockerignore keeps node_modules, .git, .cache, .data and dist out of the build context', () => {
    const patterns = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.replace(/^\/+|\/+$/g, ''));
    for (const p of ['node_modules', '.git', '.cache', '.data', 'dist']) expect(patterns, p).toContain(p);
    // Nested ones too (a package's own node_modules under a source folder).
    expect(patterns).toContain('**/node_modules');
    expect(patterns.some((p) => p.startsWith('!'))).toBe(false);
  });
});

// -- The stages reproduced in a temp dir.

describe('the image reproduced in a temp dir: its runtime stage starts every command', () => {
  const procs: ChildProcess[] = [];
  let dir = '';
  let buildDir = '';
  let appDir = '';
  let cluster: KubeCluster | undefined;
  let payments: Awaited<ReturnType<typeof startPaymentsMcpServer>> | undefined;
  let db: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  let apiUrl = '';
  // What the api test creates for the sidecar and the controller.
  let identityFiles: Record<string, string> = {};
  let controllerCredential: Record<string, string> = {};
  const log: string[] = [];
  // The reproduced /app's files (path, size, mtime) before any command ran.
  let appFiles = new Map<string, string>();

  /** `node dist/cli.js <command>` from the reproduced /app, with the image's ENV and the test's settings. */
  function tollgate(command: string, env: Record<string, string>) {
    const child = spawn(process.execPath, [path.join(appDir, PKG.bin.tollgate!), command], {
      cwd: appDir,
      env: {
        PATH: process.env.PATH ?? '',
        ...envOf(runtime),
        // The image's paths, moved into the temp dir; loopback instead of every interface.
        HOME: path.join(dir, 'home'),
        DATA_DIR: path.join(dir, 'data'),
        HOST: '127.0.0.1',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    procs.push(child);
    return Object.assign(child, { output: () => out, command });
  }

  async function sh(command: string, cwd: string, timeoutMs: number): Promise<void> {
    const started = Date.now();
    try {
      await exec('sh', ['-c', command], {
        cwd,
        timeout: timeoutMs,
        maxBuffer: 64 << 20,
        // npm's cache in the temp dir: nothing is kept, or taken, from the machine's cache.
        env: { PATH: process.env.PATH ?? '', HOME: path.join(dir, 'home'), npm_config_cache: path.join(dir, 'npm-cache'), npm_config_update_notifier: 'false' },
      });
    } catch (err) {
      const e = err as Error & { stdout?: string; stderr?: string };
      throw new Error(`RUN ${command} (in ${cwd}) failed: ${[e.stdout, e.stderr].filter(Boolean).join('\n') || e.message}`);
    }
    log.push(`${command}: ${Date.now() - started} ms`);
  }

  /** COPY of the build context (the checkout) or of an earlier stage's reproduced directory into `to`. */
  function copy(c: Copy, to: string, toWorkdir: string, stageDirs: Record<string, { dir: string; workdir: string }>) {
    for (const s of c.sources) {
      const source = c.from
        ? path.join(stageDirs[c.from]!.dir, path.posix.relative(stageDirs[c.from]!.workdir, path.posix.resolve(stageDirs[c.from]!.workdir, s)))
        : path.join(ROOT, s);
      if (!existsSync(source)) throw new Error(`COPY ${c.from ? `--from=${c.from} ` : ''}${s}: ${source} does not exist`);
      const destInImage = path.posix.resolve(toWorkdir, c.dest);
      const target = path.join(to, path.posix.relative(toWorkdir, destInImage));
      // COPY a b/ (or several sources) puts a inside b; COPY dir ./dir copies the directory's contents.
      const into = c.dest.endsWith('/') || c.sources.length > 1;
      cpSync(source, into ? path.join(target, path.basename(s)) : target, { recursive: true });
    }
  }

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tollgate-image-'));
    mkdirSync(path.join(dir, 'home'));
    // Node resolves a bare import by walking up the directories: none above the reproduced /app may hold a
    // node_modules, or a dependency missing from the image could be found there.
    for (let d = path.dirname(dir); ; d = path.dirname(d)) {
      expect(existsSync(path.join(d, 'node_modules')), `${d}/node_modules exists: it would hide a missing dependency`).toBe(false);
      if (d === path.dirname(d)) break;
    }
    const kube = startKube();
    kube.catch(() => undefined);

    // The build stage. Its dev install is the checkout's own node_modules (the same package-lock.json, installed
    // by `make deps`), linked rather than fetched again; every other instruction runs as written.
    buildDir = path.join(dir, 'build');
    mkdirSync(buildDir);
    for (const i of build!.instructions) {
      if (i.keyword === 'COPY') copy(copyOf(i), buildDir, workdirOf(build!), {});
      if (i.keyword !== 'RUN') continue;
      for (const command of commandsOf({ ...build!, instructions: [i] })) {
        if (/^npm ci\b/.test(command)) symlinkSync(path.join(ROOT, 'node_modules'), path.join(buildDir, 'node_modules'), 'dir');
        else await sh(command, buildDir, 5 * 60_000);
      }
    }

    // The runtime stage: its COPYs, and its `npm ci` exactly as written (the other commands of that RUN clean
    // npm's cache and remove npm from the system image: nothing to reproduce outside a container).
    appDir = path.join(dir, 'app');
    mkdirSync(appDir);
    const stageDirs = { [build!.name!]: { dir: buildDir, workdir: workdirOf(build!) } };
    for (const i of runtime.instructions) {
      if (i.keyword === 'COPY') copy(copyOf(i), appDir, workdirOf(runtime), stageDirs);
      if (i.keyword !== 'RUN') continue;
      for (const command of commandsOf({ ...runtime, instructions: [i] })) {
        if (/^npm ci\b/.test(command)) await sh(command, appDir, 15 * 60_000);
      }
    }
    appFiles = filesOf(appDir);
    cluster = await kube;
  }, 30 * 60_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => stop(p)));
    await payments?.close();
    await db?.drop();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (log.length) console.info(`image reproduction: ${log.join('; ')}`);
  }, 120_000);

  it('installs no dev-only package, and every package the compiled code imports is a dependency that resolves there', async () => {
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; optional?: boolean }>;
    };
    const installed = (p: string) => existsSync(path.join(appDir, p, 'package.json'));
    const devOnly = Object.entries(lock.packages).filter(([p, v]) => p.startsWith('node_modules/') && v.dev);
    expect(devOnly.length).toBeGreaterThan(0);
    expect(devOnly.filter(([p]) => installed(p)).map(([p]) => p)).toEqual([]);
    for (const name of ['tsx', 'vitest', 'typescript']) expect(installed(`node_modules/${name}`), name).toBe(false);
    for (const name of Object.keys(PKG.dependencies)) expect(installed(`node_modules/${name}`), name).toBe(true);

    // Every bare specifier of dist/, static or dynamic, names a production dependency and resolves from /app.
    const specifiers = new Set<string>();
    const walk = (d: string) => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.name.endsWith('.js')) {
          const code = readFileSync(p, 'utf8');
          // tsc writes import and export declarations at the start of a line; dynamic imports anywhere.
          const statics = /^(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"\n]+)['"];?$|^import\s*['"]([^'"\n]+)['"];?$/gm;
          for (const m of code.matchAll(statics)) specifiers.add((m[1] ?? m[2])!);
          for (const m of code.matchAll(/\bimport\(\s*['"]([^'"\n]+)['"]\s*\)/g)) specifiers.add(m[1]!);
          // CommonJS packages loaded through createRequire(import.meta.url)('name').
          for (const m of code.matchAll(/\bcreateRequire\([^)]*\)\(\s*['"]([^'"\n]+)['"]\s*\)|\brequire\(\s*['"]([^'"\n]+)['"]\s*\)/g)) specifiers.add((m[1] ?? m[2])!);
        }
      }
    };
    walk(path.join(appDir, 'dist'));
    const bare = [...specifiers].filter((s) => !s.startsWith('.') && !s.startsWith('/') && !isBuiltin(s));
    expect(bare.length).toBeGreaterThan(10);
    const packageOf = (s: string) => s.split('/').slice(0, s.startsWith('@') ? 2 : 1).join('/');
    const notProduction = bare.filter((s) => !(packageOf(s) in PKG.dependencies));
    expect(notProduction, 'imported by dist/ but not in package.json dependencies').toEqual([]);
    const resolver = path.join(appDir, 'dist', 'resolve-check.mjs');
    writeFileSync(resolver, `for (const s of ${JSON.stringify(bare)}) { try { import.meta.resolve(s); } catch (e) { console.log(s + ': ' + e.message); } }\n`);
    const { stdout } = await exec(process.execPath, [resolver], { cwd: appDir, env: { PATH: process.env.PATH ?? '' } });
    rmSync(resolver);
    expect(stdout.trim(), 'specifiers that do not resolve in the runtime tree').toBe('');
  });

  it('api: the embedded database under DATA_DIR, /healthz and /readyz, the web console, sign-in, the data files, registry writes', async () => {
    const port = await freePort();
    const api = tollgate('api', { PORT: String(port), LOG_LEVEL: 'warn', ALLOW_PRIVATE_ENDPOINTS: 'true' });
    apiUrl = `http://127.0.0.1:${port}`;
    await waitForHttp(`${apiUrl}/readyz`, 120_000, api);
    expect((await fetch(`${apiUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${apiUrl}/readyz`)).status).toBe(200);
    expect(existsSync(path.join(dir, 'data', 'pgdata'))).toBe(true);
    // The web console the build stage bundled (dist/console), served at / with the strict policy.
    const page = await fetch(`${apiUrl}/approvals`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(await page.text())?.[1];
    expect(script, 'the page names its script').toBeDefined();
    expect((await fetch(`${apiUrl}${script}`)).headers.get('cache-control')).toBe('public, max-age=31536000, immutable');

    const http = new HttpClient(`${apiUrl}/api/v1`);
    expect((await http.post('/auth/dev-login', { email: 'image@example.com' })).status).toBe(200);
    const onboard = await http.post('/tenants/onboard', { name: 'Image', slug: 'image-test', primary_region: 'eu-west', admin_display_name: 'Ima Ge' });
    expect(onboard.status).toBe(201);
    // pricing.json and the framework catalogues: files the build stage must copy beside the compiled modules.
    const pricing = await http.get('/public/pricing');
    expect(pricing.status).toBe(200);
    const frameworks = await http.get('/governance/frameworks');
    expect(frameworks.status).toBe(200);
    expect(JSON.stringify(frameworks.json)).toMatch(/NIST|ISO|EU/);

    payments = await startPaymentsMcpServer();
    const server = await http.post('/mcp-servers', { name: 'payments', endpoint: payments.url });
    expect(server.status).toBe(201);
    const tool = await http.post('/tools', { tool_key: 'payments.lookup', name: 'Look up a payee', mcp_server_id: server.json.id, privilege_class: 'read' });
    expect(tool.status).toBe(201);
    const agent = await http.post('/agents', { name: 'Image agent' });
    expect(agent.status).toBe(201);
    expect((await http.post(`/agents/${agent.json.id}/permissions`, { target_kind: 'tool', target_id: tool.json.id, actions: ['invoke'] })).status).toBe(201);
    const identity = await http.post(`/agents/${agent.json.id}/identities`, {});
    expect(identity.status).toBe(201);
    identityFiles = { 'client-id': identity.json.client_id, 'client-secret': identity.json.client_secret };
    const sa = await http.post('/service-accounts', { name: 'image-controller' });
    expect(sa.status).toBe(201);
    controllerCredential = { TOLLGATE_CLIENT_ID: sa.json.client_id, TOLLGATE_CLIENT_SECRET: sa.json.client_secret };
  }, 180_000);

  it('sidecar: answers /healthz and forwards an allowed MCP tools/call through its proxy', async () => {
    expect(identityFiles['client-id'], 'the api test created the identity').toBeDefined();
    const identityDir = path.join(dir, 'identity');
    mkdirSync(identityDir);
    for (const [file, value] of Object.entries(identityFiles)) writeFileSync(path.join(identityDir, file), `${value}\n`, { mode: 0o600 });
    const port = await freePort();
    const sidecar = tollgate('sidecar', {
      TOLLGATE_API_URL: apiUrl,
      TOLLGATE_IDENTITY_DIR: identityDir,
      TOLLGATE_SIDECAR_PORT: String(port),
      TOLLGATE_MCP_UPSTREAMS: JSON.stringify([{ name: 'payments', url: payments!.url, toolPrefix: 'payments' }]),
      TOLLGATE_SIDECAR_METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
    });
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, 30_000, sidecar);
    const client = new McpClient({ name: 'image-test-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp/payments`)));
    try {
      const result = await client.callTool({ name: 'lookup', arguments: { payee: 'acme' } });
      expect(result.content).toEqual([{ type: 'text', text: 'payee acme: ACME Supplies Ltd' }]);
      expect(payments!.calls).toEqual([{ name: 'lookup', args: { payee: 'acme' } }]);
    } finally {
      await client.close();
    }
  }, 60_000);

  it('worker: on PostgreSQL as the runtime role, /healthz and /readyz', async () => {
    db = await freshDatabase();
    const port = await freePort();
    const worker = tollgate('worker', { DATABASE_URL: db.runtimeUrl, WORKER_PORT: String(port), LOG_LEVEL: 'info' });
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, worker);
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    expect(worker.output()).toContain('tollgate worker ready');
  }, 90_000);

  it('controller: takes the Lease, serves the webhook and makes an applied MCPServer Ready on a real API server', async () => {
    expect(controllerCredential.TOLLGATE_CLIENT_ID, 'the api test created the service account').toBeDefined();
    const kubectl = kubectlFor(cluster!);
    // Retried: kubectl wait fails instead of waiting while a just-created CRD has no conditions yet.
    await eventually(() => installCrds(cluster!), 60_000, 'the CRDs installed');
    const certDir = path.join(dir, 'webhook-tls');
    await loopbackServingCert(cluster!, certDir);
    const webhookPort = await freePort();
    const controller = tollgate('controller', {
      ...controllerCredential,
      KUBECONFIG: cluster!.kubeconfigPath,
      TOLLGATE_API_URL: apiUrl,
      TOLLGATE_LEASE_NAMESPACE: 'default',
      TOLLGATE_LEASE_SECONDS: '3',
      TOLLGATE_WEBHOOK_CERT_DIR: certDir,
      TOLLGATE_WEBHOOK_PORT: String(webhookPort),
      TOLLGATE_SIDECAR_IMAGE: 'tollgate:test',
      POD_NAME: 'image-controller',
      // Any free port: other tests on this machine may hold the default.
      TOLLGATE_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
    });
    await kubectl('apply', '-f', path.join(ROOT, 'examples', 'mcpserver.yaml'));
    try {
      await eventually(async () => {
        if (controller.exitCode !== null) throw new Error(`controller exited ${controller.exitCode}: ${controller.output()}`);
        const o = JSON.parse(await kubectl('get', 'mcpservers.tollgate.dev', 'payments-mcp', '-n', 'default', '-o', 'json'));
        return (o.status?.conditions as { type: string; status: string }[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True');
      }, 30_000, 'the MCPServer Ready');
    } catch (err) {
      throw new Error(`${(err as Error).message}\n--- controller\n${controller.output()}`);
    }
    expect(controller.output()).toContain('controller starting');
    // The webhook's /healthz over HTTPS, trusting the cluster CA that signed its certificate.
    const res = await new Promise<number>((resolve, reject) => {
      httpsGet(`https://127.0.0.1:${webhookPort}/healthz`, { ca: cluster!.caPem }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      }).on('error', reject);
    });
    expect(res).toBe(200);
  }, 120_000);

  it('wrote nothing into /app: a read-only root filesystem holds (the tests run as root, so they compare instead of chmod)', () => {
    const now = filesOf(appDir);
    const changed = [...new Set([...now.keys(), ...appFiles.keys()])].filter((f) => now.get(f) !== appFiles.get(f));
    expect(appFiles.size).toBeGreaterThan(1000);
    expect(changed).toEqual([]);
  });
});

/** Every file under dir (directories walked, not listed) with its size and modification time. */
function filesOf(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        const st = statSync(p);
        files.set(path.relative(dir, p), `${st.size} ${st.mtimeMs}`);
      }
    }
  };
  walk(dir);
  return files;
}

