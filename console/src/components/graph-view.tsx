import cytoscape, { type Core, type ElementDefinition, type StylesheetJson } from 'cytoscape';
import { useEffect, useRef } from 'react';

/** A node as the traversals name it: the picture needs no more. */
export interface ViewNode {
  id: string;
  kind: string;
  label: string;
  risk_level: string;
}

/**
 * An edge of the graph, or (`derived`) a link the page drew from an answer that names a parent node
 * rather than an edge (blast radius, access): shown dashed, and named as such in the text alternative.
 */
export interface ViewEdge {
  id: string;
  kind: string;
  from: string;
  to: string;
  derived?: boolean;
}

export const KIND_NAMES: Record<string, string> = {
  agent: 'Agent',
  tool: 'Tool',
  mcp_server: 'MCP server',
  model: 'Model',
  api_resource: 'API resource',
  data_resource: 'Data resource',
  credential_ref: 'Credential reference',
  workload_identity: 'Workload identity',
  delegation_principal: 'Delegation principal',
  owner: 'Owner',
};

/** Colour and shape of each kind: the shape tells kinds apart where the colour cannot (the legend names both). */
export const KIND_LOOK: Record<string, { colour: string; shape: cytoscape.Css.NodeShape; shapeName: string }> = {
  agent: { colour: '#1f3a5f', shape: 'ellipse', shapeName: 'circle' },
  tool: { colour: '#2f7d4a', shape: 'round-rectangle', shapeName: 'rounded square' },
  mcp_server: { colour: '#7b3fa0', shape: 'hexagon', shapeName: 'hexagon' },
  model: { colour: '#b0570b', shape: 'diamond', shapeName: 'diamond' },
  api_resource: { colour: '#0b6e8a', shape: 'rectangle', shapeName: 'square' },
  data_resource: { colour: '#a3245d', shape: 'barrel', shapeName: 'barrel' },
  credential_ref: { colour: '#8a6d00', shape: 'tag', shapeName: 'tag' },
  workload_identity: { colour: '#4a5a6a', shape: 'pentagon', shapeName: 'pentagon' },
  delegation_principal: { colour: '#5b6b1f', shape: 'triangle', shapeName: 'triangle' },
  owner: { colour: '#6b4f3a', shape: 'star', shapeName: 'star' },
};

const RISK_BORDER: Record<string, number> = { low: 1, medium: 2, high: 4, critical: 6 };

const STYLE: StylesheetJson = [
  {
    selector: 'node',
    style: {
      label: 'data(label)',
      'background-color': 'data(colour)',
      shape: 'data(shape)' as never,
      width: 30,
      height: 30,
      'border-color': '#1b1f24',
      'border-width': 'data(border)',
      color: '#1b1f24',
      'font-size': 11,
      'text-valign': 'bottom',
      'text-margin-y': 4,
      'text-wrap': 'ellipsis',
      'text-max-width': '140px',
      'text-background-color': '#ffffff',
      'text-background-opacity': 0.85,
      'text-background-padding': '2px',
    },
  },
  {
    selector: 'edge',
    style: {
      width: 1.5,
      'line-color': '#8a939e',
      'target-arrow-color': '#8a939e',
      'target-arrow-shape': 'triangle',
      'curve-style': 'bezier',
      label: 'data(kind)',
      'font-size': 9,
      color: '#555d68',
      'text-rotation': 'autorotate',
      'text-background-color': '#ffffff',
      'text-background-opacity': 0.85,
    },
  },
  { selector: 'edge.derived', style: { 'line-style': 'dashed' } },
  // Highlighting changes size and outline as well as colour, so it does not rest on colour alone.
  { selector: 'node.highlighted', style: { 'overlay-color': '#b45309', 'overlay-opacity': 0.25, 'overlay-padding': 6, width: 38, height: 38 } },
  { selector: 'edge.highlighted', style: { width: 4, 'line-color': '#b45309', 'target-arrow-color': '#b45309' } },
  { selector: '.faded', style: { opacity: 0.35 } },
  { selector: 'node.chosen', style: { 'border-color': '#b45309', 'border-width': 6, 'border-style': 'double' } },
];

/**
 * Cytoscape prepends an inline <style> element to <head> unless one with this id exists; the console's
 * Content-Security-Policy (style-src 'self') refuses inline styles, so a placeholder with that id goes
 * first and graph.css gives the container the `position: relative` the inline style would have.
 */
