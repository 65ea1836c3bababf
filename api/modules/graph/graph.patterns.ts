import { CLASSIFICATION_RANK, isPrivileged } from './graph.model.js';
import { byKindLabel, edgeRefOf, refOf, type GraphView } from './graph.memory.js';
import type { GraphEdgeOut, GraphNodeOut, RiskLevel } from './graph.schemas.js';

/**
 * The high-risk path patterns (docs/risk-and-graph.md, "High-risk paths"): shapes in the graph that put an agent
 * one step from harm. Each is a function over the in-memory graph; revoked agents match none (they cannot act).
 */

export interface PatternMatch {
  /** Written only for the matches listed. */
  summary: () => string;
  nodes: GraphNodeOut[];
  edges: GraphEdgeOut[];
}

export interface Pattern {
  key: string;
  title: string;
  severity: RiskLevel;
  description: string;
  find(ctx: PatternContext): PatternMatch[];
}

/** Matches listed per pattern; `count` covers all. */
export const MATCHES_PER_PATTERN = 200;

const HIGH_IMPACT = new Set(['destructive', 'financial', 'admin']);
const rank = (n: GraphNodeOut) => CLASSIFICATION_RANK[(n.attributes.classification as string) ?? 'internal'] ?? 1;

/**
 * What the patterns ask of the graph, worked out once per answer and shared between them: the agents that can act
 * (every one but the revoked), the tools each agent may call, the data and credentials each tool reaches.
 */
export class PatternContext {
  readonly agents: GraphNodeOut[] = [];
  private readonly granted = new Map<string, Map<string, GraphEdgeOut>>();
  private readonly hosted = new Map<string, Array<{ tool: string; edge: GraphEdgeOut }>>();
  private readonly toolLinks = new Map<string, { data: Array<{ node: GraphNodeOut; edge: GraphEdgeOut }>; creds: Array<{ node: GraphNodeOut; edge: GraphEdgeOut }> }>();

  readonly node: (id: string) => GraphNodeOut;

  constructor(readonly view: GraphView) {
    this.node = (id) => view.graph.getNodeAttributes(id);
    view.graph.forEachNode((_id, n) => {
      if (n.kind === 'agent' && n.attributes.status !== 'revoked') this.agents.push(n);
    });
  }

  /** The tools a server hosts that are not blocked, each with its hosted_on edge. */
  toolsOf(server: string) {
    let tools = this.hosted.get(server);
    if (!tools) {
      tools = [];
      for (const edge of this.view.edgesOf(server, 'in')) {
        if (edge.kind === 'hosted_on' && this.node(edge.from).attributes.blocked !== true) tools.push({ tool: edge.from, edge });
      }
      this.hosted.set(server, tools);
    }
    return tools;
  }

  /** The tools an agent may call, each with the edge that grants it (a binding on the tool, or on its server). */
  grantedTools(agent: string): Map<string, GraphEdgeOut> {
    let tools = this.granted.get(agent);
    if (!tools) {
      const found = new Map<string, GraphEdgeOut>();
      for (const edge of this.view.edgesOf(agent, 'out')) {
        if (edge.kind === 'uses_tool' && edge.attributes.definition_changed !== true && this.node(edge.to).attributes.blocked !== true) found.set(edge.to, edge);
        if (edge.kind === 'uses_server') for (const h of this.toolsOf(edge.to)) if (!found.has(h.tool)) found.set(h.tool, edge);
      }
      this.granted.set(agent, (tools = found));
    }
    return tools;
  }

  /** The data resources and credentials a tool (or an agent, directly) reaches, each with its edge. */
  links(node: string) {
    let links = this.toolLinks.get(node);
    if (!links) {
      links = { data: [], creds: [] };
      for (const edge of this.view.edgesOf(node, 'out')) {
        const target = this.node(edge.to);
        if ((edge.kind === 'reads_resource' || edge.kind === 'writes_resource') && target.kind === 'data_resource') links.data.push({ node: target, edge });
        if (edge.kind === 'uses_credential') links.creds.push({ node: target, edge });
      }
      this.toolLinks.set(node, links);
    }
    return links;
  }

  /** The data resources an agent reaches, each with the edges from the agent to it (one, two or three). */
  dataReached(agent: string): Map<string, GraphEdgeOut[]> {
    const data = new Map<string, GraphEdgeOut[]>();
    for (const d of this.links(agent).data) if (!data.has(d.node.id)) data.set(d.node.id, [d.edge]);
    for (const [tool, grant] of this.grantedTools(agent)) {
      const via = grant.kind === 'uses_server' ? this.toolsOf(grant.to).find((h) => h.tool === tool)!.edge : null;
      for (const d of this.links(tool).data) if (!data.has(d.node.id)) data.set(d.node.id, via ? [grant, via, d.edge] : [grant, d.edge]);
    }
    return data;
  }
}

