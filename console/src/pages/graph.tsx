import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import { Route, Routes, useSearchParams } from 'react-router';
import { api, must, type Paths } from '../api/client';
import { currentSearchParams } from '../api/hooks';
import { GraphView, KIND_NAMES, type ViewEdge, type ViewNode } from '../components/graph-view';
import { Badge, DataTable, Empty, ErrorPanel, Facts, JsonView, Loading, PageHeader, QueryView, Section, Time, type Tone } from '../components/ui';
import { useSession } from '../session';
import './graph.css';

type Json<P extends keyof Paths, M extends 'get' | 'post'> = Paths[P] extends { [K in M]: { responses: { 200: { content: { 'application/json': infer T } } } } } ? T : never;
type Listing = Json<'/graph', 'get'>;
type Kind = Listing['nodes'][number]['kind'];
type Level = Listing['nodes'][number]['risk_level'];
type Blast = Json<'/graph/nodes/{node_id}/blast-radius', 'get'>;
type Access = Json<'/graph/nodes/{node_id}/access', 'get'>;
type PathAnswer = Json<'/graph/path', 'get'>;
type HighRisk = Json<'/graph/high-risk-paths', 'get'>;
type Match = HighRisk['patterns'][number]['matches'][number];

const KINDS = Object.keys(KIND_NAMES) as Kind[];
const LEVELS: Level[] = ['low', 'medium', 'high', 'critical'];
const LEVEL_TONE: Record<string, Tone> = { low: 'good', medium: 'info', high: 'warn', critical: 'bad' };

const kindName = (k: string) => KIND_NAMES[k] ?? k;
const words = (s: string) => s.replaceAll('_', ' ');

function RiskLevel({ value }: { value: string | null | undefined }) {
  if (!value) return <span className="muted">not scored</span>;
  return <Badge tone={LEVEL_TONE[value] ?? 'neutral'}>{value}</Badge>;
}

/**
 * What the picture shows on top of the base view (a neighbourhood or an agent's subgraph): a traversal's
 * answer, its nodes merged in and highlighted, each with a note that says why (the text alternative shows it).
 */
type Overlay =
  | { kind: 'blast'; answer: Blast }
  | { kind: 'access'; answer: Access }
  | { kind: 'path'; answer: PathAnswer }
  | { kind: 'pattern'; title: string; match: Match };

interface Picture {
  title: string;
  nodes: ViewNode[];
  edges: ViewEdge[];
  root?: string;
  notes: Map<string, string>;
}

export default function GraphPage() {
  return (
    <Routes>
      <Route index element={<GraphExplorer />} />
    </Routes>
  );
}

/** `at` for the API: the point in time chosen on the page, or nothing for now. */
function atQuery(at: string | null): { at?: string } {
  return at ? { at } : {};
}

