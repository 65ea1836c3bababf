import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent, type ReactNode } from 'react';
import { Link, Route, Routes, useParams, useSearchParams } from 'react-router';
import { api, must, type Paths } from '../api/client';
import { choiceParam, useAgent, usePaged } from '../api/hooks';
import { Badge, DataTable, ErrorPanel, Facts, Field, JsonView, LoadMore, PageHeader, QueryView, Section, Time, type Tone } from '../components/ui';
import { useSession } from '../session';
import './findings.css';

type Finding = Paths['/findings/{finding_id}']['get']['responses'][200]['content']['application/json'];
type Status = Finding['status'];
type Severity = Finding['severity'];

const STATUSES: Status[] = ['open', 'in_progress', 'resolved', 'accepted', 'false_positive'];
const SEVERITIES: Severity[] = ['critical', 'high', 'medium', 'low'];

const STATUS_WORDS: Record<Status, string> = {
  open: 'open',
  in_progress: 'in progress',
  resolved: 'resolved',
  accepted: 'accepted (risk taken)',
  false_positive: 'false positive',
};
const STATUS_TONE: Record<Status, Tone> = { open: 'warn', in_progress: 'info', resolved: 'good', accepted: 'neutral', false_positive: 'neutral' };
const SEVERITY_TONE: Record<Severity, Tone> = { critical: 'bad', high: 'bad', medium: 'warn', low: 'info' };

export default function FindingsPage() {
  return (
    <Routes>
      <Route index element={<FindingList />} />
      <Route path=":findingId" element={<FindingDetail />} />
    </Routes>
  );
}

function StatusBadge({ value }: { value: Status }) {
  return <Badge tone={STATUS_TONE[value]}>{STATUS_WORDS[value]}</Badge>;
}

function SeverityBadge({ value }: { value: Severity }) {
  return <Badge tone={SEVERITY_TONE[value]}>{value}</Badge>;
}

const TEXT_FILTERS = ['q', 'category'] as const;