const labels = (nodes: GraphNodeOut[], max = 3) =>
  nodes.slice(0, max).map((n) => n.label).join(', ') + (nodes.length > max ? ` and ${nodes.length - max} more` : '');

export const PATTERNS: Pattern[] = [
  {
    key: 'untrusted_server_privileged_tool_sensitive_data',
    title: 'Privileged tool on an MCP server that is not approved, reaching regulated or restricted data',
    severity: 'critical',
    description:
      'An agent is granted (directly, or through a binding on its server) a tool of a privileged class (write, destructive, ' +
      'financial, admin) that is not blocked, on an MCP server whose trust state is not approved, and the tool reads or ' +
      'writes a data resource classified regulated or restricted. POL-006 denies such calls today; the path is one trust ' +
      'change or policy change away from live.',
    find(ctx) {
      const g = ctx.view.graph;
      const out: PatternMatch[] = [];
      g.forEachNode((toolId, tool) => {
        if (tool.kind !== 'tool' || tool.attributes.blocked === true || !isPrivileged(tool.attributes.privilege_class as string)) return;
        let server: { node: GraphNodeOut; edge: GraphEdgeOut } | undefined;
        const sensitive: Array<{ node: GraphNodeOut; edge: GraphEdgeOut }> = [];
        g.forEachOutEdge(toolId, (_e, edge, _s, _t, _sa, target) => {
          if (edge.kind === 'hosted_on' && target.attributes.trust_state !== 'approved') server = { node: target, edge };
          if ((edge.kind === 'reads_resource' || edge.kind === 'writes_resource') && target.kind === 'data_resource' && rank(target) >= CLASSIFICATION_RANK.regulated!) {
            sensitive.push({ node: target, edge });
          }
        });
        if (!server || sensitive.length === 0) return;
        const s = server;
        const grants = new Map<string, GraphEdgeOut>();
        g.forEachInEdge(toolId, (_e, edge, agent, _t, a) => {
          if (edge.kind === 'uses_tool' && edge.attributes.definition_changed !== true && a.kind === 'agent' && a.attributes.status !== 'revoked') grants.set(agent, edge);
        });
        g.forEachInEdge(s.node.id, (_e, edge, agent, _t, a) => {
          if (edge.kind === 'uses_server' && a.attributes.status !== 'revoked' && !grants.has(agent)) grants.set(agent, edge);
        });
        for (const [agentId, grant] of grants) {
          const agent = g.getNodeAttributes(agentId);
          const data = sensitive.map((d) => d.node).sort(byKindLabel);
          out.push({
            summary: () =>
              `${agent.label} can call ${tool.label} (${String(tool.attributes.privilege_class)}) on ${s.node.label} ` +
              `(${String(s.node.attributes.trust_state)}), which reaches ${labels(data)}`,
            nodes: [agent, tool, s.node, ...data],
            edges: [grant, s.edge, ...sensitive.map((d) => d.edge)],
          });
        }
      });
      return out;
    },
  },
  {
    key: 'exposed_agent_shared_credential',
    title: 'Internet-exposed agent using a credential reference shared with others',
    severity: 'high',
    description:
      'An agent with internet_exposure public reaches a credential reference (through a tool it is granted, or bound ' +
      'directly) that other tools or agents use too, or that is marked shared: whoever turns the exposed agent reaches ' +
      'what the credential opens for all of them.',
    find(ctx) {
      const g = ctx.view.graph;
      const out: PatternMatch[] = [];
      for (const agent of ctx.agents) {
        if (agent.attributes.internet_exposure !== 'public') continue;
        const tools = ctx.grantedTools(agent.id);
        const creds = new Map<string, GraphEdgeOut[]>();
        for (const c of ctx.links(agent.id).creds) if (!creds.has(c.node.id)) creds.set(c.node.id, [c.edge]);
        for (const [tool, grant] of tools) for (const c of ctx.links(tool).creds) if (!creds.has(c.node.id)) creds.set(c.node.id, [grant, c.edge]);
        for (const [credId, lead] of creds) {
          const cred = g.getNodeAttributes(credId);
          const others: Array<{ node: GraphNodeOut; edge: GraphEdgeOut }> = [];
          for (const edge of ctx.view.edgesOf(credId, 'in')) {
            if (edge.kind === 'uses_credential' && edge.from !== agent.id && !tools.has(edge.from)) others.push({ node: ctx.node(edge.from), edge });
          }
          if (others.length === 0 && cred.attributes.shared !== true) continue;
          others.sort((a, b) => byKindLabel(a.node, b.node));
          const via = lead.length > 1 ? [g.getNodeAttributes(lead.at(-1)!.from)] : [];
          const shown = others.slice(0, 5);
          out.push({
            summary: () =>
              `${agent.label} (internet-exposed) reaches ${cred.label}` +
              (others.length > 0 ? `, which ${labels(others.map((o) => o.node))} also use` : ', marked shared'),
            nodes: [agent, ...via, cred, ...shown.map((o) => o.node)],
            edges: [...lead, ...shown.map((o) => o.edge)],
          });
        }
      }
      return out;
    },
  },
  {
    key: 'unapproved_model_sensitive_data',
    title: 'Agent on a model that may not see the data the agent reaches',
    severity: 'high',
    description:
      'An agent runs a model that is not approved and reaches data classified confidential or above, or runs an approved ' +
      "model and reaches data above the model's max_data_classification: what the agent reads, the model sees.",
    find(ctx) {
      const g = ctx.view.graph;
      const out: PatternMatch[] = [];
      for (const agent of ctx.agents) {
        for (const edge of ctx.view.edgesOf(agent.id, 'out')) {
          if (edge.kind !== 'runs_model') continue;
          const model = ctx.node(edge.to);
          const max = model.attributes.max_data_classification as string | null;
          if (model.attributes.approved === true && !max) continue;
          const limit = model.attributes.approved === true ? (CLASSIFICATION_RANK[max!] ?? 5) : CLASSIFICATION_RANK.internal!;
          const over = [...ctx.dataReached(agent.id)].filter(([d]) => rank(g.getNodeAttributes(d)) > limit);
          if (over.length === 0) continue;
          const data = over.map(([d]) => g.getNodeAttributes(d)).sort((a, b) => rank(b) - rank(a) || byKindLabel(a, b));
          const shown = data.slice(0, 5);
          const ways = new Map(over);
          out.push({
            summary: () =>
              `${agent.label} runs ${model.label} (${model.attributes.approved === true ? `approved up to ${max}` : 'not approved'}) ` +
              `and reaches ${labels(data)}`,
            nodes: [agent, model, ...shown],
            edges: [edge, ...shown.flatMap((d) => ways.get(d.id)!)],
          });
        }
      }
      return out;
    },
  },
  {
    key: 'unsupervised_high_impact_tool',
    title: 'High-impact tool without approval, granted to an agent no person supervises',
    severity: 'high',
    description:
      'An agent whose human_approval_coverage is none is granted a tool of class destructive, financial or admin whose ' +
      'approval_class is none (and that is not blocked): nothing but policy stands between the agent and the action.',
    find(ctx) {
      const out: PatternMatch[] = [];
      for (const agent of ctx.agents) {
        if (agent.attributes.human_approval_coverage !== 'none') continue;
        for (const [toolId, grant] of ctx.grantedTools(agent.id)) {
          const tool = ctx.view.graph.getNodeAttributes(toolId);
          if (!HIGH_IMPACT.has(tool.attributes.privilege_class as string) || tool.attributes.approval_class !== 'none') continue;
          out.push({
            summary: () => `${agent.label} can call ${tool.label} (${String(tool.attributes.privilege_class)}) with no approval and no person watching`,
            nodes: [agent, tool],
            edges: [grant],
          });
        }
      }
      return out;
    },
  },
];

/** Every pattern's matches, sorted by their nodes' labels, at most MATCHES_PER_PATTERN listed per pattern. */
export function highRiskPaths(view: GraphView) {
  const ctx = new PatternContext(view);
  return PATTERNS.map((p) => {
    const found = p
      .find(ctx)
      .map((m) => ({ m, key: m.nodes.map((n) => `${n.label}\u0000${n.id}`).join('\u0001') }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .map(({ m }) => m);
    return {
      key: p.key,
      title: p.title,
      severity: p.severity,
      description: p.description,
      count: found.length,
      truncated: found.length > MATCHES_PER_PATTERN,
      matches: found.slice(0, MATCHES_PER_PATTERN).map((m) => ({
        summary: m.summary(),
        nodes: m.nodes.map(refOf),
        edges: m.edges.map(edgeRefOf),
      })),
    };
  });
}
