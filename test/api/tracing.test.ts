import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { api, onboardAdmin, startTestApp } from '../support/harness.js';

/**
 * OpenTelemetry traces over OTLP/HTTP when configured, health checks excluded.
 * A stand-in collector on loopback records what the app exports.
 */

interface Export {
  method: string;
  url: string;
  contentType: string;
  body: Buffer;
}

async function startCollector(port = 0, host: string | undefined = '127.0.0.1') {
  const received: Export[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        contentType: String(req.headers['content-type'] ?? ''),
        body: Buffer.concat(chunks),
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    received,
    traces: () => received.filter((r) => r.method === 'POST' && r.url === '/v1/traces'),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
type Collector = Awaited<ReturnType<typeof startCollector>>;

/** The string attribute values of every span of an OTLP/JSON export, by span. */
function spansOf(body: Buffer): Array<Record<string, string>> {
  const doc = JSON.parse(body.toString('utf8')) as {
    resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<{ name: string; attributes?: Array<{ key: string; value: { stringValue?: string; intValue?: number | string } }> }> }> }>;
  };
  const out: Array<Record<string, string>> = [];
  for (const rs of doc.resourceSpans ?? [])
    for (const ss of rs.scopeSpans ?? [])
      for (const span of ss.spans ?? []) {
        const attrs: Record<string, string> = { name: span.name };
        for (const a of span.attributes ?? []) attrs[a.key] = String(a.value.stringValue ?? a.value.intValue ?? '');
        out.push(attrs);
      }
  return out;
}

const collectors: Collector[] = [];
afterEach(async () => {
  for (const c of collectors.splice(0)) await c.close();
});

describe('traces over OTLP/HTTP', () => {
  it('exports a span of an API request and none of /healthz or /readyz, flushed on close', async () => {
    const collector = await startCollector();
    collectors.push(collector);
    const t = await startTestApp({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url } });
    let closed = false;
    try {
      const admin = await onboardAdmin(t.app, 'Traced Org');
      expect((await admin.client.get(api('/roles'))).statusCode).toBe(200);
      expect((await t.app.inject({ url: '/healthz' })).statusCode).toBe(200);
      expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(200);
      // The last request, right before closing: its span reaches the collector only if close flushes.
      expect((await admin.client.get(api('/roles/permissions'))).statusCode).toBe(200);
      await t.close();
      closed = true;
    } finally {
      if (!closed) await t.close();
    }

    const exports = collector.traces();
    expect(exports.length).toBeGreaterThan(0);
    const raw = Buffer.concat(exports.map((e) => e.body)).toString('latin1');
    // OTLP/HTTP carries JSON or protobuf; the route's path is a plain string in either.
    expect(raw).toContain('/api/v1/roles');
    expect(raw).toContain('/api/v1/roles/permissions');
    expect(raw).not.toContain('/healthz');
    expect(raw).not.toContain('/readyz');
    // The service is named (OTEL_SERVICE_NAME defaults to tollgate-api).
    expect(raw).toContain('tollgate-api');

    const json = exports.filter((e) => e.contentType.startsWith('application/json'));
    if (json.length > 0) {
      const spans = json.flatMap((e) => spansOf(e.body));
      const request = spans.find((s) => s['url.path'] === '/api/v1/roles');
      expect(request).toMatchObject({ 'http.request.method': 'GET', 'http.route': '/api/v1/roles', 'http.response.status_code': '200' });
      const paths = spans.flatMap((s) => [s['url.path'], s['http.route']]).filter(Boolean);
      for (const p of paths) expect(p).not.toMatch(/^\/(healthz|readyz)/);
    } else {
      for (const e of exports) expect(e.contentType).toMatch(/protobuf/);
    }
  });

  it('exports nothing without OTEL_EXPORTER_OTLP_ENDPOINT', async () => {
    // A collector where the OpenTelemetry SDK would send by default (localhost:4318), when that port is free,
    // so an exporter that were set up anyway would be seen.
    let collector: Collector;
    try {
      collector = await startCollector(4318, undefined);
    } catch {
      collector = await startCollector();
    }
    collectors.push(collector);
    const t = await startTestApp();
    try {
      expect(t.app.hasRequestDecorator('opentelemetry')).toBe(false);
      const admin = await onboardAdmin(t.app, 'Untraced Org');
      expect((await admin.client.get(api('/roles'))).statusCode).toBe(200);
    } finally {
      await t.close();
    }
    expect(collector.received).toEqual([]);
  });
});
