import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './postgres-cluster.js';
import { cachedBuild } from './processes.js';

const run = promisify(execFile);

/**
 * A throwaway Kubernetes API server: etcd and kube-apiserver, built from the versions that the Go
 * module test/k8s pins (scripts/build-kube.sh, cached per machine), on free loopback ports, with a
 * fresh CA, serving certificate, service-account key pair and an admin client certificate (CN admin,
 * O system:masters) in a temp dir. No controller manager, scheduler or kubelet: objects are stored
 * and served, nothing reconciles them.
 */
export interface KubeCluster {
  /** Kubeconfig with one context, `tollgate-test`, as the admin (system:masters) user. */
  kubeconfigPath: string;
  /** https://127.0.0.1:<port> */
  server: string;
  /** The cluster CA, PEM. */
  caPem: string;
  /** Admin client certificate and key, PEM, for clients that do not read a kubeconfig. */
  clientCertPem: string;
  clientKeyPem: string;
  /** The temp dir: certificates, etcd's data and the processes' logs (etcd.log, kube-apiserver.log). */
  dir: string;
  pids: { etcd: number; apiserver: number };
  /** Milliseconds spent: ensuring the binaries, then from spawning etcd until /readyz answered. */
  timings: { binariesMs: number; startMs: number };
  /** Kills kube-apiserver and etcd and removes the temp dir. */
  stop(): Promise<void>;
}

export interface StartKubeOptions {
  /** How long to wait for etcd and /readyz, default 120 s. */
  readyTimeoutMs?: number;
  /** Extra kube-apiserver flags, e.g. ['--feature-gates=...']; a later flag wins. */
  apiserverArgs?: string[];
}

const SERVICE_CIDR = '10.0.0.0/24';
const SERVICE_IP = '10.0.0.1';

/**
 * The directory holding kube-apiserver and etcd: TOLLGATE_KUBE_BIN_DIR when set, else the build
 * script's cache (which builds them first when they are missing; minutes on a fresh machine).
 */
export async function kubeBinDir(): Promise<string> {
  const preset = process.env.TOLLGATE_KUBE_BIN_DIR;
  if (preset) {
    for (const bin of ['kube-apiserver', 'etcd']) {
      if (!existsSync(path.join(preset, bin))) throw new Error(`TOLLGATE_KUBE_BIN_DIR=${preset} has no ${bin}`);
    }
    return preset;
  }
  return cachedBuild('build-kube.sh');
}

