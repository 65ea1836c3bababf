import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, Route, Routes, useParams, useSearchParams } from 'react-router';
import { api, ApiFailure, must, type Paths } from '../api/client';
import { currentSearchParams, useAgent, usePaged } from '../api/hooks';
import { ConfirmDialog } from '../components/confirm';
import { Badge, ChoiceButtons, DataTable, ErrorPanel, Facts, Field, JsonView, Loading, LoadMore, PageHeader, QueryView, Section, StateBadge, Time } from '../components/ui';
import { useSession } from '../session';
import './actions.css';

type ActionQuery = NonNullable<Paths['/actions']['get']['parameters']['query']>;
type State = NonNullable<ActionQuery['state']>;
type DecisionValue = NonNullable<ActionQuery['decision']>;
type Action = Paths['/actions/{action_id}']['get']['responses'][200]['content']['application/json'];
type EvidenceRecord = Paths['/evidence']['get']['responses'][200]['content']['application/json']['items'][number];

const DECISIONS: DecisionValue[] = ['allow', 'deny', 'require_approval'];
const STATES: State[] = ['received', 'approval_required', 'approved', 'executed', 'failed', 'denied', 'rejected', 'expired', 'cancelled', 'revoked'];

/** The three views of the section: every action, the decisions taken, the executions run. */
const VIEWS = [
  { key: 'actions', label: 'Actions' },
  { key: 'decisions', label: 'Decisions' },
  { key: 'executions', label: 'Executions' },
] as const;
type View = (typeof VIEWS)[number]['key'];

/** States in which an approval is still open: cancelling stops the agent's resubmission from running. */
const CANCELLABLE = new Set<string>(['approval_required', 'approved']);

/** The approval's status that goes with an action's state, to find the approval of an action among the approvals. */
const APPROVAL_STATUS_OF: Record<string, 'pending' | 'approved' | 'rejected' | 'expired' | 'cancelled'> = {
  approval_required: 'pending',
  approved: 'approved',
  executed: 'approved',
  failed: 'approved',
  rejected: 'rejected',
  expired: 'expired',
  cancelled: 'cancelled',
};

const words = (v: string) => v.replaceAll('_', ' ');

export default function ActionsPage() {
  const { can } = useSession();
  if (!can('action:read')) return <Forbidden permission="action:read" what="actions and decisions" />;
  return (
    <Routes>
      <Route index element={<ActionsIndex />} />
      <Route path=":actionId" element={<ActionDetail />} />
    </Routes>
  );
}

/** The page a person sees without the permission: said in words, before any request is refused. */
function Forbidden({ permission, what }: { permission: string; what: string }) {
  return (
    <>
      <PageHeader title="Actions" />
      <ErrorPanel
        title={`You cannot see ${what}`}
        error={new ApiFailure(403, 'forbidden', `Reading ${what} needs the permission ${permission}; ask an administrator for a role that has it.`, null, { required_permission: permission })}
      />
    </>
  );
}

function AgentName({ id }: { id: string }) {
  const agent = useAgent(id);
  return <Link to={`/agents/${id}`}>{agent.data?.name ?? id.slice(0, 8)}</Link>;
}

function ReasonCodes({ codes, tone = 'neutral' }: { codes: string[]; tone?: 'neutral' | 'warn' | 'bad' | 'good' }) {
  if (codes.length === 0) return <span className="muted">none</span>;
  return (
    <span className="act-codes">
      {codes.map((c) => (
        <Badge key={c} tone={tone}>
          {c}
        </Badge>
      ))}
    </span>
  );
}

const toneOf = (decision: string) => (decision === 'deny' ? 'bad' : decision === 'require_approval' ? 'warn' : 'neutral');

