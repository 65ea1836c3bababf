import { readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import path from 'node:path';
import { CustomObjectsApi, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { KINDS } from '../kinds.js';
import { statusOf } from '../kube.js';
import { AGENT_ANNOTATION, injectSidecar, type AgentView, type InjectionSettings } from './inject.js';

export const WEBHOOK_PATH = '/mutate-v1-pod';
const MAX_BODY = 3 * 1024 * 1024; // a pod is at most ~1.5 MB in etcd

interface AdmissionReview {
  apiVersion: string;
  kind: 'AdmissionReview';
  request?: { uid: string; namespace?: string; object?: V1Pod; dryRun?: boolean };
}

export interface WebhookOptions {
  kubeConfig: KubeConfig;
  /** Directory with tls.crt and tls.key (a mounted Secret); re-read when they change (rotation). */
  certDir: string;
  port: number;
  host?: string;
  settings: InjectionSettings;
  log: Logger;
}

/**
 * The sidecar-injection webhook: HTTPS, `POST /mutate-v1-pod` with an admission.k8s.io/v1
 * AdmissionReview, answered with a JSON patch or a refusal. Every controller replica serves it (not
 * only the leader): it reads the Agent straight from the API server. `GET /healthz` for probes.
 */
export async function startWebhook(opts: WebhookOptions): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const files = { cert: path.join(opts.certDir, 'tls.crt'), key: path.join(opts.certDir, 'tls.key') };
  const stamp = () => `${statSync(files.cert).mtimeMs}:${statSync(files.key).mtimeMs}`;
  const load = () => ({ cert: readFileSync(files.cert), key: readFileSync(files.key) });
  let loaded = stamp();
  const server = createServer({ ...load(), minVersion: 'TLSv1.2' }, (req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'GET' && req.url === '/healthz') return reply(200, { status: 'ok' });
    if (req.method !== 'POST' || req.url?.split('?')[0] !== WEBHOOK_PATH) return reply(404, { error: 'not found' });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      let review: AdmissionReview;
      try {
        review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as AdmissionReview;
        if (!review.request?.uid) throw new Error('no request');
      } catch {
        return reply(400, { error: 'expected an admission.k8s.io/v1 AdmissionReview' });
      }
      admit(review.request, custom, opts).then(
        (response) => reply(200, { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response }),
        (err: unknown) => {
          // Fail closed: the pod is refused (the configuration's failurePolicy is Fail as well).
          opts.log.error({ err: err instanceof Error ? err.message : String(err) }, 'webhook: admission failed');
          reply(200, {
            apiVersion: 'admission.k8s.io/v1',
            kind: 'AdmissionReview',
            response: { uid: review.request!.uid, allowed: false, status: { code: 500, message: 'Tollgate could not check the Agent; try again' } },
          });
        },
      );
    });
  });
  // Certificates rotate (cert-manager, the chart's upgrade): pick the new pair up without a restart.
  const watcher = setInterval(() => {
    try {
      const now = stamp();
      if (now !== loaded) {
        server.setSecureContext(load());
        loaded = now;
        opts.log.info('webhook: certificate reloaded');
      }
    } catch (err) {
      opts.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'webhook: certificate reload failed');
    }
  }, 30_000);
  watcher.unref();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  opts.log.info({ port, path: WEBHOOK_PATH }, 'webhook: serving');
  return {
    server,
    port,
    close: () => {
      clearInterval(watcher);
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function admit(
  request: NonNullable<AdmissionReview['request']>,
  custom: CustomObjectsApi,
  opts: WebhookOptions,
): Promise<Record<string, unknown>> {
  const pod = request.object ?? {};
  const namespace = request.namespace ?? pod.metadata?.namespace ?? 'default';
  const name = pod.metadata?.annotations?.[AGENT_ANNOTATION];
  let agent: AgentView | undefined;
  if (name) {
    try {
      const { group, version, plural } = KINDS.Agent;
      agent = (await custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as AgentView;
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
    }
  }
  const answer = injectSidecar(pod, agent, opts.settings, request.uid);
  const who = `${namespace}/${pod.metadata?.name ?? pod.metadata?.generateName ?? '?'}`;
  if (!answer.allowed) {
    opts.log.info({ pod: who, agent: name, reason: answer.message }, 'webhook: pod refused');
    return { uid: request.uid, allowed: false, status: { code: 403, reason: 'Forbidden', message: `tollgate: ${answer.message}` } };
  }
  if (answer.patch.length === 0) return { uid: request.uid, allowed: true };
  opts.log.info({ pod: who, agent: name }, 'webhook: sidecar injected');
  return {
    uid: request.uid,
    allowed: true,
    patchType: 'JSONPatch',
    patch: Buffer.from(JSON.stringify(answer.patch)).toString('base64'),
  };
}