function GraphExplorer() {
  const [params, setParams] = useSearchParams();
  const agent = params.get('agent');
  const node = params.get('node');
  const depth = Math.min(3, Math.max(1, Number(params.get('depth') ?? '1') || 1));
  const at = params.get('at');
  const { can } = useSession();
  const [overlay, setOverlay] = useState<Overlay | null>(null);
  const [selected, setSelected] = useState<string | undefined>(undefined);

  const update = (changes: Record<string, string | null>) => {
    const next = currentSearchParams();
    for (const [k, v] of Object.entries(changes)) {
      if (v === null) next.delete(k);
      else next.set(k, v);
    }
    setParams(next);
  };

  const subgraph = useQuery({
    queryKey: ['graph', 'agent', agent, at],
    queryFn: () => must(api.GET('/graph/agents/{agent_id}', { params: { path: { agent_id: agent! }, query: atQuery(at) } })),
    enabled: agent !== null,
  });
  const neighbours = useQuery({
    queryKey: ['graph', 'neighbours', node, depth, at],
    queryFn: () => must(api.GET('/graph/nodes/{node_id}/neighbours', { params: { path: { node_id: node! }, query: { depth, ...atQuery(at) } } })),
    enabled: agent === null && node !== null,
  });
  const base = agent !== null ? subgraph : node !== null ? neighbours : null;

  // A new base view starts afresh: what was drawn over the old one does not belong to it.
  useEffect(() => {
    setOverlay(null);
    setSelected(agent !== null ? subgraph.data?.agent.id : (node ?? undefined));
  }, [agent, node, depth, at, subgraph.data?.agent.id]);

  const picture = useMemo(() => buildPicture(agent !== null ? subgraph.data : neighbours.data, agent !== null, overlay), [agent, subgraph.data, neighbours.data, overlay]);
  const highlighted = useMemo(() => new Set(picture?.notes.keys() ?? []), [picture]);

  return (
    <>
      <PageHeader
        title="Graph"
        description="What every agent can reach: its tools, servers, data, credentials and the people it acts for. Pick a node or an agent to draw its part of the graph."
        actions={can('risk:configure') ? <RebuildButton /> : null}
      />
      <PointInTime at={at} onChange={(v) => update({ at: v })} />
      <div className="graph-pickers">
        <NodeSearch at={at} onPick={(id) => update({ node: id, agent: null })} />
        <AgentPicker current={agent} onPick={(id) => update({ agent: id, node: null })} />
      </div>
      <Section title="Picture">
        {base === null && overlay?.kind !== 'pattern' ? (
          <Empty>Nothing drawn yet: search for a node, choose an agent, or draw a high-risk path below.</Empty>
        ) : base !== null && base.isPending && overlay?.kind !== 'pattern' ? (
          <Loading />
        ) : base !== null && base.isError && overlay?.kind !== 'pattern' ? (
          <ErrorPanel error={base.error} title="Could not load this part of the graph" />
        ) : picture ? (
          <div className="graph-layout">
            <div className="graph-main">
              <h3 className="graph-title">{picture.title}</h3>
              {agent === null && node !== null && overlay?.kind !== 'pattern' ? (
                <div className="toolbar">
                  <div className="field">
                    <label htmlFor="graph-depth">Depth</label>
                    <select id="graph-depth" value={depth} onChange={(e) => update({ depth: e.target.value })}>
                      <option value="1">1 hop</option>
                      <option value="2">2 hops</option>
                      <option value="3">3 hops</option>
                    </select>
                  </div>
                  {neighbours.data?.truncated ? <p className="notice">The neighbourhood has more than 2,000 nodes; the nearest are shown.</p> : null}
                </div>
              ) : null}
              {overlay ? (
                <p className="small">
                  <button type="button" className="link" onClick={() => setOverlay(null)}>
                    Clear the highlight
                  </button>
                </p>
              ) : null}
              <GraphView
                nodes={picture.nodes}
                edges={picture.edges}
                highlighted={highlighted}
                selected={selected}
                root={picture.root}
                description={`${picture.title}: ${picture.nodes.length} nodes and ${picture.edges.length} edges. The tables "Nodes shown" and "Edges shown" list them.`}
                onSelect={setSelected}
              />
              <ElementTables picture={picture} selected={selected} onSelect={setSelected} />
            </div>
            <aside className="graph-side" aria-label="Selected node">
              {selected ? (
                <NodePanel
                  key={selected}
                  nodeId={selected}
                  at={at}
                  picture={picture}
                  onNeighbours={(d) => update({ node: selected, agent: null, depth: String(d) })}
                  onOverlay={setOverlay}
                />
              ) : (
                <p className="muted">Select a node in the picture or in the table of nodes to see its details.</p>
              )}
            </aside>
          </div>
        ) : null}
      </Section>
      {overlay ? <OverlayDetails overlay={overlay} onSelect={setSelected} /> : null}
      <HighRiskPaths at={at} onDraw={(title, match) => setOverlay({ kind: 'pattern', title, match })} />
    </>
  );
}

