import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/**
 * A real MCP server (the SDK's McpServer over streamable HTTP, stateless) with two payment tools, that
 * records every tools/call it receives: tests check what the sidecar forwarded, and what it did not.
 */
export async function startPaymentsMcpServer(): Promise<{ url: string; calls: { name: string; args: unknown }[]; close(): Promise<void> }> {
  const calls: { name: string; args: unknown }[] = [];
  const build = () => {
    const mcp = new McpServer({ name: 'payments-test-server', version: '1.0.0' });
    mcp.registerTool(
      'lookup',
      { description: 'Look up a payee', inputSchema: { payee: z.string() } },
      async ({ payee }) => {
        calls.push({ name: 'lookup', args: { payee } });
        return { content: [{ type: 'text', text: `payee ${payee}: ACME Supplies Ltd` }] };
      },
    );
    mcp.registerTool(
      'transfer',
      { description: 'Transfer funds', inputSchema: { amount: z.number(), currency: z.string(), payee: z.string() } },
      async (args) => {
        calls.push({ name: 'transfer', args });
        return { content: [{ type: 'text', text: `transferred ${args.amount} ${args.currency} to ${args.payee}` }] };
      },
    );
    return mcp;
  };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    const mcp = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
