import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { loadKubeConfig } from '../controller/kube.js';
import { freePort } from '../test/support/postgres-cluster.js';
import { startKube } from '../test/support/kube-cluster.js';
import { installCrds, kubectlRaw } from '../test/support/kubectl.js';
import { spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';
import { atMost, record } from './results.js';
import { adminSession, benchDatabase } from './support.js';

type Listed = { items: { status?: { conditions?: { type: string; status: string }[] } }[] };

/**
 * bench/controller: `kubectl apply` of N Agent resources (one file, server-side apply) on the test API
 * server, and the time until every one is Ready, with `tollgate api` on a durable PostgreSQL and
 * `tollgate controller` as their own processes, all on this machine.
 */
export async function benchController(opts: { agents: number; workers: number }) {
  const { cluster: pg, runtimeUrl } = await benchDatabase();
  const kube = await startKube();
  let api: ReturnType<typeof spawnBuiltTollgate> | undefined;
  let controller: ReturnType<typeof spawnBuiltTollgate> | undefined;
  try {
    await installCrds(kube);
    const port = await freePort();
    api = spawnBuiltTollgate(['api'], {
      PORT: String(port),
      DATABASE_URL: runtimeUrl,
      DATABASE_POOL_MAX: '20',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PERSON_PER_MINUTE: '1000000',
      RATE_LIMIT_TOKEN_PER_MINUTE: '1000000',
    });
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);
    const { call } = await adminSession(base, pg.adminUrl('tollgate'), 'Bench controller');
    const sa = await call('POST', '/service-accounts', { name: 'bench-controller' });
    // BENCH_CPU_PROF=<dir>: the controller writes a V8 CPU profile there when it stops.
    const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
    controller = spawnBuiltTollgate(['controller'], {
      KUBECONFIG: kube.kubeconfigPath,
      TOLLGATE_API_URL: base,
      TOLLGATE_CLIENT_ID: sa.client_id,
      TOLLGATE_CLIENT_SECRET: sa.client_secret,
      TOLLGATE_LEASE_NAMESPACE: 'default',
      TOLLGATE_WORKERS: String(opts.workers),
      LOG_LEVEL: 'warn',
    }, profile);
    const custom = loadKubeConfig({ KUBECONFIG: kube.kubeconfigPath }).makeApiClient(CustomObjectsApi);
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: Array.from({ length: opts.agents }, (_, i) => ({
        apiVersion: 'tollgate.dev/v1alpha1',
        kind: 'Agent',
        metadata: { name: `bench-agent-${i}`, namespace: 'default' },
        spec: {
          name: `Bench agent ${i}`,
          purpose: 'Benchmark the controller',
          environment: 'development',
          tags: ['bench'],
          owners: [{ name: 'Bench Owner', email: 'bench.owner@example.com' }],
        },
      })),
    };
    const file = path.join(kube.dir, 'agents.json');
    writeFileSync(file, JSON.stringify(list));

    const started = Date.now();
    await kubectlRaw(kube, ['apply', '--server-side', '--field-manager=bench', '-f', file]);
    const appliedMs = Date.now() - started;
    let ready = 0;
    while (ready < opts.agents) {
      if (controller.exitCode !== null) throw new Error(`the controller exited: ${controller.output()}`);
      if (Date.now() - started > 10 * 60_000) throw new Error(`only ${ready} of ${opts.agents} Ready after 10 minutes`);
      await new Promise((r) => setTimeout(r, 1000)); // polling less often leaves the CPU to what is measured
      const listed = (await custom.listNamespacedCustomObject({
        group: 'tollgate.dev',
        version: 'v1alpha1',
        plural: 'agents',
        namespace: 'default',
      })) as Listed;
      ready = listed.items.filter((o) => o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;
    }
    const readyMs = Date.now() - started;
    const registered = (await call('GET', '/agents?limit=1&q=bench-agent-0')).items.length;
    if (registered !== 1) throw new Error('bench-agent-0 is not in the registry');
    record('controller', `${opts.agents} Agent resources applied until all Ready`, Number((readyMs / 1000).toFixed(1)), 's', atMost(60));
    return [
      {
        agents: opts.agents,
        controller_workers: opts.workers,
        kubectl_apply_s: Number((appliedMs / 1000).toFixed(1)),
        all_ready_s: Number((readyMs / 1000).toFixed(1)),
        agents_per_second: Math.round(opts.agents / (readyMs / 1000)),
        target_s: 60,
        meets_target: readyMs <= 60_000,
      },
    ];
  } finally {
    await stop(controller);
    await stop(api);
    await kube.stop();
    pg.stop();
  }
}