const CYTOSCAPE_STYLESHEET_ID = '__________cytoscape_stylesheet';
function claimCytoscapeStylesheet() {
  if (document.getElementById(CYTOSCAPE_STYLESHEET_ID)) return;
  const marker = document.createElement('meta');
  marker.id = CYTOSCAPE_STYLESHEET_ID;
  marker.name = 'cytoscape-stylesheet';
  marker.content = 'provided by the console stylesheet';
  document.head.prepend(marker);
}

/**
 * The picture of a part of the graph, drawn with cytoscape.js on a canvas. A canvas says nothing to a
 * screen reader: the page puts a table of the same nodes and edges beside it, and selecting works there
 * too (the keyboard's way in). Clicking a node here reports it through `onSelect`.
 */
export function GraphView({
  nodes,
  edges,
  highlighted,
  selected,
  root,
  description,
  onSelect,
}: {
  nodes: ViewNode[];
  edges: ViewEdge[];
  highlighted: ReadonlySet<string>;
  selected?: string;
  root?: string;
  description: string;
  onSelect: (id: string) => void;
}) {
  const container = useRef<HTMLDivElement>(null);
  const cy = useRef<Core | null>(null);
  const select = useRef(onSelect);
  select.current = onSelect;

  useEffect(() => {
    claimCytoscapeStylesheet();
    const instance = cytoscape({ container: container.current, style: STYLE, minZoom: 0.2, maxZoom: 1.6, wheelSensitivity: 0.3, boxSelectionEnabled: false, autoungrabify: false });
    instance.on('tap', 'node', (e) => select.current(e.target.id()));
    cy.current = instance;
    return () => {
      instance.destroy();
      cy.current = null;
    };
  }, []);

  useEffect(() => {
    const c = cy.current;
    if (!c) return;
    const known = new Set(nodes.map((n) => n.id));
    const elements: ElementDefinition[] = [
      ...nodes.map((n) => ({
        group: 'nodes' as const,
        data: { id: n.id, label: n.label, kind: n.kind, colour: KIND_LOOK[n.kind]?.colour ?? '#555d68', shape: KIND_LOOK[n.kind]?.shape ?? 'ellipse', border: RISK_BORDER[n.risk_level] ?? 1 },
      })),
      ...edges
        .filter((e) => known.has(e.from) && known.has(e.to))
        .map((e) => ({ group: 'edges' as const, data: { id: e.id, source: e.from, target: e.to, kind: e.derived ? '' : e.kind }, classes: e.derived ? 'derived' : '' })),
    ];
    c.batch(() => {
      c.elements().remove();
      c.add(elements);
    });
    const roots = root && known.has(root) ? [root] : undefined;
    c.layout(
      roots
        ? { name: 'breadthfirst', roots, directed: false, spacingFactor: 1.1, animate: false, padding: 24 }
        : { name: 'cose', animate: false, randomize: false, padding: 24, nodeRepulsion: () => 8000 },
    ).run();
  }, [nodes, edges, root]);

  useEffect(() => {
    const c = cy.current;
    if (!c) return;
    c.batch(() => {
      c.elements().removeClass('highlighted faded chosen');
      if (highlighted.size > 0) {
        c.elements().forEach((el) => {
          el.addClass(highlighted.has(el.id()) ? 'highlighted' : 'faded');
        });
      }
      if (selected) c.getElementById(selected).addClass('chosen');
    });
  }, [highlighted, selected, nodes, edges]);

  return (
    <figure className="graph-figure">
      <div ref={container} className="graph-canvas" role="img" aria-label={description} />
      <figcaption className="graph-legend">
        <span className="sr-only">Legend: </span>
        {Object.entries(KIND_LOOK)
          .filter(([kind]) => nodes.some((n) => n.kind === kind))
          .map(([kind, look]) => (
            <span key={kind} className="graph-legend-item">
              <span className={`graph-swatch graph-swatch-${kind}`} aria-hidden="true" />
              {KIND_NAMES[kind]} ({look.shapeName})
            </span>
          ))}
        <span className="graph-legend-item">Thicker outline: higher risk level</span>
        {highlighted.size > 0 ? <span className="graph-legend-item">Highlighted: larger, with an orange halo; the rest faded</span> : null}
      </figcaption>
    </figure>
  );
}