function ActionsIndex() {
  const [params, setParams] = useSearchParams();
  const view: View = VIEWS.some((v) => v.key === params.get('view')) ? (params.get('view') as View) : 'actions';
  const pick = (key: View) => setParams(key === 'actions' ? {} : { view: key });
  return (
    <>
      <PageHeader title="Actions and decisions" description="Every tool call an agent proposed to the gateway, the decision taken and what ran." />
      <ChoiceButtons label="View" options={VIEWS.map((v) => ({ value: v.key, label: v.label }))} current={view} onPick={pick} />
      {view === 'actions' ? <ActionList /> : view === 'decisions' ? <DecisionList /> : <ExecutionList />}
    </>
  );
}

/** The filters of GET /actions, read from the address so that a filtered list can be bookmarked and shared. */
function actionFilters(params: URLSearchParams): ActionQuery {
  const f: ActionQuery = {};
  const decision = params.get('decision');
  const state = params.get('state');
  if (decision && (DECISIONS as string[]).includes(decision)) f.decision = decision as DecisionValue;
  if (state && (STATES as string[]).includes(state)) f.state = state as State;
  if (params.get('tool')) f.tool = params.get('tool')!;
  if (params.get('agent_id')) f.agent_id = params.get('agent_id')!;
  return f;
}

