import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type ReactNode } from 'react';
import { Link, Navigate, NavLink, Route, Routes, useSearchParams } from 'react-router';
import { api, must, type Paths } from '../api/client';
import { ConfirmDialog } from '../components/confirm';
import { Badge, DataTable, Field, PageHeader, QueryView, StateBadge, Time, type Tone } from '../components/ui';
import { useSession } from '../session';
import './inventory.css';

type Item<P extends keyof Paths> = Paths[P] extends { get: { responses: { 200: { content: { 'application/json': { items: Array<infer T> } } } } } } ? T : never;
type McpServer = Item<'/mcp-servers'>;
type Tool = Item<'/tools'>;
type Credential = Item<'/resources/credentials'>;
type Model = Item<'/models'>;
type Resource = Item<'/resources'>;
type TrustState = McpServer['trust_state'];
type PrivilegeClass = Tool['privilege_class'];
type ApprovalClass = Tool['approval_class'];

const TRUST_STATES: TrustState[] = ['approved', 'unknown', 'unsigned', 'quarantined'];
const PRIVILEGE_CLASSES: PrivilegeClass[] = ['read', 'write', 'destructive', 'financial', 'admin'];
const APPROVAL_CLASSES: ApprovalClass[] = ['none', 'single', 'dual'];

/** What each trust state means for the gateway, shown where a person picks one. */
const TRUST_MEANING: Record<TrustState, string> = {
  approved: 'Its tools may be called, within bindings and policies.',
  unknown: 'Not reviewed yet.',
  unsigned: 'Its publisher could not be verified.',
  quarantined: 'Held: its tools should not be called until someone reviews it.',
};

const TRUST_TONE: Record<TrustState, Tone> = { approved: 'good', unknown: 'neutral', unsigned: 'warn', quarantined: 'bad' };

/**
 * The inventory lists are not paged by the API (each answers every record of the organisation), so the page
 * filters them here and shows them a hundred rows at a time.
 */
const PAGE_ROWS = 100;

const TABS = [
  { path: 'mcp-servers', label: 'MCP servers' },
  { path: 'tools', label: 'Tools' },
  { path: 'credentials', label: 'Credentials' },
  { path: 'models', label: 'Models' },
  { path: 'resources', label: 'Resources' },
] as const;

export default function InventoryPage() {
  return (
    <>
      <PageHeader title="Inventory" description="What agents can reach: MCP servers and their tools, credential references, models, APIs and data." />
      <nav className="tabs" aria-label="Inventory">
        {TABS.map((t) => (
          <NavLink key={t.path} to={`/inventory/${t.path}`}>
            {t.label}
          </NavLink>
        ))}
      </nav>
      <Routes>
        <Route index element={<Navigate to={TABS[0].path} replace />} />
        <Route path="mcp-servers" element={<McpServers />} />
        <Route path="tools" element={<Tools />} />
        <Route path="credentials" element={<Credentials />} />
        <Route path="models" element={<Models />} />
        <Route path="resources" element={<Resources />} />
        <Route path="*" element={<p>There is no such inventory list.</p>} />
      </Routes>
    </>
  );
}

/** The trust state as a badge whose word carries the meaning; the colour only repeats it. */
function TrustBadge({ value }: { value: TrustState }) {
  return <Badge tone={TRUST_TONE[value]}>{value}</Badge>;
}

function useMcpServers() {
  return useQuery({ queryKey: ['inventory', 'mcp-servers'], queryFn: () => must(api.GET('/mcp-servers')) });
}

/** A list filter kept in the address, so a filtered list can be linked to and survives a reload. */
function useFilter(name: string): [string, (value: string) => void] {
  const [params, setParams] = useSearchParams();
  const set = (value: string) =>
    setParams(
      (p) => {
        const next = new URLSearchParams(p);
        if (value) next.set(name, value);
        else next.delete(name);
        return next;
      },
      { replace: true },
    );
  return [params.get(name) ?? '', set];
}