/** The base view with the overlay's nodes merged in; the overlay's nodes and edges carry notes (and are highlighted). */
function buildPicture(
  data: { nodes: ViewNode[]; edges: ViewEdge[]; agent?: ViewNode } | { nodes: ViewNode[]; edges: ViewEdge[]; node_id: string } | undefined,
  isAgent: boolean,
  overlay: Overlay | null,
): Picture | null {
  const notes = new Map<string, string>();
  if (overlay?.kind === 'pattern') {
    for (const n of overlay.match.nodes) notes.set(n.id, 'on the path');
    for (const e of overlay.match.edges) notes.set(e.id, 'on the path');
    return { title: `${overlay.title}: ${overlay.match.summary}`, nodes: overlay.match.nodes, edges: overlay.match.edges, root: overlay.match.nodes[0]?.id, notes };
  }
  if (!data) return null;
  const nodes = new Map<string, ViewNode>(data.nodes.map((n) => [n.id, brief(n)]));
  const edges = new Map<string, ViewEdge>(data.edges.map((e) => [e.id, { id: e.id, kind: e.kind, from: e.from, to: e.to }]));
  const start = 'agent' in data && data.agent ? data.agent : nodes.get((data as { node_id: string }).node_id);
  let title = isAgent ? `Subgraph of the agent ${start?.label ?? ''}` : `Neighbourhood of ${start?.label ?? 'the node'}`;
  let root = start?.id;

  /** An answer that names each node's parent rather than the edge: a derived link unless an edge already joins them. */
  const linkTo = (from: string, to: string, label: string) => {
    const joined = [...edges.values()].some((e) => (e.from === from && e.to === to) || (e.from === to && e.to === from));
    if (joined) {
      for (const e of edges.values()) if ((e.from === from && e.to === to) || (e.from === to && e.to === from)) notes.set(e.id, label);
      return;
    }
    const id = `derived:${from}:${to}`;
    edges.set(id, { id, kind: label, from, to, derived: true });
    notes.set(id, label);
  };

  if (overlay?.kind === 'blast') {
    const a = overlay.answer;
    nodes.set(a.node.id, brief(a.node));
    notes.set(a.node.id, 'compromised (the start)');
    for (const x of a.affected) {
      nodes.set(x.id, brief(x));
      notes.set(x.id, `affected: ${x.impact === 'control' ? 'controlled' : 'reachable'}, depth ${x.depth}`);
      linkTo(x.parent, x.id, `affected through (${x.impact})`);
    }
    title = `Blast radius of ${a.node.label}`;
    root = a.node.id;
  } else if (overlay?.kind === 'access') {
    const a = overlay.answer;
    nodes.set(a.node.id, brief(a.node));
    notes.set(a.node.id, 'the start');
    for (const x of a.reachable) {
      nodes.set(x.id, brief(x));
      notes.set(x.id, `reachable${x.access.length ? ` (${x.access.join(', ')})` : ''}, depth ${x.depth}`);
      const parent = x.path[x.path.length - 2];
      if (parent) linkTo(parent, x.id, 'reaches');
    }
    title = `Access of ${a.node.label}`;
    root = a.node.id;
  } else if (overlay?.kind === 'path' && overlay.answer.found) {
    const p = overlay.answer;
    p.nodes.forEach((n, i) => {
      nodes.set(n.id, brief(n));
      notes.set(n.id, `on the path, step ${i + 1} of ${p.nodes.length}`);
    });
    for (const e of p.edges) {
      edges.set(e.id, { id: e.id, kind: e.kind, from: e.from, to: e.to });
      notes.set(e.id, 'on the path');
    }
    title = `Path from ${p.nodes[0]?.label} to ${p.nodes[p.nodes.length - 1]?.label}`;
    root = p.source;
  }
  return { title, nodes: [...nodes.values()], edges: [...edges.values()], root, notes };
}

function brief(n: ViewNode): ViewNode {
  return { id: n.id, kind: n.kind, label: n.label, risk_level: n.risk_level };
}

