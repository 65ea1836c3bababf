import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cachedBuild } from './processes.js';

/** The bin directory of the virtual environment with Schemathesis (scripts/schemathesis-venv.sh installs it once). */
export const schemathesisBin = () => cachedBuild('schemathesis-venv.sh');

/** A caller of a running `tollgate api` over HTTP that keeps its cookies and sends the CSRF header, as a browser page does. */
export class HttpSession {
  readonly cookies = new Map<string, string>();
  constructor(readonly base: string) {}

  get csrf(): string {
    return this.cookies.get('tollgate_csrf') ?? '';
  }

  /** The Cookie header this session sends. */
  get cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async call<T = any>(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
    const res = await fetch(`${this.base}/api/v1${url}`, {
      method,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(this.cookies.size > 0 ? { cookie: this.cookieHeader } : {}),
        ...(method === 'GET' || !this.csrf ? {} : { 'x-csrf-token': this.csrf }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      const [name, value] = [pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim()];
      if (value === '' || /max-age=0/i.test(c)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  /** Like call, but throws unless the answer has the expected status. */
  async expect<T = any>(status: number, method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<T> {
    const res = await this.call<T>(method, url, body, headers);
    if (res.status !== status) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }
}

export interface FuzzRun {
  /** What the run covers, for the report. */
  name: string;
  /** `st run` options besides the location and the shared ones below. */
  args: string[];
  /** Values for parameters by name (`path.agent_id`), written to the run's schemathesis.toml. */
  parameters?: Record<string, string | number>;
  /** The run's time budget: fuzzing repeats until it is spent. */
  maxSeconds: number;
}

export interface FuzzResult {
  exitCode: number | null;
  /** Schemathesis's report: failures with a curl line to reproduce each, warnings and the summary. */
  output: string;
}

/**
 * Runs `st run` against the OpenAPI document the API serves, in a temporary directory (Hypothesis's example
 * database and Schemathesis's files stay out of the repository). The run's checks decide the exit code: 0
 * when no check failed and nothing errored.
 */
export async function runSchemathesis(bin: string, openapiUrl: string, run: FuzzRun): Promise<FuzzResult> {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-st-'));
  try {
    const config = path.join(dir, 'schemathesis.toml');
    const parameters = Object.entries(run.parameters ?? {}).map(([k, v]) => `${JSON.stringify(k)} = ${JSON.stringify(v)}`);
    writeFileSync(config, parameters.length > 0 ? `[parameters]\n${parameters.join('\n')}\n` : '');
    const args = [
      '--config-file',
      config,
      'run',
      openapiUrl,
      '--max-time',
      String(run.maxSeconds),
      '--request-timeout',
      '10',
      '--no-color',
      ...(process.env.SCHEMATHESIS_SEED ? ['--seed', process.env.SCHEMATHESIS_SEED] : []),
      ...run.args,
    ];
    const child = spawn(path.join(bin, 'st'), args, {
      cwd: dir,
      env: { PATH: `${bin}:${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? dir, SCHEMATHESIS_TELEMETRY: 'false', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    // The budget bounds generation; what is in flight when it ends, and the report, take a little longer.
    const guard = setTimeout(() => child.kill('SIGKILL'), (run.maxSeconds + 90) * 1000);
    const exitCode = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code) => resolve(code));
    });
    clearTimeout(guard);
    return { exitCode, output };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The causes the API logged for its 500s (`request failed` with the error's code and message), most frequent first. */
export function serverErrorCauses(apiOutput: string): string[] {
  const counts = new Map<string, number>();
  for (const line of apiOutput.split('\n')) {
    if (!line.includes('"request failed"')) continue;
    try {
      const entry = JSON.parse(line) as { err?: { code?: string; type?: string; message?: string } };
      const cause = `${entry.err?.code ?? entry.err?.type ?? '?'}: ${(entry.err?.message ?? '').slice(0, 120)}`;
      counts.set(cause, (counts.get(cause) ?? 0) + 1);
    } catch {
      // not a log line
    }
  }
  return [...counts].sort((a, b) => b[1] - a[1]).map(([cause, n]) => `${n}x ${cause}`);
}