function matches(q: string, ...texts: Array<string | null | undefined>): boolean {
  if (!q) return true;
  const needle = q.toLowerCase();
  return texts.some((t) => t?.toLowerCase().includes(needle));
}

function SearchField({ label, value, onChange }: { label: string; value: string; onChange: (v: string) => void }) {
  return <Field label={label}>{(id) => <input id={id} type="search" value={value} onChange={(e) => onChange(e.target.value)} />}</Field>;
}

function SelectField<T extends string>({ label, value, options, onChange, all = 'All' }: { label: string; value: string; options: ReadonlyArray<T | [T, string]>; onChange: (v: string) => void; all?: string }) {
  return (
    <Field label={label}>
      {(id) => (
        <select id={id} value={value} onChange={(e) => onChange(e.target.value)}>
          <option value="">{all}</option>
          {options.map((o) => {
            const [v, text] = Array.isArray(o) ? o : [o, o.replaceAll('_', ' ')];
            return (
              <option key={v} value={v}>
                {text}
              </option>
            );
          })}
        </select>
      )}
    </Field>
  );
}

/** A filtered list shown PAGE_ROWS at a time, with the count of what the filters kept. */
function ShownRows<T>({ rows, total, noun, children }: { rows: T[]; total: number; noun: string; children: (rows: T[]) => ReactNode }) {
  const [shown, setShown] = useState(PAGE_ROWS);
  return (
    <>
      <p className="small muted" role="status">
        {rows.length === total ? `${total} ${noun}` : `${rows.length} of ${total} ${noun} match the filters`}
      </p>
      {children(rows.slice(0, shown))}
      {rows.length > shown ? (
        <button type="button" className="load-more" onClick={() => setShown((n) => n + PAGE_ROWS)}>
          Show more ({rows.length - shown} more)
        </button>
      ) : null}
    </>
  );
}

function Done({ message }: { message: string | null }) {
  return message ? (
    <p className="success" role="status">
      {message}
    </p>
  ) : null;
}

// MCP servers

