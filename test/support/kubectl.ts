import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { KubeCluster } from './kube-cluster.js';
import { ROOT } from './processes.js';

const exec = promisify(execFile);
export const KUBECTL = process.env.KUBECTL ?? 'kubectl';
export const CRD_PLURALS = ['agents', 'tools', 'mcpservers', 'policies'];
export const CRD_FILES = CRD_PLURALS.map((p) => path.join(ROOT, 'crds', `${p}.tollgate.dev.yaml`));

/** The machine's kubectl against the cluster: stdout and stderr; throws with stderr on a non-zero exit. */
export async function kubectlRaw(cluster: KubeCluster, args: string[], input?: string): Promise<{ stdout: string; stderr: string }> {
  const argv = ['--kubeconfig', cluster.kubeconfigPath, '--cache-dir', path.join(cluster.dir, 'kubectl-cache'), ...args];
  try {
    const run = exec(KUBECTL, argv, { timeout: 60_000, env: { ...process.env, KUBECONFIG: '' } });
    if (input !== undefined) {
      run.child.stdin?.end(input);
    }
    return await run;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`kubectl ${args.join(' ')}: ${e.stderr || e.message}`);
  }
}

/** kubectl bound to one cluster, answering stdout. */
export function kubectlFor(cluster: KubeCluster) {
  return async (...args: string[]): Promise<string> => (await kubectlRaw(cluster, args)).stdout;
}

/**
 * Applies crds/ and waits until they are Established and served (discovery can lag a moment); answers
 * the warnings kubectl printed while applying them.
 */
export async function installCrds(cluster: KubeCluster): Promise<string[]> {
  const warnings: string[] = [];
  for (const crd of CRD_FILES) {
    const { stderr } = await kubectlRaw(cluster, ['apply', '-f', crd]);
    if (stderr.trim()) warnings.push(`kubectl apply -f ${crd}: ${stderr.trim()}`);
  }
  // kubectl wait can fail at once ("accessor error") on a CRD so new that it has no status yet: retried.
  for (let attempt = 0; ; attempt++) {
    try {
      await kubectlRaw(cluster, ['wait', '--for=condition=Established', '--timeout=60s', ...CRD_PLURALS.map((p) => `crd/${p}.tollgate.dev`)]);
      break;
    } catch (err) {
      if (attempt >= 20) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  for (let attempt = 0; ; attempt++) {
    try {
      await kubectlRaw(cluster, ['get', 'tollgate', '-A']);
      return warnings;
    } catch (err) {
      if (attempt >= 40) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** Polls until `check` answers a truthy value, or fails after `ms` naming `what`. */
export async function eventually<T>(check: () => T | Promise<T>, ms = 10_000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} not met within ${ms} ms${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