/** The text alternative of the picture: every node and edge shown; selecting a node here is the keyboard's way. */
function ElementTables({ picture, selected, onSelect }: { picture: Picture; selected?: string; onSelect: (id: string) => void }) {
  const labels = new Map(picture.nodes.map((n) => [n.id, n.label]));
  const highlighted = picture.notes.size > 0;
  return (
    <div className="graph-tables">
      <section aria-labelledby="graph-nodes-shown">
        <h3 id="graph-nodes-shown">Nodes shown ({picture.nodes.length})</h3>
        {/* Focusable, so a keyboard can scroll a long list (axe: scrollable-region-focusable). */}
        <div className="graph-scroll" tabIndex={0} role="group" aria-labelledby="graph-nodes-shown">
          <DataTable
            caption="Nodes shown in the picture"
            rows={picture.nodes}
            rowKey={(n) => n.id}
            columns={[
              {
                header: 'Node',
                cell: (n) => (
                  <button type="button" className="link" aria-pressed={n.id === selected} onClick={() => onSelect(n.id)}>
                    {n.label}
                  </button>
                ),
              },
              { header: 'Kind', cell: (n) => kindName(n.kind) },
              { header: 'Risk level', cell: (n) => <RiskLevel value={n.risk_level} /> },
              ...(highlighted ? [{ header: 'Highlighted', cell: (n: ViewNode) => picture.notes.get(n.id) ?? <span className="muted">no</span> }] : []),
            ]}
          />
        </div>
      </section>
      <section aria-labelledby="graph-edges-shown">
        <h3 id="graph-edges-shown">Edges shown ({picture.edges.length})</h3>
        {picture.edges.length === 0 ? (
          <p className="muted">No edges.</p>
        ) : (
          <div className="graph-scroll" tabIndex={0} role="group" aria-labelledby="graph-edges-shown">
            <DataTable
              caption="Edges shown in the picture"
              rows={picture.edges}
              rowKey={(e) => e.id}
              columns={[
                { header: 'From', cell: (e) => labels.get(e.from) ?? e.from },
                { header: 'Edge', cell: (e) => (e.derived ? <em>{e.kind}</em> : <code>{e.kind}</code>) },
                { header: 'To', cell: (e) => labels.get(e.to) ?? e.to },
                ...(highlighted ? [{ header: 'Highlighted', cell: (e: ViewEdge) => picture.notes.get(e.id) ?? <span className="muted">no</span> }] : []),
              ]}
            />
          </div>
        )}
      </section>
    </div>
  );
}