function McpServers() {
  const { can } = useSession();
  const queryClient = useQueryClient();
  const servers = useMcpServers();
  const [q, setQ] = useFilter('q');
  const [trust, setTrust] = useFilter('trust_state');
  const [target, setTarget] = useState<McpServer | null>(null);
  const [next, setNext] = useState<TrustState>('approved');
  const [done, setDone] = useState<string | null>(null);
  const change = useMutation({
    mutationFn: (v: { server: McpServer; trust_state: TrustState; reason: string }) =>
      must(api.PATCH('/mcp-servers/{server_id}', { params: { path: { server_id: v.server.id } }, body: { trust_state: v.trust_state, reason: v.reason } })),
    onSuccess: (s) => {
      void queryClient.invalidateQueries({ queryKey: ['inventory'] });
      setDone(`${s.name} is now ${s.trust_state}.`);
      setTarget(null);
    },
  });
  const control = can('inventory:control');
  const open = (s: McpServer) => {
    change.reset();
    setDone(null);
    setNext(s.trust_state === 'approved' ? 'quarantined' : 'approved');
    setTarget(s);
  };
  return (
    <>
      <div className="toolbar">
        <SearchField label="Search name or endpoint" value={q} onChange={setQ} />
        <SelectField label="Trust state" value={trust} options={TRUST_STATES} onChange={setTrust} />
      </div>
      <Done message={done} />
      <QueryView query={servers} isEmpty={(d) => d.items.length === 0} empty="No MCP server is registered. Discovery runs and the Kubernetes controller add them.">
        {(d) => {
          const rows = d.items.filter((s) => matches(q, s.name, s.endpoint) && (!trust || s.trust_state === trust));
          return (
            <ShownRows rows={rows} total={d.items.length} noun="MCP servers">
              {(page) =>
                page.length === 0 ? (
                  <p className="empty">No MCP server matches these filters.</p>
                ) : (
                  <DataTable
                    caption="MCP servers"
                    rows={page}
                    rowKey={(s) => s.id}
                    columns={[
                      { header: 'Name', cell: (s) => <strong>{s.name}</strong> },
                      { header: 'Endpoint', cell: (s) => <code className="wrap">{s.endpoint}</code> },
                      { header: 'Transport', cell: (s) => s.transport.replaceAll('_', ' ') },
                      { header: 'Trust state', cell: (s) => <TrustBadge value={s.trust_state} /> },
                      {
                        header: 'Tools',
                        className: 'num',
                        cell: (s) => <Link to={`/inventory/tools?mcp_server_id=${s.id}`} aria-label={`${s.tool_count} tools of ${s.name}`}>{s.tool_count}</Link>,
                      },
                      { header: 'Publisher', cell: (s) => s.publisher ?? <span className="muted">—</span> },
                      { header: 'Source', cell: (s) => s.source },
                      { header: 'Last seen', cell: (s) => <Time value={s.last_seen_at} /> },
                      ...(control
                        ? [
                            {
                              header: 'Actions',
                              cell: (s: McpServer) => (
                                <div className="row-actions">
                                  <button type="button" onClick={() => open(s)} aria-label={`Change trust state of ${s.name}`}>
                                    Change trust state
                                  </button>
                                </div>
                              ),
                            },
                          ]
                        : []),
                    ]}
                  />
                )
              }
            </ShownRows>
          );
        }}
      </QueryView>
      <ConfirmDialog
        open={target !== null}
        title={`Change the trust state of ${target?.name ?? ''}`}
        confirmLabel="Change trust state"
        danger={next === 'quarantined'}
        reason={{ label: 'Reason', required: true }}
        busy={change.isPending}
        error={change.error}
        onConfirm={(reason) => target && change.mutate({ server: target, trust_state: next, reason })}
        onClose={() => setTarget(null)}
      >
        {target ? (
          <>
            <p>
              <code className="wrap">{target.endpoint}</code> is <TrustBadge value={target.trust_state} /> now. The change is audited with your reason and
              recorded as evidence.
            </p>
            <Field label="New trust state" hint={TRUST_MEANING[next]}>
              {(id, hint) => (
                <select id={id} aria-describedby={hint} value={next} onChange={(e) => setNext(e.target.value as TrustState)}>
                  {TRUST_STATES.map((s) => (
                    <option key={s} value={s}>
                      {s}
                      {s === target.trust_state ? ' (current)' : ''}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          </>
        ) : null}
      </ConfirmDialog>
    </>
  );
}

// Tools

function Tools() {
  const { can } = useSession();
  const queryClient = useQueryClient();
  const [serverId, setServerId] = useFilter('mcp_server_id');
  const [privilege, setPrivilege] = useFilter('privilege_class');
  const [q, setQ] = useFilter('q');
  const [blockedOnly, setBlockedOnly] = useFilter('blocked');
  const servers = useMcpServers();
  const query = {
    ...(serverId ? { mcp_server_id: serverId } : {}),
    ...((PRIVILEGE_CLASSES as string[]).includes(privilege) ? { privilege_class: privilege as PrivilegeClass } : {}),
  };
  const tools = useQuery({ queryKey: ['inventory', 'tools', query], queryFn: () => must(api.GET('/tools', { params: { query } })) });
  const serverName = new Map((servers.data?.items ?? []).map((s) => [s.id, s.name]));

  const [blocking, setBlocking] = useState<Tool | null>(null);
  const [classing, setClassing] = useState<Tool | null>(null);
  const [classes, setClasses] = useState<{ privilege_class: PrivilegeClass; approval_class: ApprovalClass }>({ privilege_class: 'read', approval_class: 'none' });
  const [done, setDone] = useState<string | null>(null);
  const block = useMutation({
    mutationFn: (v: { tool: Tool; reason: string }) =>
      must(api.POST('/tools/{tool_id}/block', { params: { path: { tool_id: v.tool.id } }, body: { blocked: !v.tool.blocked, reason: v.reason, confirm: true } })),
    onSuccess: (t) => {
      void queryClient.invalidateQueries({ queryKey: ['inventory', 'tools'] });
      setDone(t.blocked ? `${t.tool_key} is blocked for every agent.` : `${t.tool_key} is unblocked.`);
      setBlocking(null);
    },
  });
  const reclassify = useMutation({
    mutationFn: (v: { tool: Tool; privilege_class: PrivilegeClass; approval_class: ApprovalClass }) =>
      must(api.PATCH('/tools/{tool_id}', { params: { path: { tool_id: v.tool.id } }, body: { privilege_class: v.privilege_class, approval_class: v.approval_class } })),
    onSuccess: (t) => {
      void queryClient.invalidateQueries({ queryKey: ['inventory', 'tools'] });
      setDone(`${t.tool_key} is now ${t.privilege_class}, approval ${t.approval_class}.`);
      setClassing(null);
    },
  });
  const control = can('inventory:control');
  const write = can('inventory:write');
  return (
    <>
      <div className="toolbar">
        <SearchField label="Search key or name" value={q} onChange={setQ} />
        <SelectField
          label="MCP server"
          value={serverId}
          options={(servers.data?.items ?? []).map((s) => [s.id, s.name] as [string, string])}
          onChange={setServerId}
          all="Any server"
        />
        <SelectField label="Privilege class" value={privilege} options={PRIVILEGE_CLASSES} onChange={setPrivilege} />
        <div className="field checkbox-field">
          <label>
            <input type="checkbox" checked={blockedOnly === 'true'} onChange={(e) => setBlockedOnly(e.target.checked ? 'true' : '')} /> Blocked only
          </label>
        </div>
      </div>
      <Done message={done} />
      <QueryView query={tools} isEmpty={(d) => d.items.length === 0} empty={serverId || privilege ? 'No tool matches these filters.' : 'No tool is registered.'}>
        {(d) => {
          const rows = d.items.filter((t) => matches(q, t.tool_key, t.name, t.title) && (blockedOnly !== 'true' || t.blocked));
          return (
            <ShownRows rows={rows} total={d.items.length} noun="tools">
              {(page) =>
                page.length === 0 ? (
                  <p className="empty">No tool matches these filters.</p>
                ) : (
                  <DataTable
                    caption="Tools"
                    rows={page}
                    rowKey={(t) => t.id}
                    columns={[
                      { header: 'Key', cell: (t) => <code>{t.tool_key}</code> },
                      { header: 'Name', cell: (t) => t.title ?? t.name },
                      { header: 'Server', cell: (t) => (t.mcp_server_id ? serverName.get(t.mcp_server_id) ?? <code>{t.mcp_server_id.slice(0, 8)}</code> : <span className="muted">—</span>) },
                      {
                        header: 'Privilege class',
                        cell: (t) => (
                          <>
                            {t.privilege_class} <span className="small muted">({t.privilege_source === 'staff' ? 'set by staff' : t.privilege_source})</span>
                            {t.read_only_hint && t.privilege_class !== 'read' ? <span className="small muted"> · server says read-only</span> : null}
                          </>
                        ),
                      },
                      { header: 'Approval class', cell: (t) => t.approval_class },
                      { header: 'Blocked', cell: (t) => (t.blocked ? <Badge tone="bad">blocked</Badge> : <span>no</span>) },
                      ...(control || write
                        ? [
                            {
                              header: 'Actions',
                              cell: (t: Tool) => (
                                <div className="row-actions">
                                  {control ? (
                                    <button
                                      type="button"
                                      className={t.blocked ? undefined : 'danger'}
                                      aria-label={`${t.blocked ? 'Unblock' : 'Block'} ${t.tool_key}`}
                                      onClick={() => {
                                        block.reset();
                                        setDone(null);
                                        setBlocking(t);
                                      }}
                                    >
                                      {t.blocked ? 'Unblock' : 'Block'}
                                    </button>
                                  ) : null}
                                  {write ? (
                                    <button
                                      type="button"
                                      aria-label={`Reclassify ${t.tool_key}`}
                                      onClick={() => {
                                        reclassify.reset();
                                        setDone(null);
                                        setClasses({ privilege_class: t.privilege_class, approval_class: t.approval_class });
                                        setClassing(t);
                                      }}
                                    >
                                      Reclassify
                                    </button>
                                  ) : null}
                                </div>
                              ),
                            },
                          ]
                        : []),
                    ]}
                  />
                )
              }
            </ShownRows>
          );
        }}
      </QueryView>
      <ConfirmDialog
        open={blocking !== null}
        title={blocking?.blocked ? `Unblock ${blocking.tool_key}` : `Block ${blocking?.tool_key ?? ''}`}
        confirmLabel={blocking?.blocked ? 'Unblock tool' : 'Block tool'}
        danger={!blocking?.blocked}
        reason={{ label: 'Reason', required: true }}
        busy={block.isPending}
        error={block.error}
        onConfirm={(reason) => blocking && block.mutate({ tool: blocking, reason })}
        onClose={() => setBlocking(null)}
      >
        <p>
          {blocking?.blocked
            ? 'Agents holding a binding may call this tool again, as their policies allow.'
            : 'Every agent’s call of this tool is denied (TOOL_BLOCKED) from the next decision on, whatever its bindings say.'}
        </p>
      </ConfirmDialog>
      <ConfirmDialog
        open={classing !== null}
        title={`Reclassify ${classing?.tool_key ?? ''}`}
        confirmLabel="Save classification"
        busy={reclassify.isPending}
        error={reclassify.error}
        onConfirm={() => classing && reclassify.mutate({ tool: classing, ...classes })}
        onClose={() => setClassing(null)}
      >
        <p>A class set here is kept by later discovery runs, whatever the server declares.</p>
        <Field label="Privilege class">
          {(id) => (
            <select id={id} value={classes.privilege_class} onChange={(e) => setClasses((c) => ({ ...c, privilege_class: e.target.value as PrivilegeClass }))}>
              {PRIVILEGE_CLASSES.map((c) => (
                <option key={c}>{c}</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Approval class" hint="single: one person approves each call; dual: two different people.">
          {(id, hint) => (
            <select id={id} aria-describedby={hint} value={classes.approval_class} onChange={(e) => setClasses((c) => ({ ...c, approval_class: e.target.value as ApprovalClass }))}>
              {APPROVAL_CLASSES.map((c) => (
                <option key={c}>{c}</option>
              ))}
            </select>
          )}
        </Field>
      </ConfirmDialog>
    </>
  );
}

// Credential references

function Credentials() {
  const { can } = useSession();
  const queryClient = useQueryClient();
  const credentials = useQuery({ queryKey: ['inventory', 'credentials'], queryFn: () => must(api.GET('/resources/credentials')) });
  const [q, setQ] = useFilter('q');
  const [status, setStatus] = useFilter('status');
  const [acting, setActing] = useState<{ credential: Credential; action: 'revoke' | 'rotate' } | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const act = useMutation({
    mutationFn: (v: { credential: Credential; action: 'revoke' | 'rotate'; reason: string }) =>
      must(api.POST('/resources/credentials/{credential_id}/action', { params: { path: { credential_id: v.credential.id } }, body: { action: v.action, reason: v.reason, confirm: true } })),
    onSuccess: (c, v) => {
      void queryClient.invalidateQueries({ queryKey: ['inventory', 'credentials'] });
      setDone(v.action === 'revoke' ? `${c.name} is revoked.` : `The rotation of ${c.name} is recorded.`);
      setActing(null);
    },
  });
  const control = can('agent:control');
  const start = (credential: Credential, action: 'revoke' | 'rotate') => {
    act.reset();
    setDone(null);
    setActing({ credential, action });
  };
  return (
    <>
      <p className="muted">Tollgate keeps where each secret lives (its store and path), never the secret itself.</p>
      <div className="toolbar">
        <SearchField label="Search name or path" value={q} onChange={setQ} />
        <SelectField label="Status" value={status} options={['active', 'revoked']} onChange={setStatus} />
      </div>
      <Done message={done} />
      <QueryView query={credentials} isEmpty={(d) => d.items.length === 0} empty="No credential reference is registered.">
        {(d) => {
          const rows = d.items.filter((c) => matches(q, c.name, c.secret_path) && (!status || c.status === status));
          return (
            <ShownRows rows={rows} total={d.items.length} noun="credential references">
              {(page) =>
                page.length === 0 ? (
                  <p className="empty">No credential reference matches these filters.</p>
                ) : (
                  <DataTable
                    caption="Credential references"
                    rows={page}
                    rowKey={(c) => c.id}
                    columns={[
                      { header: 'Name', cell: (c) => <strong>{c.name}</strong> },
                      { header: 'Store', cell: (c) => c.provider.replaceAll('_', ' ') },
                      { header: 'Reference', cell: (c) => <code className="wrap">{c.secret_path}</code> },
                      { header: 'Type', cell: (c) => c.credential_type.replaceAll('_', ' ') },
                      { header: 'Scope', cell: (c) => c.scope || <span className="muted">—</span> },
                      { header: 'Status', cell: (c) => <StateBadge value={c.status} /> },
                      { header: 'Last rotated', cell: (c) => <Time value={c.last_rotated_at} /> },
                      { header: 'Rotate every', cell: (c) => (c.rotation_interval_days ? `${c.rotation_interval_days} days` : <span className="muted">—</span>) },
                      ...(control
                        ? [
                            {
                              header: 'Actions',
                              cell: (c: Credential) =>
                                c.status === 'active' ? (
                                  <div className="row-actions">
                                    <button type="button" aria-label={`Record rotation of ${c.name}`} onClick={() => start(c, 'rotate')}>
                                      Record rotation
                                    </button>
                                    <button type="button" className="danger" aria-label={`Revoke ${c.name}`} onClick={() => start(c, 'revoke')}>
                                      Revoke
                                    </button>
                                  </div>
                                ) : (
                                  <span className="muted">—</span>
                                ),
                            },
                          ]
                        : []),
                    ]}
                  />
                )
              }
            </ShownRows>
          );
        }}
      </QueryView>
      <ConfirmDialog
        open={acting !== null}
        title={acting?.action === 'revoke' ? `Revoke ${acting.credential.name}` : `Record the rotation of ${acting?.credential.name ?? ''}`}
        confirmLabel={acting?.action === 'revoke' ? 'Revoke' : 'Record rotation'}
        danger={acting?.action === 'revoke'}
        reason={{ label: 'Reason', required: true }}
        busy={act.isPending}
        error={act.error}
        onConfirm={(reason) => acting && act.mutate({ ...acting, reason })}
        onClose={() => setActing(null)}
      >
        <p>
          {acting?.action === 'revoke'
            ? 'A revoked reference is permanent: integrations and tools using it can no longer get their secret through Tollgate.'
            : 'The secret store rotates the secret; Tollgate records that it was rotated, and when.'}
        </p>
      </ConfirmDialog>
    </>
  );
}

// Models and resources: read-only lists

function Models() {
  const models = useQuery({ queryKey: ['inventory', 'models'], queryFn: () => must(api.GET('/models')) });
  const [q, setQ] = useFilter('q');
  const [approved, setApproved] = useFilter('approved');
  return (
    <>
      <div className="toolbar">
        <SearchField label="Search provider or model" value={q} onChange={setQ} />
        <SelectField label="Approved" value={approved} options={[['yes', 'Approved'], ['no', 'Not approved']] as Array<[string, string]>} onChange={setApproved} />
      </div>
      <QueryView query={models} isEmpty={(d) => d.items.length === 0} empty="No model is registered.">
        {(d) => {
          const rows = d.items.filter((m) => matches(q, m.provider, m.model_name) && (!approved || m.approved === (approved === 'yes')));
          return (
            <ShownRows rows={rows} total={d.items.length} noun="models">
              {(page) =>
                page.length === 0 ? (
                  <p className="empty">No model matches these filters.</p>
                ) : (
                  <DataTable
                    caption="Models"
                    rows={page}
                    rowKey={(m: Model) => m.id}
                    columns={[
                      { header: 'Provider', cell: (m) => m.provider },
                      { header: 'Model', cell: (m) => <strong>{m.model_name}</strong> },
                      { header: 'Version', cell: (m) => m.model_version ?? <span className="muted">—</span> },
                      { header: 'Hosting', cell: (m) => m.hosting.replaceAll('_', ' ') },
                      { header: 'Data policy', cell: (m) => m.data_policy.replaceAll('_', ' ') },
                      { header: 'Approved', cell: (m) => (m.approved ? <Badge tone="good">approved</Badge> : <Badge tone="warn">not approved</Badge>) },
                      { header: 'Highest data it may see', cell: (m) => m.max_data_classification ?? <span className="muted">—</span> },
                    ]}
                  />
                )
              }
            </ShownRows>
          );
        }}
      </QueryView>
    </>
  );
}

function Resources() {
  const resources = useQuery({ queryKey: ['inventory', 'resources'], queryFn: () => must(api.GET('/resources')) });
  const [q, setQ] = useFilter('q');
  const [type, setType] = useFilter('resource_type');
  const [classification, setClassification] = useFilter('classification');
  const dash = <span className="muted">—</span>;
  return (
    <>
      <div className="toolbar">
        <SearchField label="Search name or system" value={q} onChange={setQ} />
        <SelectField label="Type" value={type} options={[['api', 'API'], ['data', 'Data']] as Array<[string, string]>} onChange={setType} />
        <SelectField
          label="Classification"
          value={classification}
          options={[...new Set((resources.data?.items ?? []).map((r) => r.classification).filter((c): c is string => !!c))].sort()}
          onChange={setClassification}
          all="Any"
        />
      </div>
      <QueryView query={resources} isEmpty={(d) => d.items.length === 0} empty="No API or data resource is registered.">
        {(d) => {
          const rows = d.items.filter((r) => matches(q, r.name, r.system) && (!type || r.resource_type === type) && (!classification || r.classification === classification));
          return (
            <ShownRows rows={rows} total={d.items.length} noun="resources">
              {(page) =>
                page.length === 0 ? (
                  <p className="empty">No resource matches these filters.</p>
                ) : (
                  <DataTable
                    caption="API and data resources"
                    rows={page}
                    rowKey={(r: Resource) => r.id}
                    columns={[
                      { header: 'Name', cell: (r) => <strong>{r.name}</strong> },
                      { header: 'Type', cell: (r) => (r.resource_type === 'api' ? 'API' : 'Data') },
                      { header: 'System', cell: (r) => r.system },
                      { header: 'Address', cell: (r) => (r.base_url ? <code className="wrap">{r.base_url}</code> : dash) },
                      { header: 'Kind or auth', cell: (r) => (r.resource_type === 'api' ? r.auth_type : r.kind) ?? dash },
                      { header: 'Classification', cell: (r) => r.classification ?? dash },
                      { header: 'Personal data', cell: (r) => (r.contains_personal_data === null ? dash : r.contains_personal_data ? 'yes' : 'no') },
                      { header: 'Criticality', cell: (r) => r.criticality ?? dash },
                      { header: 'Region', cell: (r) => r.region ?? dash },
                    ]}
                  />
                )
              }
            </ShownRows>
          );
        }}
      </QueryView>
    </>
  );
}
