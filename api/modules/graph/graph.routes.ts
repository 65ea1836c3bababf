import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { caller } from '../../platform/route.js';
import {
  accessOut,
  agentGraphOut,
  agentParams,
  atOnly,
  blastRadiusOut,
  exportJsonOut,
  exportQuery,
  graphOut,
  graphQuery,
  highRiskPathsOut,
  neighboursOut,
  neighboursQuery,
  nodeOut,
  nodeParams,
  pathOut,
  pathQuery,
  rebuildOut,
} from './graph.schemas.js';
import { GraphService } from './graph.service.js';

const tags = ['Agent Security Graph'];

/**
 * The answers of the graph's reads are built by graph.memory.ts and graph.patterns.ts in the shapes the schemas
 * declare, and can run to thousands of nodes: they are written with JSON.stringify rather than re-checked item by item by
 * zod, which took most of a traversal's time (D25).
 * test/api/graph.test.ts checks the shapes.
 */
const written = { serializerCompiler: () => (data: unknown) => JSON.stringify(data) };
const atNote = ' `at` answers the graph as it was at that time.';

export async function graphRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock } = app.deps;
  // This process's graphs, kept in memory per organisation and checked against the database on every read.
  const graph = new GraphService(db, clock);

  r.get(
    '/graph',
    {
      ...caller('graph:read'),
      ...written,
      schema: {
        summary: 'Nodes of the graph, filtered by kinds, risk levels and text, and the edges between them',
        description:
          'Up to `limit` nodes (default 2000) sorted by kind, label and id, with every edge between two of them.' + atNote,
        tags,
        querystring: graphQuery,
        response: { 200: graphOut },
      },
    },
    async (req) => graph.list(actorOf(req).orgId, req.query),
  );

  r.get(
    '/graph/agents/:agent_id',
    {
      ...caller('graph:read'),
      ...written,
      schema: {
        summary: "An agent's subgraph: the agent, its direct neighbours and everything it can reach",
        description: 'The agent is named by its registry id. Another organisation\'s agent answers 404.' + atNote,
        tags,
        params: agentParams,
        querystring: atOnly,
        response: { 200: agentGraphOut },
      },
    },
    async (req) => graph.agent(actorOf(req).orgId, req.params.agent_id, req.query.at),
  );

  r.get(
    '/graph/export',
    {
      ...caller('graph:export'),
      schema: {
        summary: 'Export the nodes or the edges of the graph as JSON or CSV',
        description:
          'JSON: `{at, version, part, items}`. CSV: UTF-8 with a byte-order mark, a header row, CRLF line ends, RFC 4180 ' +
          'quoting; a cell starting with = + - @ (or a tab or carriage return) is prefixed with an apostrophe so that a ' +
          'spreadsheet shows it as text; `attributes` is a JSON cell. Edges carry the kind and label of both ends.' + atNote,
        tags,
        querystring: exportQuery,
        response: {
          200: {
            description: 'The part asked for, in the format asked for',
            content: {
              'application/json': { schema: exportJsonOut },
              'text/csv': { schema: z.string().describe('a header row, then one row per node or edge') },
            },
          },
        },
      },
    },
    async (req, reply) => {
      const { format, part, at } = req.query;
      const out = await graph.export(actorOf(req).orgId, format, part, at);
      const name = `graph-${part}${at ? `-${at.replace(/[^0-9TZ]/g, '')}` : ''}`;
      // A string is sent as it is: the JSON export is written once here rather than checked item by item.
      const type = out.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8';
      return reply.type(type).header('content-disposition', `attachment; filename="${name}.${out.format}"`).send(out.body);
    },
  );

  r.get(
    '/graph/high-risk-paths',
    {
      ...caller('graph:read'),
      ...written,
      schema: {
        summary: 'Paths that match a high-risk pattern, pattern by pattern',
        description:
          'Every pattern (docs/risk-and-graph.md, High-risk paths) with its severity, how many paths match it in the whole ' +
          'graph and up to 200 of them, each with the nodes and edges that make it.' + atNote,
        tags,
        querystring: atOnly,
        response: { 200: highRiskPathsOut },
      },
    },
    async (req) => graph.highRiskPaths(actorOf(req).orgId, req.query.at),
  );

  r.get(
    '/graph/nodes/:node_id',
    {
      ...caller('graph:read'),
      ...written,
      schema: {
        summary: 'One node, with its edges counted by kind and direction',
        description: 'A node id of another organisation, or of no node (at that time), answers 404.' + atNote,
        tags,
        params: nodeParams,
        querystring: atOnly,
        response: { 200: nodeOut },
      },
    },
    async (req) => graph.node(actorOf(req).orgId, req.params.node_id, req.query.at),
  );

  r.get(
    '/graph/nodes/:node_id/access',
    {
      ...caller('graph:read'),
      ...written,
      schema: {
        summary: 'Transitive access: what the node can reach through tools, servers, credentials and resources',
        description:
          'Follows its bindings to tools (a binding on an MCP server opens every tool on it), the servers its tools run on, ' +
          'the resources and credentials they use, its model, the principals it acts for and its identities. Blocked tools ' +
          'and bindings whose tool definition changed lead nowhere; expired bindings and delegations do not count. Each ' +
          'node reached comes with its depth, one shortest path and, for resources, read and/or write.' + atNote,
        tags,
        params: nodeParams,
        querystring: atOnly,
        response: { 200: accessOut },
      },
    },
    async (req) => graph.access(actorOf(req).orgId, req.params.node_id, req.query.at),
  );

  r.get(
    '/graph/nodes/:node_id/blast-radius',
    {
      ...caller('graph:read'),
      ...written,
      schema: {
        summary: 'Blast radius: what is affected if the node is compromised',
        description:
          'Spreads compromise by the rules of docs/risk-and-graph.md (an upper bound): a compromised server controls its ' +
          'tools and, through their answers, the agents that call them; a compromised agent reaches its tools and data; ' +
          'a leaked credential reaches what every tool using it reaches. Answers the nodes affected (control or reach), ' +
          'counts by kind, and the most sensitive data classification reached.' + atNote,
        tags,
        params: nodeParams,
        querystring: atOnly,
        response: { 200: blastRadiusOut },
      },
    },
    async (req) => graph.blastRadius(actorOf(req).orgId, req.params.node_id, req.query.at),
  );

  r.get(
    '/graph/nodes/:node_id/neighbours',
    {
      ...caller('graph:read'),
      ...written,
      schema: {
        summary: 'The nodes within `depth` hops of the node (either direction) and the edges between them',
        description: `depth 1-5, default 1; at most 2000 nodes, the nearest first (then \`truncated\`).${atNote}`,
        tags,
        params: nodeParams,
        querystring: neighboursQuery,
        response: { 200: neighboursOut },
      },
    },
    async (req) => graph.neighbours(actorOf(req).orgId, req.params.node_id, req.query.depth, req.query.at),
  );

  r.get(
    '/graph/path',
    {
      ...caller('graph:read'),
      ...written,
      schema: {
        summary: 'A shortest path between two nodes, following edges either way or only in their direction',
        description: 'Answers `found: false` when no path exists; a node id that is not in the graph answers 404.' + atNote,
        tags,
        querystring: pathQuery,
        response: { 200: pathOut },
      },
    },
    async (req) => graph.path(actorOf(req).orgId, req.query),
  );

  r.post(
    '/graph/rebuild',
    {
      ...caller('risk:configure'),
      schema: {
        summary: 'Re-project the graph from the registry (idempotent); run it after a restore',
        description:
          'Compares a full projection of the registry with the stored graph and writes the difference: a second rebuild ' +
          'changes nothing. Every API process reloads its in-memory graph afterwards. Audited (graph.rebuilt).',
        tags,
        response: { 200: rebuildOut },
      },
    },
    async (req) => graph.rebuild(req, actorOf(req).orgId),
  );
}