function NodePanel({
  nodeId,
  at,
  picture,
  onNeighbours,
  onOverlay,
}: {
  nodeId: string;
  at: string | null;
  picture: Picture;
  onNeighbours: (depth: number) => void;
  onOverlay: (o: Overlay) => void;
}) {
  const detail = useQuery({
    queryKey: ['graph', 'node', nodeId, at],
    queryFn: () => must(api.GET('/graph/nodes/{node_id}', { params: { path: { node_id: nodeId }, query: atQuery(at) } })),
  });
  const [depth, setDepth] = useState(1);
  const [target, setTarget] = useState('');
  const [directed, setDirected] = useState(false);
  const blast = useMutation({
    mutationFn: () => must(api.GET('/graph/nodes/{node_id}/blast-radius', { params: { path: { node_id: nodeId }, query: atQuery(at) } })),
    onSuccess: (answer) => onOverlay({ kind: 'blast', answer }),
  });
  const access = useMutation({
    mutationFn: () => must(api.GET('/graph/nodes/{node_id}/access', { params: { path: { node_id: nodeId }, query: atQuery(at) } })),
    onSuccess: (answer) => onOverlay({ kind: 'access', answer }),
  });
  const path = useMutation({
    mutationFn: (v: { target: string; directed: boolean }) =>
      must(api.GET('/graph/path', { params: { query: { source: nodeId, target: v.target, directed: v.directed ? 'true' : 'false', ...atQuery(at) } } })),
    onSuccess: (answer) => onOverlay({ kind: 'path', answer }),
  });
  const others = picture.nodes.filter((n) => n.id !== nodeId);
  const findPath = (e: FormEvent) => {
    e.preventDefault();
    if (target) path.mutate({ target, directed });
  };
  return (
    <QueryView query={detail}>
      {(d) => (
        <div className="stack">
          <div>
            <h3>{d.node.label}</h3>
            <p className="small muted">
              {kindName(d.node.kind)} · risk level <RiskLevel value={d.node.risk_level} />
            </p>
          </div>
          <Facts
            items={[
              ['Key', <code>{d.node.key}</code>],
              ['Source record', <><code>{d.node.source_record.table}</code> <code>{d.node.source_record.id}</code></>],
              ['Valid from', <Time value={d.node.valid_from} />],
              ['Valid to', d.node.valid_to ? <Time value={d.node.valid_to} /> : 'current'],
              ['Edges out', degree(d.degree.out)],
              ['Edges in', degree(d.degree.in)],
            ]}
          />
          <details>
            <summary>Attributes</summary>
            <JsonView value={d.node.attributes} label={`Attributes of ${d.node.label}`} />
          </details>
          <div className="graph-actions">
            <div className="toolbar">
              <div className="field">
                <label htmlFor="panel-depth">Neighbour depth</label>
                <select id="panel-depth" value={depth} onChange={(e) => setDepth(Number(e.target.value))}>
                  <option value={1}>1 hop</option>
                  <option value={2}>2 hops</option>
                  <option value={3}>3 hops</option>
                </select>
              </div>
              <button type="button" onClick={() => onNeighbours(depth)}>
                Neighbours
              </button>
            </div>
            <div className="actions">
              <button type="button" onClick={() => blast.mutate()} disabled={blast.isPending}>
                {blast.isPending ? 'Working…' : 'Blast radius'}
              </button>
              <button type="button" onClick={() => access.mutate()} disabled={access.isPending}>
                {access.isPending ? 'Working…' : 'Access'}
              </button>
            </div>
            {blast.isError ? <ErrorPanel error={blast.error} /> : null}
            {access.isError ? <ErrorPanel error={access.error} /> : null}
            <form onSubmit={findPath} className="graph-path-form">
              <div className="field">
                <label htmlFor="path-target">Path to…</label>
                <select id="path-target" value={target} onChange={(e) => setTarget(e.target.value)}>
                  <option value="">Choose a node shown</option>
                  {others.map((n) => (
                    <option key={n.id} value={n.id}>
                      {n.label} ({kindName(n.kind)})
                    </option>
                  ))}
                </select>
              </div>
              <label className="graph-check">
                <input type="checkbox" checked={directed} onChange={(e) => setDirected(e.target.checked)} /> Only along the edges’ direction
              </label>
              <button type="submit" disabled={!target || path.isPending}>
                {path.isPending ? 'Working…' : 'Find path'}
              </button>
            </form>
            {path.isError ? <ErrorPanel error={path.error} /> : null}
          </div>
        </div>
      )}
    </QueryView>
  );
}

function degree(counts: Record<string, unknown>): string {
  const parts = Object.entries(counts).map(([k, v]) => `${words(k)} ${String(v)}`);
  return parts.length ? parts.join(', ') : 'none';
}

