import autocannon from 'autocannon';
import { freePort } from '../test/support/postgres-cluster.js';
import { benchDatabase } from './support.js';
import { atLeast, record } from './results.js';
import { spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';

/**
 * Throughput and latency of signed-in requests through the whole platform path: correlation ID,
 * session, membership and permissions (remembered per process for TOKEN_REVOCATION_CACHE_SECONDS), the
 * shared per-person rate limit (positions claimed ahead in PostgreSQL), the organisation-scoped read,
 * serialisation. `tollgate api` runs as built (dist/cli.js) in its own process on a durable PostgreSQL
 * (synchronous_commit on); autocannon drives it over loopback. BENCH_CPU_PROF=<dir> profiles the API.
 */
export async function benchApiRequests(opts: { seconds: number; connections: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  let api: ReturnType<typeof spawnBuiltTollgate> | undefined;
  try {
    const port = await freePort();
    const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
    api = spawnBuiltTollgate(['api'], {
      PORT: String(port),
      DATABASE_URL: runtimeUrl,
      DATABASE_POOL_MAX: '20',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PERSON_PER_MINUTE: '1000000',
    }, profile);
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);

    // Sign in and create an organisation, as the README walkthrough does.
    const login = await fetch(`${base}/api/v1/auth/dev-login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'bench@example.com' }),
    });
    const onboardingCookies = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    const { csrf_token } = (await login.json()) as { csrf_token: string };
    const onboard = await fetch(`${base}/api/v1/tenants/onboard`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: onboardingCookies, 'x-csrf-token': csrf_token },
      body: JSON.stringify({ name: 'Bench', slug: 'bench', primary_region: 'eu-west', admin_display_name: 'Bench Admin' }),
    });
    if (onboard.status !== 201) throw new Error(`onboard failed: ${onboard.status}`);
    const cookie = onboard.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');

    // The targets (issue 20): signed-in reads within a small factor of /healthz, the floor.
    const targets: Record<string, number | undefined> = { '/api/v1/auth/me': 7000, '/api/v1/users?limit=50': 5000, '/healthz': undefined };
    const results = [];
    for (const [path, target] of Object.entries(targets)) {
      const r = await autocannon({
        url: `${base}${path}`,
        connections: opts.connections,
        duration: opts.seconds,
        headers: { cookie },
      });
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${path}: ${r.non2xx} non-2xx, ${r.errors} errors`);
      const name = `GET ${path.replace('/api/v1', '')}, ${opts.connections} connections`;
      record('api-requests', name, Math.round(r.requests.average), 'requests/s', target === undefined ? undefined : atLeast(target));
      record('api-requests', `${name}, p50`, r.latency.p50, 'ms');
      results.push({
        operation: `GET ${path}`,
        requests_per_second: Math.round(r.requests.average),
        p50_ms: r.latency.p50,
        p99_ms: r.latency.p99,
        requests: r.requests.total,
      });
    }
    return results;
  } finally {
    await stop(api);
    cluster.stop();
  }
}
