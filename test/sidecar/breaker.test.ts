import { rmSync } from 'node:fs';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiEnv, Person } from '../support/gateway-load.js';
import { freshDatabase } from '../support/harness.js';
import { eventually } from '../support/kubectl.js';
import { startPaymentsMcpServer } from '../support/mcp-server.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';
import { callError, mcpClient, postJson, sample, scrape, startSidecarProcess, type SidecarProcess } from './support.js';

const TIMEOUT_MS = 3000;

/**
 * A hung API (the process stopped with SIGSTOP: its socket accepts, nothing answers) against the sidecar's
 * decision timeout and circuit breaker: the call in flight fails after about the timeout, not 15 s; the breaker
 * opens and later calls are refused at once with nothing forwarded; SIGCONT, and the background probe lets
 * calls through again. `tollgate api` and `tollgate sidecar` are processes of their own.
 */
describe('tollgate sidecar in front of a hung API', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let apiProcess: ReturnType<typeof spawnTollgate>;
  let payments: Awaited<ReturnType<typeof startPaymentsMcpServer>>;
  let sidecar: SidecarProcess;
  let agent: Client;

  beforeAll(async () => {
    db = await freshDatabase();
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    apiProcess = spawnTollgate(['api'], apiEnv(port, { DATABASE_URL: db.runtimeUrl, ALLOW_PRIVATE_ENDPOINTS: 'true' }));
    await waitForHttp(`${base}/readyz`, 60_000, apiProcess);
    payments = await startPaymentsMcpServer();

    const person = await Person.onboard(base);
    const server = await person.ok('POST', '/mcp-servers', { name: 'payments', endpoint: payments.url });
    const tool = await person.ok('POST', '/tools', { tool_key: 'payments.lookup', name: 'Look up a payee', mcp_server_id: server.id, privilege_class: 'read' });
    const created = await person.ok('POST', '/agents', { name: 'Hung API agent' });
    await person.ok('POST', `/agents/${created.id}/permissions`, { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] });
    const identity = await person.ok('POST', `/agents/${created.id}/identities`);
    sidecar = await startSidecarProcess(base, identity, {
      TOLLGATE_MCP_UPSTREAMS: JSON.stringify([{ name: 'payments', url: payments.url, toolPrefix: 'payments' }]),
      TOLLGATE_DECISION_TIMEOUT_MS: String(TIMEOUT_MS),
    });
    agent = await mcpClient(sidecar.base, 'payments');
  }, 120_000);

  afterAll(async () => {
    await agent?.close().catch(() => undefined);
    await stop(sidecar);
    if (sidecar) rmSync(sidecar.dir, { recursive: true, force: true });
    apiProcess?.kill('SIGCONT');
    await stop(apiProcess);
    await payments?.close();
    await db?.drop();
  });

  it('fails the call in flight after the timeout, then refuses at once with the breaker open; SIGCONT closes it', async () => {
    await agent.callTool({ name: 'lookup', arguments: { payee: 'warm-up' } }); // a token is cached
    const before = payments.calls.length;
    apiProcess.kill('SIGSTOP');

    // The call in flight costs about the timeout, far from the client's 15 s default.
    const started = Date.now();
    const err = await callError(agent.callTool({ name: 'lookup', arguments: { payee: 'hung' } }));
    const ms = Date.now() - started;
    expect(err.code).toBe(-32003);
    expect(err.message).toMatch(/nothing was forwarded/);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 200);
    expect(ms).toBeLessThan(TIMEOUT_MS + 2000);
    // While that call waited, the sidecar read the API's readiness (a call still waiting after a quarter of the
    // timeout) and it timed out as well: the breaker was open before the call in flight failed, without waiting
    // for TOLLGATE_BREAKER_FAILURES (5 by default) timeouts, so no call after it waits at all.
    const open = await scrape(sidecar.metricsPort);
    expect(sample(open, 'tollgate_sidecar_breaker_state')).toBe(1);
    expect(sample(open, 'tollgate_sidecar_breaker_transitions_total', { to: 'open' })).toBe(1);

    // Open: refused without waiting for the API (well under the timeout), through MCP and HTTP alike.
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const err = await callError(agent.callTool({ name: 'lookup', arguments: { payee: `open-${i}` } }));
      expect(err.code).toBe(-32003);
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS / 3);
    }
    const http = await postJson(`${sidecar.base}/v1/actions`, { tool: 'payments.lookup', target: 'mcp://payments/lookup', parameters: { payee: 'x' } });
    expect(http.status).toBe(503);
    expect(http.body.error).toMatchObject({ code: 'gateway_unavailable', details: { circuit: 'open' } });
    expect(http.ms).toBeLessThan(TIMEOUT_MS / 3);
    // tools/list fails closed too: the permissions cannot be read (an MCP error, not the whole list).
    expect((await callError(agent.listTools())).code).toBe(-32003);
    expect(payments.calls.length).toBe(before);
    const refused = await scrape(sidecar.metricsPort);
    expect(sample(refused, 'tollgate_sidecar_calls_total', { kind: 'mcp_call', outcome: 'unavailable' })).toBe(4);
    expect(sample(refused, 'tollgate_sidecar_calls_total', { kind: 'action', outcome: 'unavailable' })).toBe(1);

    apiProcess.kill('SIGCONT');
    // The probe sees the API answer again: half-open (2), and the next call, the trial, closes it.
    await eventually(async () => sample(await scrape(sidecar.metricsPort), 'tollgate_sidecar_breaker_state') === 2, 20_000, 'the breaker half-open');
    const result = await agent.callTool({ name: 'lookup', arguments: { payee: 'back' } });
    expect(result.content).toEqual([{ type: 'text', text: 'payee back: ACME Supplies Ltd' }]);
    expect(payments.calls.slice(before)).toEqual([{ name: 'lookup', args: { payee: 'back' } }]);
    const closed = await scrape(sidecar.metricsPort);
    expect(sample(closed, 'tollgate_sidecar_breaker_state')).toBe(0);
    expect(sample(closed, 'tollgate_sidecar_breaker_transitions_total', { to: 'closed' })).toBe(1);
    expect((await agent.listTools()).tools.map((x) => x.name)).toEqual(['lookup']);
  }, 90_000);
});