function ActionList() {
  const [params, setParams] = useSearchParams();
  const filters = actionFilters(params);
  const filtered = Object.keys(filters).length > 0;
  const list = usePaged(['actions', filters], (cursor) => must(api.GET('/actions', { params: { query: { ...filters, limit: 50, ...(cursor ? { cursor } : {}) } } })));
  /** A new set of filters, or a change to the ones in the address now (see currentSearchParams). */
  const set = (next: ActionQuery | ((current: ActionQuery) => ActionQuery)) => {
    const value = typeof next === 'function' ? next(actionFilters(currentSearchParams())) : next;
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(value)) if (v) p.set(k, String(v));
    setParams(p);
  };
  return (
    <>
      <ActionFilters filters={filters} onChange={set} />
      <QueryView
        query={{ ...list, data: list.rows }}
        isEmpty={(rows) => rows.length === 0}
        empty={filtered ? 'No action matches these filters.' : 'No action yet: the tool calls agents propose to the gateway show here.'}
      >
        {(rows) => (
          <>
            <p className="small muted" role="status">
              {rows.length} {rows.length === 1 ? 'action' : 'actions'} shown{list.hasNextPage ? ', more to load' : ''}.
            </p>
            <DataTable
              caption="Actions, newest first"
              rows={rows}
              rowKey={(r) => r.id}
              columns={[
                { header: 'Time', cell: (r) => <Link to={`/actions/${r.id}`} aria-label={`${r.tool} at ${new Date(r.created_at).toISOString()}`}><Time value={r.created_at} /></Link> },
                { header: 'Agent', cell: (r) => <AgentName id={r.agent_id} /> },
                { header: 'Tool', cell: (r) => <code>{r.tool}</code> },
                { header: 'Target', cell: (r) => <span className="act-target">{r.target}</span> },
                { header: 'Decision', cell: (r) => <StateBadge value={r.decision} /> },
                { header: 'State', cell: (r) => words(r.state) },
                { header: 'Reason codes', cell: (r) => <ReasonCodes codes={r.reason_codes} tone={toneOf(r.decision)} /> },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </>
  );
}

/** The agents to filter by: the first 200 (by name), and the one in the address if it is not among them. */
function useAgentChoices() {
  return useQuery({
    queryKey: ['agents', 'choices'],
    queryFn: () => must(api.GET('/agents', { params: { query: { limit: 200 } } })),
    staleTime: 60_000,
  });
}

function ActionFilters({ filters, onChange }: { filters: ActionQuery; onChange: (f: ActionQuery | ((current: ActionQuery) => ActionQuery)) => void }) {
  const agents = useAgentChoices();
  // The tool is typed: it applies on Enter or "Apply", not at every key.
  const [tool, setTool] = useState(filters.tool ?? '');
  const [lastTool, setLastTool] = useState(filters.tool);
  if (lastTool !== filters.tool) {
    setLastTool(filters.tool);
    setTool(filters.tool ?? '');
  }
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onChange((f) => ({ ...f, tool: tool.trim() || undefined }));
  };
  const agentOptions = [...(agents.data?.items ?? [])].sort((a, b) => a.name.localeCompare(b.name));
  if (filters.agent_id && !agentOptions.some((a) => a.id === filters.agent_id)) agentOptions.unshift({ id: filters.agent_id, name: filters.agent_id } as (typeof agentOptions)[number]);
  return (
    <form className="toolbar" role="search" aria-label="Filter actions" onSubmit={submit}>
      <Field label="Decision">
        {(id) => (
          <select id={id} value={filters.decision ?? ''} onChange={(e) => onChange((f) => ({ ...f, decision: (e.target.value || undefined) as DecisionValue | undefined }))}>
            <option value="">Any</option>
            {DECISIONS.map((d) => (
              <option key={d} value={d}>
                {words(d)}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="State">
        {(id) => (
          <select id={id} value={filters.state ?? ''} onChange={(e) => onChange((f) => ({ ...f, state: (e.target.value || undefined) as State | undefined }))}>
            <option value="">Any</option>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {words(s)}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Agent">
        {(id) => (
          <select id={id} value={filters.agent_id ?? ''} onChange={(e) => onChange((f) => ({ ...f, agent_id: e.target.value || undefined }))}>
            <option value="">Any</option>
            {agentOptions.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Tool">
        {(id) => <input id={id} value={tool} onChange={(e) => setTool(e.target.value)} placeholder="e.g. payments.create_payment" maxLength={200} spellCheck={false} />}
      </Field>
      <div className="act-filter-buttons">
        <button type="submit">Apply</button>
        <button type="button" onClick={() => onChange({})} disabled={Object.keys(filters).length === 0 && tool === ''}>
          Clear filters
        </button>
      </div>
    </form>
  );
}

function DecisionList() {
  const [params, setParams] = useSearchParams();
  const raw = params.get('decision');
  const decision = raw && (DECISIONS as string[]).includes(raw) ? (raw as DecisionValue) : undefined;
  const list = usePaged(['decisions', decision], (cursor) => must(api.GET('/decisions', { params: { query: { ...(decision ? { decision } : {}), limit: 50, ...(cursor ? { cursor } : {}) } } })));
  return (
    <>
      <form className="toolbar" role="search" aria-label="Filter decisions" onSubmit={(e) => e.preventDefault()}>
        <Field label="Decision">
          {(id) => (
            <select id={id} value={decision ?? ''} onChange={(e) => setParams(e.target.value ? { view: 'decisions', decision: e.target.value } : { view: 'decisions' })}>
              <option value="">Any</option>
              {DECISIONS.map((d) => (
                <option key={d} value={d}>
                  {words(d)}
                </option>
              ))}
            </select>
          )}
        </Field>
      </form>
      <QueryView query={{ ...list, data: list.rows }} isEmpty={(rows) => rows.length === 0} empty={decision ? `No ${words(decision)} decision.` : 'No decision yet.'}>
        {(rows) => (
          <>
            <DataTable
              caption="Decisions, newest first"
              rows={rows}
              rowKey={(r) => r.action_id}
              columns={[
                { header: 'Decided', cell: (r) => <Link to={`/actions/${r.action_id}`} aria-label={`${r.tool} decided at ${new Date(r.decided_at).toISOString()}`}><Time value={r.decided_at} /></Link> },
                { header: 'Agent', cell: (r) => <AgentName id={r.agent_id} /> },
                { header: 'Tool', cell: (r) => <code>{r.tool}</code> },
                { header: 'Decision', cell: (r) => <StateBadge value={r.decision} /> },
                { header: 'Reason codes', cell: (r) => <ReasonCodes codes={r.reason_codes} tone={toneOf(r.decision)} /> },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </>
  );
}

function ExecutionList() {
  const list = usePaged(['executions'], (cursor) => must(api.GET('/executions', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } })));
  return (
    <QueryView query={{ ...list, data: list.rows }} isEmpty={(rows) => rows.length === 0} empty="No tool call has run yet.">
      {(rows) => (
        <>
          <DataTable
            caption="Executions, most recent first"
            rows={rows}
            rowKey={(r) => r.action_id}
            columns={[
              { header: 'Ran', cell: (r) => <Link to={`/actions/${r.action_id}`} aria-label={`${r.tool} run ${r.executed_at ? `at ${new Date(r.executed_at).toISOString()}` : ''}`}>{r.executed_at ? <Time value={r.executed_at} /> : 'not yet'}</Link> },
              { header: 'Agent', cell: (r) => <AgentName id={r.agent_id} /> },
              { header: 'Tool', cell: (r) => <code>{r.tool}</code> },
              { header: 'Status', cell: (r) => <StateBadge value={r.status === 'succeeded' ? 'executed' : r.status} /> },
              { header: 'Output (redacted)', cell: (r) => <code className="act-output">{preview(r.output_redacted)}</code> },
            ]}
          />
          <LoadMore list={list} />
        </>
      )}
    </QueryView>
  );
}

/** A one-line view of a redacted output for a table cell; the whole output is on the action's page. */
function preview(value: unknown): string {
  if (value === null || value === undefined) return '—';
  const s = JSON.stringify(value);
  return s.length > 80 ? `${s.slice(0, 79)}…` : s;
}

interface TraceEntry {
  step: string;
  outcome: string;
  reason?: string;
  detail?: unknown;
}

function traceOf(action: Action): TraceEntry[] {
  if (!Array.isArray(action.trace)) return [];
  return (action.trace as unknown[]).filter((e): e is TraceEntry => typeof e === 'object' && e !== null && typeof (e as TraceEntry).step === 'string');
}

function ActionDetail() {
  const { actionId } = useParams();
  const { can } = useSession();
  const queryClient = useQueryClient();
  const action = useQuery({
    queryKey: ['action', actionId],
    queryFn: () => must(api.GET('/actions/{action_id}', { params: { path: { action_id: actionId! } } })),
  });
  const [cancelling, setCancelling] = useState(false);
  const cancel = useMutation({
    mutationFn: (reason: string) => must(api.POST('/actions/{action_id}/cancel', { params: { path: { action_id: actionId! } }, body: { reason, confirm: true } })),
    onSuccess: (data) => {
      queryClient.setQueryData(['action', actionId], data);
      void queryClient.invalidateQueries({ queryKey: ['actions'] });
      void queryClient.invalidateQueries({ queryKey: ['evidence'] });
      void queryClient.invalidateQueries({ queryKey: ['approvals'] });
      setCancelling(false);
    },
  });
  return (
    <QueryView query={action}>
      {(a) => {
        const trace = traceOf(a);
        return (
          <>
            <PageHeader
              title={`Action: ${a.tool}`}
              description={
                <>
                  <Link to="/actions">Actions</Link> · decision <StateBadge value={a.decision} /> · state <StateBadge value={a.state} />
                </>
              }
              actions={
                can('action:control') && CANCELLABLE.has(a.state) ? (
                  <button type="button" className="danger" onClick={() => setCancelling(true)}>
                    Cancel action
                  </button>
                ) : null
              }
            />
            {cancel.isSuccess && !cancelling ? (
              <p className="success" role="status">
                The action is {words(a.state)}: its approval is withdrawn, and the agent’s resubmission will not run.
              </p>
            ) : null}
            <Section title="The request">
              <Facts
                items={[
                  ['Agent', <AgentName id={a.agent_id} />],
                  ['Tool', <code>{a.tool}</code>],
                  ['Operation', a.operation],
                  ['Target', <span className="act-target">{a.target}</span>],
                  ['Environment', a.environment],
                  ['On behalf of', a.on_behalf_of],
                  ['Justification', a.justification],
                  ['Submitted through', a.source === 'console' ? 'the console (a test call)' : 'the gateway'],
                  ['Correlation ID', <code>{a.correlation_id}</code>],
                  ['Idempotency key', <code>{a.idempotency_key}</code>],
                  ['Received', <Time value={a.created_at} />],
                  ['Last change', <Time value={a.updated_at} />],
                ]}
              />
              <h3>Parameters</h3>
              <p className="small muted">As the agent sent them, with secrets masked.</p>
              <JsonView value={a.parameters} label="Parameters" />
            </Section>
            <Section title="Decision">
              <Facts
                items={[
                  ['Decision', <StateBadge value={a.decision} />],
                  ['State', <StateBadge value={a.state} />],
                  ['Reason codes', <ReasonCodes codes={a.reason_codes} tone={toneOf(a.decision)} />],
                  ['Approvals required', a.approvals_required > 0 ? String(a.approvals_required) : 'none'],
                  ['Execution', a.execution_status ? <StateBadge value={a.execution_status === 'succeeded' ? 'executed' : a.execution_status} /> : 'nothing ran'],
                  ['Ran at', <Time value={a.executed_at} />],
                ]}
              />
              {a.output_redacted !== null && a.output_redacted !== undefined ? (
                <>
                  <h3>Output</h3>
                  <p className="small muted">What the tool answered, redacted before it was stored.</p>
                  <JsonView value={a.output_redacted} label="Output" />
                </>
              ) : null}
            </Section>
            <Section title="Decision trace">
              {trace.length === 0 ? (
                <p className="muted">This action has no trace.</p>
              ) : (
                <>
                  <p className="small muted">The gateway’s steps in the order it took them.</p>
                  <ol className="act-trace" aria-label="Decision trace">
                    {trace.map((s, i) => (
                      <li key={i}>
                        <div className="act-trace-head">
                          <strong>{words(s.step)}</strong> <StateBadge value={s.outcome} />
                          {s.reason ? (
                            <>
                              {' '}
                              <code>{s.reason}</code>
                            </>
                          ) : null}
                        </div>
                        {s.detail !== undefined && s.detail !== null && !(typeof s.detail === 'object' && Object.keys(s.detail).length === 0) ? (
                          <TraceDetail detail={s.detail} step={s.step} />
                        ) : null}
                      </li>
                    ))}
                  </ol>
                </>
              )}
            </Section>
            <ApprovalOfAction action={a} />
            <ActionEvidence actionId={a.id} />
            <ConfirmDialog
              open={cancelling}
              title="Cancel this action"
              confirmLabel="Cancel action"
              danger
              reason={{ label: 'Reason', required: true }}
              busy={cancel.isPending}
              error={cancel.error}
              onConfirm={(reason) => cancel.mutate(reason)}
              onClose={() => {
                setCancelling(false);
                cancel.reset();
              }}
            >
              <p>
                <code>{a.tool}</code> on <strong>{a.target}</strong> waits for {a.state === 'approved' ? 'the agent to resubmit it' : 'an approval'}. Cancelling withdraws its approval
                request: the call will not run. The reason goes to the audit log and the evidence chain.
              </p>
            </ConfirmDialog>
          </>
        );
      }}
    </QueryView>
  );
}

/** A trace step's detail: short scalar facts inline, anything nested as JSON. */
function TraceDetail({ detail, step }: { detail: unknown; step: string }) {
  if (typeof detail === 'object' && detail !== null && !Array.isArray(detail)) {
    const entries = Object.entries(detail as Record<string, unknown>);
    if (entries.every(([, v]) => v === null || ['string', 'number', 'boolean'].includes(typeof v))) {
      return (
        <dl className="act-trace-detail">
          {entries.map(([k, v]) => (
            <div key={k}>
              <dt>{words(k)}</dt>
              <dd>{String(v)}</dd>
            </div>
          ))}
        </dl>
      );
    }
  }
  return <JsonView value={detail} label={`Detail of ${words(step)}`} />;
}

/**
 * The approval request of an action. The action does not carry its approval's ID: the chain's
 * `approval_request` record names it; without evidence:read, the approvals in the status that goes
 * with the action's state are searched.
 */
function ApprovalOfAction({ action }: { action: Action }) {
  const { can } = useSession();
  const viaEvidence = can('evidence:read');
  const status = APPROVAL_STATUS_OF[action.state];
  const asked = action.decision === 'require_approval' || action.reason_codes.includes('APPROVAL_GRANTED');
  const approval = useQuery({
    queryKey: ['action-approval', action.id, action.state, viaEvidence],
    enabled: asked && (viaEvidence || (can('approval:read') && status !== undefined)),
    queryFn: async (): Promise<string | null> => {
      if (viaEvidence) {
        const records = await must(api.GET('/evidence', { params: { query: { action_request_id: action.id, event_type: 'approval_request', limit: 1 } } }));
        const id = (records.items[0]?.payload as { approval_id?: unknown } | undefined)?.approval_id;
        return typeof id === 'string' ? id : null;
      }
      let cursor: string | undefined;
      // A few pages at most: an approval far back in its status is named on its own page instead.
      for (let i = 0; i < 5; i++) {
        const page = await must(api.GET('/approvals', { params: { query: { status: status!, limit: 200, ...(cursor ? { cursor } : {}) } } }));
        const hit = page.items.find((x) => x.action.id === action.id);
        if (hit) return hit.id;
        if (!page.next_cursor) break;
        cursor = page.next_cursor;
      }
      return null;
    },
  });
  if (!asked) return null;
  return (
    <Section title="Approval">
      {approval.isPending && approval.fetchStatus === 'idle' ? (
        <p className="muted">The decision asked for an approval; your roles do not let you read approvals.</p>
      ) : approval.isPending ? (
        <Loading />
      ) : approval.isError ? (
        <ErrorPanel error={approval.error} title="Could not find the approval" />
      ) : approval.data ? (
        <p>
          {action.approvals_required > 0 ? `${action.approvals_required} approval${action.approvals_required === 1 ? '' : 's'} required. ` : ''}
          {can('approval:read') ? (
            <Link to={`/approvals/${approval.data}`}>Open the approval request</Link>
          ) : (
            <>
              Approval request <code>{approval.data}</code>
            </>
          )}
        </p>
      ) : (
        <p className="muted">The approval request of this action was not found.</p>
      )}
    </Section>
  );
}

function ActionEvidence({ actionId }: { actionId: string }) {
  const { can } = useSession();
  const allowed = can('evidence:read');
  if (!allowed)
    return (
      <Section title="Evidence">
        <p className="muted">
          Reading the evidence chain needs the permission <code>evidence:read</code>.
        </p>
      </Section>
    );
  return <ActionEvidenceList actionId={actionId} />;
}

function ActionEvidenceList({ actionId }: { actionId: string }) {
  const list = usePaged(['evidence', { action_request_id: actionId }], (cursor) =>
    must(api.GET('/evidence', { params: { query: { action_request_id: actionId, limit: 50, ...(cursor ? { cursor } : {}) } } })),
  );
  return (
    <Section title="Evidence">
      <p className="small muted">The signed, hash-linked records the chain holds about this action.</p>
      <QueryView query={{ ...list, data: list.rows }} isEmpty={(rows) => rows.length === 0} empty="The chain holds no record of this action.">
        {(rows: EvidenceRecord[]) => (
          <>
            <DataTable
              caption="Evidence records of this action"
              rows={rows}
              rowKey={(r) => r.id}
              columns={[
                { header: 'Record', cell: (r) => <Link to={`/evidence/${r.id}`}>#{r.seq}</Link> },
                { header: 'Event', cell: (r) => words(r.event_type) },
                { header: 'Recorded', cell: (r) => <Time value={r.created_at} /> },
                { header: 'Hash', cell: (r) => <code title={r.hash}>{r.hash.slice(0, 16)}…</code> },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </Section>
  );
}
