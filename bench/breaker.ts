import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { mcpSidecar } from './mcp-sidecar.js';

/** Milliseconds one call takes, refused or not. */
async function timedCall(client: Client): Promise<number> {
  const t = process.hrtime.bigint();
  try {
    await client.callTool({ name: 'lookup', arguments: { payee: 'ACME' } });
  } catch {
    // refused: what is measured here
  }
  return Number(process.hrtime.bigint() - t) / 1e6;
}

/**
 * bench/breaker: `tollgate sidecar` in front of `tollgate api` on PostgreSQL and a real MCP server; one agent
 * calls a tool through the MCP proxy in a loop. The API is stopped with SIGSTOP (hung, not dead): how many of
 * the first calls cost the decision timeout (TOLLGATE_DECISION_TIMEOUT_MS, default 2 s; target: one), how fast
 * the next 1,000 are refused by the open breaker (target: <= 50 ms each), and, after SIGCONT, how soon calls
 * succeed again.
 */
export async function benchBreaker(opts: { refusals: number }) {
  const setup = await mcpSidecar('Bench breaker', 'error');
  let client: Client | undefined;
  try {
    client = new Client({ name: 'bench-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(setup.sidecarUrl)));
    for (let i = 0; i < 50; i++) await client.callTool({ name: 'lookup', arguments: { payee: 'warm' } });

    setup.api.kill('SIGSTOP');
    const first: number[] = [];
    for (let i = 0; i < 10; i++) first.push(await timedCall(client));
    const refused: number[] = [];
    for (let i = 0; i < opts.refusals; i++) refused.push(await timedCall(client));
    refused.sort((a, b) => a - b);
    setup.api.kill('SIGCONT');
    const resumed = Date.now();
    for (;;) {
      try {
        await client.callTool({ name: 'lookup', arguments: { payee: 'back' } });
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const pct = (q: number) => Number(refused[Math.min(refused.length - 1, Math.floor(q * refused.length))]!.toFixed(2));
    return [
      { what: 'of the first 10 calls after SIGSTOP, those that waited for the timeout (target 1)', value: first.filter((ms) => ms > 1000).length },
      { what: 'the first call after SIGSTOP, ms', value: Number(first[0]!.toFixed(0)) },
      { what: `the next ${opts.refusals} calls, refused by the open breaker: p50 ms`, value: pct(0.5) },
      { what: 'same, p99 ms (target <= 50)', value: pct(0.99) },
      { what: 'same, max ms', value: Number(refused.at(-1)!.toFixed(2)) },
      { what: 'after SIGCONT, a call succeeds again within, ms', value: Date.now() - resumed },
    ];
  } finally {
    await client?.close().catch(() => undefined);
    await setup.close();
  }
}