export async function startKube(opts: StartKubeOptions = {}): Promise<KubeCluster> {
  const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;
  let t = Date.now();
  const bin = await kubeBinDir();
  const binariesMs = Date.now() - t;

  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-kube-'));
  const children: ChildProcess[] = [];
  const killAll = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  // A test worker that dies must not leave an API server behind.
  process.once('exit', killAll);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.removeListener('exit', killAll);
    // The API server first, so that it does not log etcd going away.
    for (const c of [...children].reverse()) await terminate(c);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    const pki = await makePki(dir);
    const [etcdPort, peerPort, apiPort] = await distinctFreePorts(3);
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const server = `https://127.0.0.1:${apiPort}`;

    t = Date.now();
    const etcd = spawnLogged(path.join(bin, 'etcd'), [
      '--name=tollgate-test',
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=tollgate-test=${peerUrl}`,
      '--unsafe-no-fsync', // throwaway data: durability is not worth the time
      '--log-level=warn',
    ], path.join(dir, 'etcd.log'));
    children.push(etcd);
    await waitFor('etcd', readyTimeoutMs, [etcd], async () => {
      const res = await fetch(`${etcdUrl}/health`);
      return res.ok && ((await res.json()) as { health?: string }).health === 'true';
    });

    const apiserver = spawnLogged(path.join(bin, 'kube-apiserver'), [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      '--advertise-address=127.0.0.1',
      `--cert-dir=${path.join(dir, 'pki')}`,
      `--tls-cert-file=${pki.servingCert}`,
      `--tls-private-key-file=${pki.servingKey}`,
      `--client-ca-file=${pki.caCert}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${pki.saPublic}`,
      `--service-account-signing-key-file=${pki.saPrivate}`,
      '--authorization-mode=RBAC',
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      '--allow-privileged=true',
      // No controller manager creates the `default` service accounts that this plug-in requires.
      '--disable-admission-plugins=ServiceAccount',
      // Endpoints may not hold a loopback address: do not publish one for the `kubernetes` service.
      '--endpoint-reconciler-type=none',
      '--profiling=false',
      ...(opts.apiserverArgs ?? []),
    ], path.join(dir, 'kube-apiserver.log'));
    children.push(apiserver);

    const client = { ca: pki.caPem, cert: pki.clientCertPem, key: pki.clientKeyPem };
    await waitFor('kube-apiserver /readyz', readyTimeoutMs, [etcd, apiserver], async () =>
      (await httpsGet(`${server}/readyz`, client)).status === 200,
    );
    const startMs = Date.now() - t;

    const kubeconfigPath = path.join(dir, 'kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfig(server, pki.caPem, pki.clientCertPem, pki.clientKeyPem), { mode: 0o600 });
    return {
      kubeconfigPath,
      server,
      caPem: pki.caPem,
      clientCertPem: pki.clientCertPem,
      clientKeyPem: pki.clientKeyPem,
      dir,
      pids: { etcd: etcd.pid!, apiserver: apiserver.pid! },
      timings: { binariesMs, startMs },
      stop,
    };
  } catch (err) {
    const logs = ['etcd.log', 'kube-apiserver.log']
      .filter((f) => existsSync(path.join(dir, f)))
      .map((f) => `--- ${f} (last lines) ---\n${tail(readFileSync(path.join(dir, f), 'utf8'), 30)}`)
      .join('\n');
    await stop();
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`startKube: ${message}${logs ? `\n${logs}` : ''}`, { cause: err });
  }
}

interface Pki {
  caCert: string;
  caPem: string;
  servingCert: string;
  servingKey: string;
  clientCertPem: string;
  clientKeyPem: string;
  saPublic: string;
  saPrivate: string;
}

/** A CA, the API server's serving certificate, an admin client certificate and the service-account keys. */
async function makePki(dir: string): Promise<Pki> {
  const pki = path.join(dir, 'pki');
  mkdirSync(pki, { mode: 0o700 });
  const f = (name: string) => path.join(pki, name);
  const openssl = async (args: string[]) => {
    try {
      await run('openssl', args, { cwd: pki });
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { stderr?: string };
      if (e.code === 'ENOENT') throw new Error('openssl is not installed: startKube makes its certificates with it');
      throw new Error(`openssl ${args[0]} failed: ${e.stderr ?? e.message}`);
    }
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '3650',
    '-subj', '/CN=tollgate-test-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature']);

  const leaf = async (name: string, subject: string, extensions: string[]) => {
    writeFileSync(f(`${name}.ext`), extensions.join('\n') + '\n');
    await openssl(['req', '-new', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', subject]);
    await openssl(['x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.crt'), '-CAkey', f('ca.key'),
      '-set_serial', `0x${randomBytes(8).toString('hex')}`, '-days', '365',
      '-extfile', f(`${name}.ext`), '-out', f(`${name}.crt`)]);
  };
  const common = ['basicConstraints=critical,CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment'];
  await Promise.all([
    leaf('apiserver', '/CN=kube-apiserver', [...common, 'extendedKeyUsage=serverAuth',
      `subjectAltName=IP:127.0.0.1,DNS:localhost,IP:${SERVICE_IP},DNS:kubernetes,DNS:kubernetes.default,` +
        'DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local']),
    leaf('admin', '/O=system:masters/CN=admin', [...common, 'extendedKeyUsage=clientAuth']),
    openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', f('sa.key')]),
  ]);
  await openssl(['pkey', '-in', f('sa.key'), '-pubout', '-out', f('sa.pub')]);
  const read = (name: string) => readFileSync(f(name), 'utf8');
  return {
    caCert: f('ca.crt'),
    caPem: read('ca.crt'),
    servingCert: f('apiserver.crt'),
    servingKey: f('apiserver.key'),
    clientCertPem: read('admin.crt'),
    clientKeyPem: read('admin.key'),
    saPublic: f('sa.pub'),
    saPrivate: f('sa.key'),
  };
}

function kubeconfig(server: string, ca: string, cert: string, key: string): string {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  // JSON is YAML: kubectl and client libraries read it as a kubeconfig.
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'tollgate-test', cluster: { server, 'certificate-authority-data': b64(ca) } }],
      users: [{ name: 'admin', user: { 'client-certificate-data': b64(cert), 'client-key-data': b64(key) } }],
      contexts: [{ name: 'tollgate-test', context: { cluster: 'tollgate-test', user: 'admin', namespace: 'default' } }],
      'current-context': 'tollgate-test',
      preferences: {},
    },
    null,
    2,
  );
}

function spawnLogged(file: string, args: string[], logPath: string): ChildProcess {
  const fd = openSync(logPath, 'a');
  try {
    // The processes write straight to their log files: nothing to pump, nothing lost if the test is busy.
    return spawn(file, args, { stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
}

async function distinctFreePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

async function waitFor(
  what: string,
  timeoutMs: number,
  watch: ChildProcess[],
  ready: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const c of watch) {
      if (c.exitCode !== null || c.signalCode !== null) {
        throw new Error(`${path.basename(c.spawnfile)} exited (${c.exitCode ?? c.signalCode}) before ${what} was ready`);
      }
    }
    try {
      if (await ready()) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} was not ready within ${timeoutMs} ms`);
}

function httpsGet(url: string, tls: { ca: string; cert: string; key: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ...tls, method: 'GET', timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function tail(text: string, lines: number): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

/**
 * A serving certificate for 127.0.0.1 signed by the cluster's CA (which the API server already trusts as
 * the caBundle), written as tls.crt and tls.key into `outDir`: for webhooks the tests run on loopback.
 */
export async function loopbackServingCert(cluster: KubeCluster, outDir: string): Promise<void> {
  mkdirSync(outDir, { recursive: true, mode: 0o700 });
  const pki = path.join(cluster.dir, 'pki');
  const ext = path.join(outDir, 'tls.ext');
  writeFileSync(ext, ['basicConstraints=critical,CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth', 'subjectAltName=IP:127.0.0.1,DNS:localhost'].join('\n') + '\n');
  const csr = path.join(outDir, 'tls.csr');
  await run('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', path.join(outDir, 'tls.key'), '-out', csr, '-subj', '/CN=tollgate-webhook']);
  await run('openssl', ['x509', '-req', '-in', csr, '-CA', path.join(pki, 'ca.crt'), '-CAkey', path.join(pki, 'ca.key'),
    '-set_serial', `0x${randomBytes(8).toString('hex')}`, '-days', '30', '-extfile', ext, '-out', path.join(outDir, 'tls.crt')]);
}