/** The traversal's answer in full, in words: what the highlight stands for. */
function OverlayDetails({ overlay, onSelect }: { overlay: Overlay; onSelect: (id: string) => void }) {
  if (overlay.kind === 'blast') {
    const a = overlay.answer;
    const labels = new Map([[a.node.id, a.node.label], ...a.affected.map((x) => [x.id, x.label] as [string, string])]);
    return (
      <Section title={`Blast radius of ${a.node.label}`}>
        <Facts
          items={[
            ['Nodes affected', `${a.total}${a.truncated ? ' (the nearest 2,000 listed)' : ''}`],
            ['Agents an attacker could steer', String(a.controlled_agents)],
            ['Most sensitive data affected', a.most_sensitive_classification ?? 'none'],
            ['By kind', degree(a.counts_by_kind)],
            ['Regulated or restricted data', a.sensitive_data.map((s) => s.label).join(', ') || 'none'],
          ]}
        />
        {a.affected.length === 0 ? (
          <p className="muted">Nothing further is affected.</p>
        ) : (
          <DataTable
            caption={`Nodes affected if ${a.node.label} is compromised`}
            rows={a.affected}
            rowKey={(x) => x.id}
            columns={[
              { header: 'Affected node', cell: (x) => <button type="button" className="link" onClick={() => onSelect(x.id)}>{x.label}</button> },
              { header: 'Kind', cell: (x) => kindName(x.kind) },
              { header: 'Impact', cell: (x) => (x.impact === 'control' ? 'control (acts as it)' : 'reach (can use, read or change it)') },
              { header: 'Depth', cell: (x) => String(x.depth), className: 'num' },
              { header: 'Through', cell: (x) => labels.get(x.parent) ?? x.parent },
            ]}
          />
        )}
      </Section>
    );
  }
  if (overlay.kind === 'access') {
    const a = overlay.answer;
    return (
      <Section title={`Access of ${a.node.label}`}>
        <Facts
          items={[
            ['Nodes reachable', `${a.total}${a.truncated ? ' (the nearest 2,000 listed)' : ''}`],
            ['Most sensitive data reached', a.most_sensitive_classification ?? 'none'],
            ['By kind', degree(a.counts_by_kind)],
          ]}
        />
        {a.reachable.length === 0 ? (
          <p className="muted">It reaches nothing by the authority it holds.</p>
        ) : (
          <DataTable
            caption={`Nodes ${a.node.label} can reach`}
            rows={a.reachable}
            rowKey={(x) => x.id}
            columns={[
              { header: 'Reachable node', cell: (x) => <button type="button" className="link" onClick={() => onSelect(x.id)}>{x.label}</button> },
              { header: 'Kind', cell: (x) => kindName(x.kind) },
              { header: 'Access', cell: (x) => x.access.join(', ') || <span className="muted">—</span> },
              { header: 'By', cell: (x) => x.via.map(words).join(', ') },
              { header: 'Depth', cell: (x) => String(x.depth), className: 'num' },
            ]}
          />
        )}
      </Section>
    );
  }
  if (overlay.kind === 'path') {
    const p = overlay.answer;
    return (
      <Section title="Path">
        {!p.found ? (
          <p role="status">No {p.directed ? 'directed ' : ''}path joins these two nodes{p.at ? ' at that time' : ''}.</p>
        ) : (
          <PathSteps nodes={p.nodes} edges={p.edges} caption={`Path of ${p.length} ${p.length === 1 ? 'edge' : 'edges'}${p.directed ? ', along the edges’ direction' : ''}`} />
        )}
      </Section>
    );
  }
  return (
    <Section title={`High-risk path: ${overlay.title}`}>
      <PathSteps nodes={overlay.match.nodes} edges={overlay.match.edges} caption={overlay.match.summary} />
    </Section>
  );
}

/** A path's nodes in order, each with the edge that leads to the next (and its direction). */
function PathSteps({ nodes, edges, caption }: { nodes: ViewNode[]; edges: Array<{ kind: string; from: string; to: string }>; caption: string }) {
  return (
    <>
      <p>{caption}</p>
      <ol className="graph-path" aria-label="Nodes of the path, in order">
        {nodes.map((n, i) => {
          const next = nodes[i + 1];
          const edge = next ? edges.find((e) => (e.from === n.id && e.to === next.id) || (e.from === next.id && e.to === n.id)) : undefined;
          return (
            <li key={n.id}>
              <strong>{n.label}</strong> <span className="muted">({kindName(n.kind)})</span>
              {edge && next ? (
                <span className="small muted">
                  {' '}
                  {edge.from === n.id ? `— ${words(edge.kind)} →` : `← ${words(edge.kind)} —`}
                </span>
              ) : null}
            </li>
          );
        })}
      </ol>
    </>
  );
}

