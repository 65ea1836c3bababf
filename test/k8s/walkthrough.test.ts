import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { kubectlFor } from '../support/kubectl.js';
import { freePort } from '../support/postgres-cluster.js';
import { ROOT, spawnTollgate, stop, waitForHttp } from '../support/processes.js';

const run = promisify(execFile);
const guide = readFileSync(path.join(ROOT, 'docs', 'kubernetes.md'), 'utf8');

/**
 * docs/kubernetes.md's newcomer walk, verbatim: `tollgate api` as `make run` starts it (embedded database, the demo
 * organisation, development sign-in), a real kube-apiserver, and the walk's commands run by bash with kubectl, curl
 * and jq; only the port and the paths of the repository differ. All four examples must end Ready.
 */
describe('docs/kubernetes.md: from make run to four Ready examples', () => {
  let dir: string;
  let cluster: KubeCluster;
  let api: ReturnType<typeof spawnTollgate>;
  let port: number;
  let controllerPid: number | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tollgate-k8s-walk-'));
    cluster = await startKube();
    port = await freePort();
    // What `make run` starts (Makefile: SEED_DEMO=true node dist/cli.js api), on a port of its own.
    api = spawnTollgate(['api'], { PORT: String(port), DATA_DIR: path.join(dir, 'data'), SEED_DEMO: 'true' });
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000, api);
  }, 240_000);

  afterAll(async () => {
    if (controllerPid) {
      try {
        process.kill(controllerPid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    await stop(api);
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('signs in, creates the service account, installs the CRDs, starts the controller and gets four Ready objects', async () => {
    const block = /<!-- walkthrough:start -->\s*```bash\n([\s\S]*?)```\s*<!-- walkthrough:end -->/.exec(guide)?.[1];
    expect(block).toBeDefined();
    const script = `set -euo pipefail\n${block!
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)
      .replaceAll('node dist/cli.js', `node ${path.join(ROOT, 'dist', 'cli.js')}`)
      .replaceAll('-f crds/', `-f ${path.join(ROOT, 'crds')}/`)
      .replaceAll('-f examples/', `-f ${path.join(ROOT, 'examples')}/`)}\necho "controller-pid $!"\n`;
    let stdout: string;
    try {
      ({ stdout } = await run('bash', ['-c', script], {
        cwd: dir,
        timeout: 200_000,
        env: { PATH: process.env.PATH ?? '', HOME: dir, KUBECONFIG: cluster.kubeconfigPath },
      }));
    } catch (err) {
      const log = (() => {
        try {
          return readFileSync(path.join(dir, 'controller.log'), 'utf8');
        } catch {
          return '(no controller.log)';
        }
      })();
      throw new Error(`the walk failed: ${(err as Error).message}\ncontroller.log:\n${log.slice(-4000)}`);
    }
    controllerPid = Number(/controller-pid (\d+)/.exec(stdout)?.[1]);

    // kubectl wait: the condition met for each of the four examples.
    for (const object of ['agent.tollgate.dev/payments-assistant', 'tool.tollgate.dev/', 'mcpserver.tollgate.dev/payments-mcp', 'policy.tollgate.dev/payments-limits']) {
      expect(stdout).toMatch(new RegExp(`${object.replaceAll('.', '\\.')}\\S* condition met`));
    }
    expect(stdout.match(/^(agent|tool|mcpserver|policy)\.tollgate\.dev\/\S+ condition met$/gm)).toHaveLength(4);
    // Tollgate holds the production agent, registered by the controller.
    expect(stdout).toContain('{"slug":"payments-assistant","environment":"production","source":"kubernetes"}');

    // And the objects say so themselves: Ready=True with their registry ids.
    const kubectl = kubectlFor(cluster);
    for (const plural of ['agents', 'tools', 'mcpservers', 'policies']) {
      const list = JSON.parse(await kubectl('get', `${plural}.tollgate.dev`, '-n', 'default', '-o', 'json')) as {
        items: { status?: { registryId?: string; conditions?: { type: string; status: string }[] } }[];
      };
      expect(list.items, plural).toHaveLength(1);
      const status = list.items[0]!.status;
      expect(status?.conditions?.find((c) => c.type === 'Ready')?.status, plural).toBe('True');
      expect(status?.registryId, plural).toMatch(/^[0-9a-f-]{36}$/);
    }
  }, 240_000);
});
