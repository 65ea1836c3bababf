import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { ROOT } from '../support/processes.js';

const exec = promisify(execFile);
const KUBECTL = process.env.KUBECTL ?? 'kubectl';

/** The kube-apiserver release that test/k8s/go.mod pins. */
const PINNED = /^\s*k8s\.io\/kubernetes\s+(v\S+)/m.exec(readFileSync(path.join(ROOT, 'test/k8s/go.mod'), 'utf8'))?.[1];

let cluster: KubeCluster | undefined;

async function kubectl(...args: string[]): Promise<string> {
  if (!cluster) throw new Error('no cluster');
  try {
    const { stdout } = await exec(
      KUBECTL,
      ['--kubeconfig', cluster.kubeconfigPath, '--cache-dir', path.join(cluster.dir, 'kubectl-cache'), ...args],
      { timeout: 60_000, env: { ...process.env, KUBECONFIG: '' } },
    );
    return stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`kubectl ${args.join(' ')}: ${e.stderr || e.message}`);
  }
}

function manifest(name: string, body: object): string {
  const file = path.join(cluster!.dir, name);
  writeFileSync(file, JSON.stringify(body)); // kubectl reads JSON manifests as YAML
  return file;
}

/** Resident memory of a process, now and at its peak (Linux). */
function memory(pid: number): string {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mib = (field: string) => Math.round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN) / 1024);
  return `${mib('VmRSS')} MiB (peak ${mib('VmHWM')} MiB)`;
}

describe('a real Kubernetes API server (kube-apiserver + etcd on loopback)', () => {
  beforeAll(async () => {
    // Builds kube-apiserver and etcd first on a machine whose cache lacks them (~8 min on 2 cores);
    // `make kube` does that before the tests, so this is a cache hit there.
    cluster = await startKube();
    console.log(`kube-apiserver ready at ${cluster.server}: binaries ${cluster.timings.binariesMs} ms, start ${cluster.timings.startMs} ms`);
  }, 30 * 60_000);

  afterAll(async () => {
    if (cluster) {
      console.log(`resident memory: kube-apiserver ${memory(cluster.pids.apiserver)}, etcd ${memory(cluster.pids.etcd)}`);
    }
    await cluster?.stop();
  }, 60_000);

  it('serves the pinned release', async () => {
    expect(PINNED).toMatch(/^v1\.\d+\.\d+$/);
    const version = JSON.parse(await kubectl('version', '-o', 'json')) as { serverVersion: { gitVersion: string } };
    expect(version.serverVersion.gitVersion).toBe(PINNED);
  });

  it('applies a CustomResourceDefinition and a custom resource of it, and gets it back', async () => {
    const crd = manifest('crd.json', {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'widgets.smoke.tollgate.dev' },
      spec: {
        group: 'smoke.tollgate.dev',
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
        versions: [
          {
            name: 'v1alpha1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: {
                  spec: {
                    type: 'object',
                    required: ['size'],
                    properties: { size: { type: 'integer', minimum: 1 }, colour: { type: 'string' } },
                  },
                },
              },
            },
          },
        ],
      },
    });
    await kubectl('apply', '-f', crd);
    await kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/widgets.smoke.tollgate.dev');

    const widget = manifest('widget.json', {
      apiVersion: 'smoke.tollgate.dev/v1alpha1',
      kind: 'Widget',
      metadata: { name: 'first', namespace: 'default', labels: { app: 'tollgate-smoke' } },
      spec: { size: 3, colour: 'teal' },
    });
    // Discovery can lag the Established condition by a moment.
    let applied = '';
    for (let attempt = 0; ; attempt++) {
      try {
        applied = await kubectl('apply', '-f', widget);
        break;
      } catch (err) {
        if (attempt >= 20 || !/no matches for kind|the server could not find/i.test(String(err))) throw err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    expect(applied).toContain('widget.smoke.tollgate.dev/first');

    const got = JSON.parse(await kubectl('get', 'widgets.smoke.tollgate.dev', 'first', '-n', 'default', '-o', 'json')) as {
      metadata: { uid: string; labels: Record<string, string> };
      spec: { size: number; colour: string };
    };
    expect(got.spec).toEqual({ size: 3, colour: 'teal' });
    expect(got.metadata.labels).toEqual({ app: 'tollgate-smoke' });
    expect(got.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);

    // The CRD's schema is enforced: the API server rejects an invalid object.
    const bad = manifest('bad-widget.json', {
      apiVersion: 'smoke.tollgate.dev/v1alpha1',
      kind: 'Widget',
      metadata: { name: 'bad', namespace: 'default' },
      spec: { size: 0 },
    });
    await expect(kubectl('apply', '-f', bad)).rejects.toThrow(/spec\.size/);
  });

  it('creates and renews a coordination.k8s.io/v1 Lease (leader election)', async () => {
    const renewTime = () => new Date().toISOString().replace(/Z$/, '000Z'); // MicroTime: 6 fraction digits
    const lease = manifest('lease.json', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'tollgate-controller', namespace: 'default' },
      spec: {
        holderIdentity: 'controller-a',
        leaseDurationSeconds: 15,
        acquireTime: renewTime(),
        renewTime: renewTime(),
        leaseTransitions: 0,
      },
    });
    await kubectl('create', '-f', lease);
    // Another replica takes over, as client-go's leader election does.
    const takeover = { spec: { holderIdentity: 'controller-b', acquireTime: renewTime(), renewTime: renewTime(), leaseTransitions: 1 } };
    await kubectl('patch', 'leases.coordination.k8s.io', 'tollgate-controller', '-n', 'default', '--type=merge', '-p', JSON.stringify(takeover));
    const got = JSON.parse(await kubectl('get', 'leases.coordination.k8s.io', 'tollgate-controller', '-n', 'default', '-o', 'json')) as {
      spec: { holderIdentity: string; leaseDurationSeconds: number; leaseTransitions: number };
    };
    expect(got.spec).toMatchObject({ holderIdentity: 'controller-b', leaseDurationSeconds: 15, leaseTransitions: 1 });
    expect((await kubectl('auth', 'can-i', 'update', 'leases.coordination.k8s.io', '-n', 'default')).trim()).toBe('yes');
  });
});