function PointInTime({ at, onChange }: { at: string | null; onChange: (v: string | null) => void }) {
  const [value, setValue] = useState(at ? toLocalInput(at) : '');
  useEffect(() => setValue(at ? toLocalInput(at) : ''), [at]);
  const apply = (e: FormEvent) => {
    e.preventDefault();
    onChange(value ? new Date(value).toISOString() : null);
  };
  return (
    <form className="toolbar graph-time" onSubmit={apply}>
      <div className="field">
        <label htmlFor="graph-at">Point in time</label>
        <input id="graph-at" type="datetime-local" step={1} value={value} onChange={(e) => setValue(e.target.value)} aria-describedby="graph-at-hint" />
      </div>
      <button type="submit">Show the graph then</button>
      {at ? (
        <button type="button" onClick={() => onChange(null)}>
          Back to now
        </button>
      ) : null}
      <p id="graph-at-hint" className="small muted">
        {at ? (
          <>
            Every read on this page answers the graph as it was at <Time value={at} />.
          </>
        ) : (
          'Empty: the current graph. A time in the past answers the graph as it was then.'
        )}
      </p>
    </form>
  );
}

/** An ISO time as the value of a datetime-local input, in the browser's time zone. */
function toLocalInput(iso: string): string {
  const d = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function NodeSearch({ at, onPick }: { at: string | null; onPick: (id: string) => void }) {
  const [q, setQ] = useState('');
  const [kinds, setKinds] = useState<Kind[]>([]);
  const [levels, setLevels] = useState<Level[]>([]);
  const [asked, setAsked] = useState<{ q: string; kinds: Kind[]; levels: Level[] } | null>(null);
  const result = useQuery({
    queryKey: ['graph', 'search', asked, at],
    queryFn: () =>
      must(
        api.GET('/graph', {
          params: {
            query: {
              limit: 50,
              ...(asked!.q ? { q: asked!.q } : {}),
              ...(asked!.kinds.length ? { kinds: asked!.kinds.join(',') } : {}),
              ...(asked!.levels.length ? { risk_levels: asked!.levels.join(',') } : {}),
              ...atQuery(at),
            },
          },
        }),
      ),
    enabled: asked !== null,
  });
  const toggle = <T,>(list: T[], v: T) => (list.includes(v) ? list.filter((x) => x !== v) : [...list, v]);
  return (
    <Section title="Find a node">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setAsked({ q: q.trim(), kinds, levels });
        }}
      >
        <div className="field">
          <label htmlFor="graph-q">Name or key contains</label>
          <input id="graph-q" type="search" value={q} maxLength={200} onChange={(e) => setQ(e.target.value)} />
        </div>
        <fieldset className="graph-checks">
          <legend>Kinds (none: every kind)</legend>
          {KINDS.map((k) => (
            <label key={k} className="graph-check">
              <input type="checkbox" checked={kinds.includes(k)} onChange={() => setKinds(toggle(kinds, k))} /> {kindName(k)}
            </label>
          ))}
        </fieldset>
        <fieldset className="graph-checks">
          <legend>Risk levels (none: every level)</legend>
          {LEVELS.map((l) => (
            <label key={l} className="graph-check">
              <input type="checkbox" checked={levels.includes(l)} onChange={() => setLevels(toggle(levels, l))} /> {l}
            </label>
          ))}
        </fieldset>
        <button type="submit" className="primary">
          Search
        </button>
      </form>
      {asked ? (
        <QueryView query={result} isEmpty={(r) => r.nodes.length === 0} empty="No node matches.">
          {(r) => (
            <div className="graph-results">
              <p className="small muted" role="status">
                {r.total_nodes} {r.total_nodes === 1 ? 'node matches' : 'nodes match'}
                {r.total_nodes > r.nodes.length ? `; the first ${r.nodes.length} are listed` : ''}.
              </p>
              <DataTable
                caption="Nodes found"
                rows={r.nodes}
                rowKey={(n) => n.id}
                columns={[
                  { header: 'Node', cell: (n) => <button type="button" className="link" onClick={() => onPick(n.id)} aria-label={`Draw the neighbourhood of ${n.label}`}>{n.label}</button> },
                  { header: 'Kind', cell: (n) => kindName(n.kind) },
                  { header: 'Risk level', cell: (n) => <RiskLevel value={n.risk_level} /> },
                ]}
              />
            </div>
          )}
        </QueryView>
      ) : null}
    </Section>
  );
}