function FindingList() {
  const [params, setParams] = useSearchParams();
  const status = choiceParam(params, 'status', STATUSES);
  const severity = choiceParam(params, 'severity', SEVERITIES);
  const q = params.get('q') ?? '';
  const category = params.get('category') ?? '';
  const agentId = params.get('agent_id') ?? '';
  const query = {
    ...(status ? { status } : {}),
    ...(severity ? { severity } : {}),
    ...(q ? { q } : {}),
    ...(category ? { category } : {}),
    ...(agentId ? { agent_id: agentId } : {}),
  };
  const filtered = Object.keys(query).length > 0;
  const list = usePaged(['findings', query], (cursor) => must(api.GET('/findings', { params: { query: { ...query, limit: 50, ...(cursor ? { cursor } : {}) } } })));

  // Text filters apply when the form is sent, not on every key; the lists apply at once.
  const [draft, setDraft] = useState({ q, category });
  const set = (changes: Record<string, string>) =>
    setParams(
      (p) => {
        const next = new URLSearchParams(p);
        for (const [k, v] of Object.entries(changes)) {
          if (v) next.set(k, v);
          else next.delete(k);
        }
        return next;
      },
      { replace: true },
    );
  const submit = (e: FormEvent) => {
    e.preventDefault();
    set({ q: draft.q.trim(), category: draft.category.trim() });
  };
  const clear = () => {
    setDraft({ q: '', category: '' });
    setParams({}, { replace: true });
  };

  return (
    <>
      <PageHeader title="Findings" description="What discovery and risk scoring want a person to look at, newest first." />
      <form className="toolbar" role="search" aria-label="Filter findings" onSubmit={submit}>
        <Field label="Status">
          {(id) => (
            <select id={id} value={status ?? ''} onChange={(e) => set({ status: e.target.value })}>
              <option value="">Any status</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {STATUS_WORDS[s]}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Severity">
          {(id) => (
            <select id={id} value={severity ?? ''} onChange={(e) => set({ severity: e.target.value })}>
              <option value="">Any severity</option>
              {SEVERITIES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          )}
        </Field>
        {TEXT_FILTERS.map((name) => (
          <Field key={name} label={name === 'q' ? 'Search title and description' : 'Category'}>
            {(id) => (
              <input
                id={id}
                type={name === 'q' ? 'search' : 'text'}
                value={draft[name]}
                maxLength={name === 'q' ? 200 : 80}
                placeholder={name === 'category' ? 'e.g. tool_poisoning' : undefined}
                onChange={(e) => setDraft((d) => ({ ...d, [name]: e.target.value }))}
              />
            )}
          </Field>
        ))}
        <div className="field filter-buttons">
          <button type="submit" className="primary">
            Filter
          </button>
          {filtered ? (
            <button type="button" onClick={clear}>
              Clear filters
            </button>
          ) : null}
        </div>
      </form>
      {agentId ? <AgentFilterNote agentId={agentId} onClear={() => set({ agent_id: '' })} /> : null}
      <QueryView
        query={{ ...list, data: list.rows }}
        isEmpty={(rows) => rows.length === 0}
        empty={filtered ? 'No finding matches these filters.' : 'No findings. Discovery runs open them when they see something a person should look at.'}
      >
        {(rows) => (
          <>
            <DataTable
              caption="Findings"
              rows={rows}
              rowKey={(f) => f.id}
              columns={[
                { header: 'Finding', cell: (f) => <Link to={`/findings/${f.id}`}>{f.title}</Link> },
                { header: 'Severity', cell: (f) => <SeverityBadge value={f.severity} /> },
                { header: 'Status', cell: (f) => <StatusBadge value={f.status} /> },
                { header: 'Category', cell: (f) => <code>{f.category}</code> },
                { header: 'Assigned to', cell: (f) => f.assigned_to ?? <span className="muted">—</span> },
                { header: 'Opened', cell: (f) => <Time value={f.created_at} /> },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </>
  );
}

function AgentFilterNote({ agentId, onClear }: { agentId: string; onClear: () => void }) {
  const agent = useAgent(agentId);
  return (
    <p className="notice">
      Only findings about the agent <Link to={`/agents/${agentId}`}>{agent.data?.name ?? agentId}</Link>.{' '}
      <button type="button" className="link" onClick={onClear}>
        Show every agent’s
      </button>
    </p>
  );
}

function FindingDetail() {
  const { findingId } = useParams();
  const { can } = useSession();
  const finding = useQuery({
    queryKey: ['finding', findingId],
    queryFn: () => must(api.GET('/findings/{finding_id}', { params: { path: { finding_id: findingId! } } })),
  });
  return (
    <QueryView query={finding}>
      {(f) => (
        <>
          <PageHeader
            title={f.title}
            description={
              <>
                <Link to="/findings">Findings</Link> · <SeverityBadge value={f.severity} /> · <StatusBadge value={f.status} />
              </>
            }
          />
          <Section title="What was found">
            <p className="finding-description">{f.description}</p>
            <Facts
              items={[
                ['Category', <code>{f.category}</code>],
                ['Severity', f.severity],
                ['Status', STATUS_WORDS[f.status]],
                ['Assigned to', f.assigned_to],
                ['Opened', <Time value={f.created_at} />],
                ['Last changed', <Time value={f.updated_at} />],
                ['Closed', f.resolved_at ? <Time value={f.resolved_at} /> : null],
                ['Version', String(f.version)],
              ]}
            />
            {f.note ? (
              <>
                <h3>Triage note</h3>
                <p className="finding-note">{f.note}</p>
              </>
            ) : null}
          </Section>
          <Section title="What it is about">
            <Subjects finding={f} />
          </Section>
          <Section title="Evidence">
            <p className="small muted">What the finding rests on, as the detector recorded it.</p>
            {Object.keys(f.evidence).length === 0 ? <p className="muted">The detector recorded no evidence.</p> : <JsonView value={f.evidence} label="Evidence" />}
          </Section>
          {can('finding:write') ? <Triage finding={f} /> : null}
          {can('audit:read') ? <History findingId={f.id} /> : null}
        </>
      )}
    </QueryView>
  );
}

/** The records the finding is about, named and linked where the person may read them. */
function Subjects({ finding: f }: { finding: Finding }) {
  const { can } = useSession();
  const inventory = can('inventory:read');
  const agent = useAgent(f.agent_id && can('agent:read') ? f.agent_id : undefined);
  const servers = useQuery({ queryKey: ['inventory', 'mcp-servers'], queryFn: () => must(api.GET('/mcp-servers')), enabled: inventory && f.mcp_server_id !== null });
  const tools = useQuery({ queryKey: ['inventory', 'tools', {}], queryFn: () => must(api.GET('/tools', { params: { query: {} } })), enabled: inventory && f.tool_id !== null });
  const server = servers.data?.items.find((s) => s.id === f.mcp_server_id);
  const tool = tools.data?.items.find((t) => t.id === f.tool_id);
  const items: Array<[string, ReactNode]> = [];
  if (f.agent_id) items.push(['Agent', <Link to={`/agents/${f.agent_id}`}>{agent.data?.name ?? f.agent_id}</Link>]);
  if (f.mcp_server_id)
    items.push(['MCP server', server ? <Link to={`/inventory/mcp-servers?q=${encodeURIComponent(server.name)}`}>{server.name}</Link> : <code>{f.mcp_server_id}</code>]);
  if (f.tool_id)
    items.push(['Tool', tool ? <Link to={`/inventory/tools?q=${encodeURIComponent(tool.tool_key)}`}>{tool.tool_key}</Link> : <code>{f.tool_id}</code>]);
  if (f.run_id) items.push(['Discovery run', <code>{f.run_id}</code>]);
  if (items.length === 0) return <p className="muted">The finding names no agent, server, tool or run.</p>;
  return <Facts items={items} />;
}

/**
 * Triage: status, assignee and note, sent with If-Match carrying the version the person opened, so a
 * change someone made meanwhile is refused (version_conflict) instead of silently overwritten.
 */
function Triage({ finding }: { finding: Finding }) {
  const [generation, setGeneration] = useState(0);
  const [saved, setSaved] = useState<Finding | null>(null);
  return (
    <TriageForm
      // A new form for each version shown: its fields start from the finding as it is now (after a save or a
      // reload, whichever of the click and the fresh answer comes first).
      key={`${generation}-${finding.version}`}
      finding={finding}
      saved={saved}
      onSaved={(f) => {
        setSaved(f);
        setGeneration((g) => g + 1);
      }}
      onReload={() => {
        setSaved(null);
        setGeneration((g) => g + 1);
      }}
    />
  );
}

function TriageForm({ finding, saved, onSaved, onReload }: { finding: Finding; saved: Finding | null; onSaved: (f: Finding) => void; onReload: () => void }) {
  const queryClient = useQueryClient();
  const [base] = useState(finding.version);
  const [status, setStatus] = useState<Status>(finding.status);
  const [assignee, setAssignee] = useState(finding.assigned_to ?? '');
  const [note, setNote] = useState(finding.note ?? '');
  const save = useMutation({
    mutationFn: () =>
      must(
        api.PATCH('/findings/{finding_id}', {
          params: { path: { finding_id: finding.id }, header: { 'If-Match': `"${base}"` } },
          // Empty strings clear the assignee and the note, as the API defines.
          body: { status, assigned_to: assignee.trim(), note: note.trim() },
        }),
      ),
    onSuccess: (f) => {
      queryClient.setQueryData(['finding', f.id], f);
      void queryClient.invalidateQueries({ queryKey: ['findings'] });
      void queryClient.invalidateQueries({ queryKey: ['finding', f.id, 'audit'] });
      onSaved(f);
    },
  });
  const reload = async () => {
    await queryClient.invalidateQueries({ queryKey: ['finding', finding.id] });
    onReload();
  };
  const conflict = save.error && (save.error as { code?: string }).code === 'version_conflict';
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!save.isPending) save.mutate();
  };
  return (
    <Section title="Triage">
      {saved && saved.version === finding.version && !save.error ? (
        <p className="success" role="status">
          Saved: the finding is {STATUS_WORDS[saved.status]}.
        </p>
      ) : null}
      <form onSubmit={submit} className="triage">
        <Field label="Status">
          {(id) => (
            <select id={id} value={status} onChange={(e) => setStatus(e.target.value as Status)}>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {STATUS_WORDS[s]}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Assigned to" hint="Who works on it, for example an email address. Empty clears it.">
          {(id, hint) => <input id={id} aria-describedby={hint} value={assignee} maxLength={320} onChange={(e) => setAssignee(e.target.value)} />}
        </Field>
        <Field label="Note" hint="What was done or decided. Empty clears it.">
          {(id, hint) => <textarea id={id} aria-describedby={hint} value={note} rows={4} maxLength={2000} onChange={(e) => setNote(e.target.value)} />}
        </Field>
        {save.error ? <ErrorPanel error={save.error} title="The finding was not saved" /> : null}
        <div className="dialog-actions">
          {conflict ? (
            <button type="button" onClick={() => void reload()}>
              Load the latest version
            </button>
          ) : null}
          <button type="submit" className="primary" disabled={save.isPending}>
            {save.isPending ? 'Saving…' : 'Save triage'}
          </button>
        </div>
      </form>
    </Section>
  );
}

type AuditEntry = Paths['/audit']['get']['responses'][200]['content']['application/json']['items'][number];

/** The finding's audit trail: who changed what, when (the note's text is not audited, only that it changed). */
function History({ findingId }: { findingId: string }) {
  const audit = useQuery({
    queryKey: ['finding', findingId, 'audit'],
    queryFn: () => must(api.GET('/audit', { params: { query: { target_id: findingId, limit: 50 } } })),
  });
  return (
    <Section title="History">
      <QueryView query={audit} isEmpty={(d) => d.items.length === 0} empty="Nobody has changed this finding yet.">
        {(d) => (
          <DataTable
            caption="Changes to this finding"
            rows={d.items}
            rowKey={(e: AuditEntry) => e.id}
            columns={[
              { header: 'When', cell: (e) => <Time value={e.at} /> },
              { header: 'Who', cell: (e) => (e.actor.id ? <code title={e.actor.id}>{`${e.actor.type} ${e.actor.id.slice(0, 8)}`}</code> : e.actor.type) },
              { header: 'What', cell: (e) => <code>{e.action}</code> },
              { header: 'Changes', cell: (e) => <Changes details={e.details} /> },
            ]}
          />
        )}
      </QueryView>
    </Section>
  );
}

function Changes({ details }: { details: Record<string, unknown> }) {
  const lines = Object.entries(details).map(([k, v]) => {
    const change = v as { from?: unknown; to?: unknown } | null;
    if (change && typeof change === 'object' && 'to' in change) return `${k}: ${String(change.from ?? '—')} → ${String(change.to ?? '—')}`;
    if (k === 'note_changed') return v ? 'note changed' : null;
    return `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`;
  });
  const shown = lines.filter((l): l is string => l !== null);
  return shown.length ? (
    <ul className="plain">
      {shown.map((l) => (
        <li key={l}>{l}</li>
      ))}
    </ul>
  ) : (
    <span className="muted">—</span>
  );
}