function AgentPicker({ current, onPick }: { current: string | null; onPick: (id: string) => void }) {
  const agents = useQuery({
    queryKey: ['agents', 'for-graph'],
    queryFn: () => must(api.GET('/agents', { params: { query: { limit: 200 } } })),
  });
  const [choice, setChoice] = useState(current ?? '');
  useEffect(() => setChoice(current ?? ''), [current]);
  return (
    <Section title="An agent’s subgraph">
      <QueryView query={agents} isEmpty={(a) => a.items.length === 0} empty="No agent is registered yet.">
        {(a) => (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              if (choice) onPick(choice);
            }}
          >
            <div className="field">
              <label htmlFor="graph-agent">Agent</label>
              <select id="graph-agent" value={choice} onChange={(e) => setChoice(e.target.value)}>
                <option value="">Choose an agent</option>
                {a.items.map((x) => (
                  <option key={x.id} value={x.id}>
                    {x.name} ({x.environment}, {x.status})
                  </option>
                ))}
              </select>
            </div>
            <button type="submit" disabled={!choice}>
              Show its subgraph
            </button>
            <p className="small muted">Everything it can reach and its direct neighbours (owners, identities, people it acts for, model).</p>
          </form>
        )}
      </QueryView>
    </Section>
  );
}

function HighRiskPaths({ at, onDraw }: { at: string | null; onDraw: (title: string, match: Match) => void }) {
  const paths = useQuery({
    queryKey: ['graph', 'high-risk-paths', at],
    queryFn: () => must(api.GET('/graph/high-risk-paths', { params: { query: atQuery(at) } })),
  });
  const SHOWN = 20;
  return (
    <Section title="High-risk paths">
      <QueryView query={paths} isEmpty={(p) => p.patterns.every((x) => x.count === 0)} empty="No path matches a high-risk pattern.">
        {(p) => (
          <div className="stack">
            {p.patterns
              .filter((x) => x.count > 0)
              .map((x) => (
                <div key={x.key}>
                  <h3>
                    {x.title} <RiskLevel value={x.severity} /> <span className="small muted">{x.count} {x.count === 1 ? 'match' : 'matches'}</span>
                  </h3>
                  <p className="small muted">{x.description}</p>
                  <ul className="plain">
                    {x.matches.slice(0, SHOWN).map((m) => (
                      <li key={m.nodes.map((n) => n.id).join('-')}>
                        <button type="button" className="link" onClick={() => onDraw(x.title, m)}>
                          Draw: {m.summary}
                        </button>
                      </li>
                    ))}
                  </ul>
                  {x.count > SHOWN ? <p className="small muted">The first {Math.min(SHOWN, x.matches.length)} of {x.count} are listed.</p> : null}
                </div>
              ))}
          </div>
        )}
      </QueryView>
    </Section>
  );
}

function RebuildButton() {
  const queryClient = useQueryClient();
  const rebuild = useMutation({
    mutationFn: () => must(api.POST('/graph/rebuild')),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['graph'] }),
  });
  return (
    <div className="graph-rebuild">
      <button type="button" onClick={() => rebuild.mutate()} disabled={rebuild.isPending}>
        {rebuild.isPending ? 'Rebuilding…' : 'Rebuild graph'}
      </button>
      {rebuild.isSuccess ? (
        <p className="small" role="status">
          Rebuilt: {rebuild.data.nodes} nodes, {rebuild.data.edges} edges; {rebuild.data.changes.nodes_added + rebuild.data.changes.nodes_changed + rebuild.data.changes.nodes_removed} node and{' '}
          {rebuild.data.changes.edges_added + rebuild.data.changes.edges_changed + rebuild.data.changes.edges_removed} edge changes.
        </p>
      ) : null}
      {rebuild.isError ? <ErrorPanel error={rebuild.error} title="The graph was not rebuilt" /> : null}
    </div>
  );
}
