import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, NavLink, Route, Routes, useParams, useSearchParams } from 'react-router';
import { api, must, type Paths } from '../api/client';
import { choiceParam, useAgent, usePaged } from '../api/hooks';
import { ConfirmDialog } from '../components/confirm';
import { Badge, ChoiceButtons, DataTable, ErrorPanel, Facts, Field, LoadMore, PageHeader, QueryView, Section, StateBadge, Time, type Tone } from '../components/ui';
import { useSession } from '../session';
import './governance.css';

type Ok<P extends keyof Paths, M extends keyof Paths[P]> = Paths[P][M] extends { responses: { 200: { content: { 'application/json': infer T } } } } ? T : never;
type Framework = Ok<'/governance/frameworks', 'get'>['items'][number];
type Exception = Ok<'/exceptions', 'get'>['items'][number];
type ExceptionStatus = Exception['status'];
type Task = Ok<'/governance/remediation', 'get'>['items'][number];
type TaskStatus = Task['status'];
type Priority = Task['priority'];
type SystemRow = Ok<'/governance/systems', 'get'>['items'][number];
type Classification = SystemRow['classification'];

const CONTROL_TONE: Record<string, Tone> = { met: 'good', excepted: 'info', not_met: 'bad' };
const READINESS_TONE: Record<string, Tone> = { ready: 'good', partial: 'warn', not_ready: 'bad' };
const PRIORITY_TONE: Record<string, Tone> = { low: 'neutral', medium: 'info', high: 'warn', critical: 'bad' };
const CLASS_TONE: Record<string, Tone> = { unclassified: 'neutral', minimal: 'good', limited: 'info', high: 'warn', prohibited: 'bad' };
const CLASSIFICATIONS: Classification[] = ['unclassified', 'minimal', 'limited', 'high', 'prohibited'];
const EXCEPTION_STATUSES: ExceptionStatus[] = ['pending', 'approved', 'rejected', 'expired'];
const TASK_STATUSES: TaskStatus[] = ['open', 'in_progress', 'done', 'cancelled'];
const PRIORITIES: Priority[] = ['low', 'medium', 'high', 'critical'];
const WINDOWS = [7, 30, 90, 180, 365];

/**
 * Suggestions for a mapping's event type: the types Tollgate writes (docs/governance.md, "The evidence event
 * types"). Only suggestions: the API accepts another type and marks it `catalogued: false`, which the page shows.
 */
const EVENT_TYPES = [
  'decision',
  'approval_request',
  'approval',
  'approval_cancelled',
  'execution',
  'containment',
  'policy_change',
  'mcp_trust_change',
  'discovery_run',
  'finding_update',
  'integration_status',
  'connector_enabled',
  'binding_reapproval',
  'risk_ruleset_change',
  'control_mapping',
  'exception_decision',
  'ai_system_classification',
];

/** The moves a task may make (docs/governance.md, Remediation); done and cancelled are final. */
const MOVES: Record<TaskStatus, Array<{ to: TaskStatus; label: string }>> = {
  open: [
    { to: 'in_progress', label: 'Start' },
    { to: 'cancelled', label: 'Cancel task' },
  ],
  in_progress: [
    { to: 'done', label: 'Mark done' },
    { to: 'cancelled', label: 'Cancel task' },
  ],
  done: [],
  cancelled: [],
};

const words = (s: string) => s.replaceAll('_', ' ');
const capital = (s: string) => s[0]!.toUpperCase() + s.slice(1);

/** An agent by its name (its ID's start while the name loads, or when the person may not read agents). */
function AgentName({ id }: { id: string }) {
  const agent = useAgent(id);
  return <Link to={`/agents/${id}`}>{agent.data?.name ?? <code>{id.slice(0, 8)}</code>}</Link>;
}

function Tag({ value, tones }: { value: string; tones: Record<string, Tone> }) {
  return <Badge tone={tones[value] ?? 'neutral'}>{words(value)}</Badge>;
}

export default function GovernancePage() {
  return (
    <>
      <PageHeader title="Governance" description="Readiness against the AI frameworks, the AI-system register, exceptions and the work that puts controls right." />
      <nav className="tabs" aria-label="Governance">
        <NavLink to="/governance" end>
          Readiness
        </NavLink>
        <NavLink to="/governance/systems">AI-system register</NavLink>
        <NavLink to="/governance/exceptions">Exceptions</NavLink>
        <NavLink to="/governance/remediation">Remediation</NavLink>
      </nav>
      <Routes>
        <Route index element={<Readiness />} />
        <Route path="controls/:controlId" element={<ControlDetail />} />
        <Route path="systems" element={<Register />} />
        <Route path="exceptions" element={<Exceptions />} />
        <Route path="remediation" element={<Remediation />} />
      </Routes>
    </>
  );
}

/** Every control of the catalogues, for the control pickers of the forms. */
function useFrameworks(days = 90) {
  return useQuery({
    queryKey: ['governance', 'frameworks', days],
    queryFn: () => must(api.GET('/governance/frameworks', { params: { query: { days } } })),
  });
}

/* Readiness */

function Readiness() {
  const [params, setParams] = useSearchParams();
  const asked = Number(params.get('days'));
  const days = Number.isInteger(asked) && asked >= 1 && asked <= 365 ? asked : 90;
  const frameworks = useFrameworks(days);
  return (
    <>
      <div className="toolbar">
        <Field label="Evidence window" hint="Evidence older than this does not count.">
          {(id, hint) => (
            <select id={id} aria-describedby={hint} value={days} onChange={(e) => setParams(e.target.value === '90' ? {} : { days: e.target.value })}>
              {[...new Set([...WINDOWS, days])].sort((a, b) => a - b).map((d) => (
                <option key={d} value={d}>
                  Last {d} days
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <QueryView query={frameworks} isEmpty={(d) => d.items.length === 0} empty="No framework catalogue is loaded.">
        {(d) => (
          <>
            <DataTable
              caption="Coverage and readiness of each framework"
              rows={d.items}
              rowKey={(f) => f.key}
              columns={[
                { header: 'Framework', cell: (f) => <a href={`#fw-${f.key}`}>{f.name}</a> },
                { header: 'Version', cell: (f) => f.version },
                { header: 'Coverage', cell: (f) => <Coverage percent={f.coverage_percent} />, className: 'num' },
                { header: 'Readiness', cell: (f) => <Tag value={f.readiness} tones={READINESS_TONE} /> },
                { header: 'Met', cell: (f) => f.controls_met, className: 'num' },
                { header: 'Excepted', cell: (f) => f.controls_excepted, className: 'num' },
                { header: 'Not met', cell: (f) => f.controls_not_met, className: 'num' },
                { header: 'Controls', cell: (f) => f.controls_total, className: 'num' },
              ]}
            />
            <p className="small muted">
              Window: <Time value={d.items[0]?.since} /> to <Time value={d.items[0]?.until} />. A control is met when mapped evidence is in the chain within the window; an approved
              exception covers it for a while; an open remediation task says it is not met.
            </p>
            {d.items.map((f) => (
              <FrameworkSection key={f.key} framework={f} />
            ))}
          </>
        )}
      </QueryView>
    </>
  );
}

function Coverage({ percent }: { percent: number }) {
  return (
    <span className="coverage">
      <span className="coverage-bar" aria-hidden="true">
        <span style={{ width: `${Math.min(100, Math.max(0, percent))}%` }} />
      </span>
      {percent}%
    </span>
  );
}

function FrameworkSection({ framework: f }: { framework: Framework }) {
  return (
    <div id={`fw-${f.key}`}>
      <Section title={`${f.name} (${f.version})`}>
        <Facts
          items={[
            ['Coverage', `${f.coverage_percent}%`],
            ['Readiness', <Tag value={f.readiness} tones={READINESS_TONE} />],
            ['Controls met', String(f.controls_met)],
            ['Excepted', String(f.controls_excepted)],
            ['Not met', String(f.controls_not_met)],
          ]}
        />
        <DataTable
          caption={`Controls of ${f.name}`}
          rows={f.controls}
          rowKey={(c) => c.id}
          columns={[
            { header: 'Control', cell: (c) => <Link className="nowrap" to={`/governance/controls/${c.id}`}>{c.ref}</Link> },
            { header: 'Title', cell: (c) => c.title },
            { header: 'Status', cell: (c) => <Tag value={c.status} tones={CONTROL_TONE} /> },
            { header: 'Why', cell: (c) => c.why },
          ]}
        />
      </Section>
    </div>
  );
}

/* One control and its mappings */

function ControlDetail() {
  const { controlId } = useParams();
  const { can } = useSession();
  const control = useQuery({
    queryKey: ['governance', 'control', controlId],
    queryFn: () => must(api.GET('/controls/{control_id}', { params: { path: { control_id: controlId! } } })),
  });
  return (
    <QueryView query={control}>
      {(c) => (
        <>
          <p className="small">
            <Link to="/governance">Readiness</Link> · {c.framework.name}
          </p>
          <h2 className="control-title">
            {c.key}: {c.title}
          </h2>
          <Section title="Status">
            <Facts
              items={[
                ['Framework', `${c.framework.name} ${c.framework.version}`],
                ['Status', <Tag value={c.status} tones={CONTROL_TONE} />],
                ['Why', c.why],
                ['Window', `Last ${c.window_days} days`],
              ]}
            />
            <p>{c.description}</p>
          </Section>
          <Section title="Evidence mapped to it">
            {c.mappings.length === 0 ? (
              <p className="empty">Nothing is mapped to this control: no evidence can meet it until something is.</p>
            ) : (
              <DataTable
                caption={`Mappings of ${c.key}`}
                rows={c.mappings}
                rowKey={(m) => m.id ?? `${m.evidence_event_type}:${JSON.stringify(m.condition)}`}
                columns={[
                  { header: 'Event type', cell: (m) => <code>{m.evidence_event_type}</code> },
                  { header: 'Condition', cell: (m) => (m.condition && Object.keys(m.condition).length > 0 ? <code>{JSON.stringify(m.condition)}</code> : <span className="muted">any record</span>) },
                  { header: 'Rationale', cell: (m) => m.rationale },
                  { header: 'Source', cell: (m) => (m.source === 'catalogue' ? 'catalogue' : 'your organisation') },
                  { header: 'Written today', cell: (m) => (m.catalogued ? 'yes' : <Badge tone="warn">no: nothing writes this type yet</Badge>) },
                  { header: 'Added', cell: (m) => <Time value={m.created_at} /> },
                ]}
              />
            )}
          </Section>
          {can('governance:write') ? <MapForm controlId={c.id} /> : null}
        </>
      )}
    </QueryView>
  );
}

function MapForm({ controlId }: { controlId: string }) {
  const queryClient = useQueryClient();
  const [type, setType] = useState('');
  const [condition, setCondition] = useState('');
  const [rationale, setRationale] = useState('');
  const [conditionError, setConditionError] = useState<string | null>(null);
  const add = useMutation({
    mutationFn: (body: { evidence_event_type: string; rationale: string; condition: Record<string, unknown> | null }) =>
      must(api.POST('/controls/{control_id}/mappings', { params: { path: { control_id: controlId } }, body })),
    onSuccess: () => {
      setType('');
      setCondition('');
      setRationale('');
      void queryClient.invalidateQueries({ queryKey: ['governance'] });
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    let parsed: Record<string, unknown> | null = null;
    if (condition.trim() !== '') {
      try {
        const v: unknown = JSON.parse(condition);
        if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not an object');
        parsed = v as Record<string, unknown>;
      } catch {
        setConditionError('The condition must be a JSON object, such as {"decision": "deny"}, or left empty.');
        return;
      }
    }
    setConditionError(null);
    add.mutate({ evidence_event_type: type.trim(), rationale: rationale.trim(), condition: parsed });
  };
  return (
    <Section title="Map an evidence event type">
      <p className="small muted">Records of this type (whose payload contains the condition) will show the control works.</p>
      <form onSubmit={submit} className="form-narrow">
        <Field label="Evidence event type" hint="One of the types Tollgate writes, or your own (3-80 characters, no spaces).">
          {(id, hint) => (
            <>
              <input id={id} aria-describedby={hint} list="evidence-event-types" value={type} onChange={(e) => setType(e.target.value)} required minLength={3} maxLength={80} />
              <datalist id="evidence-event-types">
                {EVENT_TYPES.map((t) => (
                  <option key={t} value={t} />
                ))}
              </datalist>
            </>
          )}
        </Field>
        <Field label="Condition (JSON, optional)" hint='What the record’s payload must contain, e.g. {"decision": "deny"}. Empty: any record of the type.'>
          {(id, hint) => (
            <textarea id={id} aria-describedby={hint} aria-invalid={conditionError ? true : undefined} rows={3} value={condition} onChange={(e) => setCondition(e.target.value)} spellCheck={false} />
          )}
        </Field>
        {conditionError ? (
          <p className="field-error" role="alert">
            {conditionError}
          </p>
        ) : null}
        <Field label="Rationale" hint="Why this evidence shows the control works (5-1000 characters).">
          {(id, hint) => <textarea id={id} aria-describedby={hint} rows={2} value={rationale} onChange={(e) => setRationale(e.target.value)} required />}
        </Field>
        {add.isError ? <ErrorPanel error={add.error} title="The mapping was not added" /> : null}
        {add.isSuccess ? (
          <p className="success" role="status">
            Mapped <code>{add.data.evidence_event_type}</code> to this control.
          </p>
        ) : null}
        <button type="submit" className="primary" disabled={add.isPending}>
          {add.isPending ? 'Adding…' : 'Add mapping'}
        </button>
      </form>
    </Section>
  );
}

/* The AI-system register */

function Register() {
  const { can } = useSession();
  const [params, setParams] = useSearchParams();
  const queryClient = useQueryClient();
  const filter = choiceParam(params, 'classification', CLASSIFICATIONS);
  const list = usePaged(['governance', 'systems', filter], (cursor) =>
    must(api.GET('/governance/systems', { params: { query: { limit: 50, ...(filter ? { classification: filter } : {}), ...(cursor ? { cursor } : {}) } } })),
  );
  const [target, setTarget] = useState<SystemRow | null>(null);
  const [choice, setChoice] = useState<Classification>('minimal');
  const classify = useMutation({
    mutationFn: (v: { agentId: string; classification: Classification; rationale: string }) =>
      must(api.POST('/governance/systems/{agent_id}/classify', { params: { path: { agent_id: v.agentId } }, body: { classification: v.classification, rationale: v.rationale } })),
    onSuccess: () => {
      setTarget(null);
      void queryClient.invalidateQueries({ queryKey: ['governance'] });
    },
  });
  return (
    <>
      <div className="toolbar">
        <Field label="Class">
          {(id) => (
            <select id={id} value={filter ?? ''} onChange={(e) => setParams(e.target.value ? { classification: e.target.value } : {})}>
              <option value="">Every class</option>
              {CLASSIFICATIONS.map((c) => (
                <option key={c} value={c}>
                  {capital(c)}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      {classify.isSuccess && !target ? (
        <p className="success" role="status">
          {classify.data.agent_name} is classified {classify.data.classification}.{' '}
          {classify.data.remediation_tasks.length === 0
            ? 'No new remediation task was needed.'
            : `${classify.data.remediation_tasks.length} remediation task${classify.data.remediation_tasks.length === 1 ? '' : 's'} opened for its gaps.`}
        </p>
      ) : null}
      <QueryView
        query={{ ...list, data: list.rows }}
        isEmpty={(rows) => rows.length === 0}
        empty={filter ? `No agent is classified ${filter}.` : 'No agent is registered yet: the register lists every agent of the organisation.'}
      >
        {(rows) => (
          <>
            <DataTable
              caption="The AI-system register"
              rows={rows}
              rowKey={(r) => r.agent_id}
              columns={[
                { header: 'Agent', cell: (r) => <Link to={`/agents/${r.agent_id}`}>{r.agent_name}</Link> },
                { header: 'Environment', cell: (r) => r.environment },
                { header: 'Status', cell: (r) => <StateBadge value={r.agent_status} /> },
                { header: 'Class', cell: (r) => <Tag value={r.classification} tones={CLASS_TONE} /> },
                { header: 'Rationale', cell: (r) => r.rationale ?? <span className="muted">—</span> },
                { header: 'Classified', cell: (r) => <Time value={r.classified_at} /> },
                { header: 'Gaps', cell: (r) => <Gaps gaps={r.gaps} /> },
                ...(can('governance:write')
                  ? [
                      {
                        header: 'Classify',
                        cell: (r: SystemRow) => (
                          <button
                            type="button"
                            aria-label={`Classify ${r.agent_name}`}
                            onClick={() => {
                              classify.reset();
                              setChoice(r.classification === 'unclassified' ? 'minimal' : r.classification);
                              setTarget(r);
                            }}
                          >
                            Classify
                          </button>
                        ),
                      },
                    ]
                  : []),
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
      <ConfirmDialog
        open={target !== null}
        title={`Classify ${target?.agent_name ?? ''}`}
        confirmLabel="Classify"
        reason={{ label: 'Rationale', required: true }}
        busy={classify.isPending}
        error={classify.error}
        onConfirm={(rationale) => classify.mutate({ agentId: target!.agent_id, classification: choice, rationale })}
        onClose={() => {
          setTarget(null);
          classify.reset();
        }}
      >
        <Field label="Class" hint="The class decides which evidence the agent must have; a remediation task opens for each gap.">
          {(id, hint) => (
            <select id={id} aria-describedby={hint} value={choice} onChange={(e) => setChoice(e.target.value as Classification)}>
              {CLASSIFICATIONS.map((c) => (
                <option key={c} value={c}>
                  {capital(c)}
                </option>
              ))}
            </select>
          )}
        </Field>
      </ConfirmDialog>
    </>
  );
}

function Gaps({ gaps }: { gaps: SystemRow['gaps'] }) {
  if (gaps.length === 0) return <span className="muted">none</span>;
  return (
    <ul className="plain gaps">
      {gaps.map((g) => (
        <li key={g.key}>
          <strong>{g.title}</strong> <span className="muted nowrap">({g.control_key})</span>
          <br />
          <span className="small">{g.why}</span>
          {g.exception_id ? <span className="small"> · covered by an exception</span> : null}
          {g.remediation_task_id ? <span className="small"> · task open</span> : null}
        </li>
      ))}
    </ul>
  );
}

/* Exceptions */

function Exceptions() {
  const { can, me } = useSession();
  const [params, setParams] = useSearchParams();
  const queryClient = useQueryClient();
  const status = choiceParam(params, 'status', EXCEPTION_STATUSES);
  const list = usePaged(['governance', 'exceptions', status], (cursor) =>
    must(api.GET('/exceptions', { params: { query: { limit: 50, ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) } } })),
  );
  const [asking, setAsking] = useState(false);
  const [deciding, setDeciding] = useState<{ exception: Exception; decision: 'approve' | 'reject' } | null>(null);
  const decide = useMutation({
    mutationFn: (v: { id: string; decision: 'approve' | 'reject'; note: string }) =>
      must(api.POST('/exceptions/{exception_id}/decision', { params: { path: { exception_id: v.id } }, body: { decision: v.decision, note: v.note } })),
    onSuccess: () => {
      setDeciding(null);
      void queryClient.invalidateQueries({ queryKey: ['governance'] });
    },
  });
  const mine = deciding?.exception.requested_by === me.user.id;
  return (
    <>
      <div className="card-head">
        <ChoiceButtons
          label="Exception status"
          options={[undefined, ...EXCEPTION_STATUSES].map((s) => ({ value: s, label: s ? capital(s) : 'All' }))}
          current={status}
          onPick={(s) => setParams(s ? { status: s } : {})}
        />
        {can('governance:write') && !asking ? (
          <button type="button" className="primary" onClick={() => setAsking(true)}>
            Ask for an exception
          </button>
        ) : null}
      </div>
      {asking ? <ExceptionForm onDone={() => setAsking(false)} /> : null}
      {decide.isSuccess && !deciding ? (
        <p className="success" role="status">
          The exception “{decide.data.title}” is {decide.data.status}.
        </p>
      ) : null}
      <QueryView
        query={{ ...list, data: list.rows }}
        isEmpty={(rows) => rows.length === 0}
        empty={status ? `No ${status} exception.` : 'No exception has been asked for: every control stands on its evidence.'}
      >
        {(rows) => (
          <>
            <DataTable
              caption="Exceptions"
              rows={rows}
              rowKey={(x) => x.id}
              columns={[
                {
                  header: 'Exception',
                  cell: (x) => (
                    <>
                      <strong>{x.title}</strong>
                      <details>
                        <summary>Justification</summary>
                        <p>{x.justification}</p>
                        {x.compensating_controls ? <p>Meanwhile: {x.compensating_controls}</p> : null}
                        {x.decision_note ? <p>Decision note: {x.decision_note}</p> : null}
                      </details>
                    </>
                  ),
                },
                { header: 'Control', cell: (x) => <Link className="nowrap" to={`/governance/controls/${x.control_id}`} title={x.control_title}>{x.control_key}</Link> },
                { header: 'About', cell: (x) => (x.agent_id ? <AgentName id={x.agent_id} /> : 'the organisation') },
                { header: 'Status', cell: (x) => <StateBadge value={x.status} /> },
                { header: 'Owner', cell: (x) => x.owner_email },
                { header: 'Requested', cell: (x) => <>{x.requested_by === me.user.id ? 'by you, ' : ''}<Time value={x.created_at} /></> },
                { header: 'Expires', cell: (x) => <Time value={x.expires_at} /> },
                ...(can('exception:approve')
                  ? [
                      {
                        header: 'Decide',
                        cell: (x: Exception) =>
                          x.status === 'pending' ? (
                            <span className="actions">
                              <button type="button" aria-label={`Approve ${x.title}`} onClick={() => {
                                  decide.reset();
                                  setDeciding({ exception: x, decision: 'approve' });
                                }}>
                                Approve
                              </button>
                              <button type="button" aria-label={`Reject ${x.title}`} onClick={() => {
                                  decide.reset();
                                  setDeciding({ exception: x, decision: 'reject' });
                                }}>
                                Reject
                              </button>
                            </span>
                          ) : (
                            <span className="muted">decided</span>
                          ),
                      },
                    ]
                  : []),
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
      <ConfirmDialog
        open={deciding !== null}
        title={deciding?.decision === 'reject' ? 'Reject this exception' : 'Approve this exception'}
        confirmLabel={deciding?.decision === 'reject' ? 'Reject' : 'Approve'}
        danger={deciding?.decision === 'reject'}
        reason={{ label: 'Note', required: true }}
        busy={decide.isPending}
        error={decide.error}
        onConfirm={(note) => decide.mutate({ id: deciding!.exception.id, decision: deciding!.decision, note })}
        onClose={() => {
          setDeciding(null);
          decide.reset();
        }}
      >
        {deciding ? (
          <>
            <p>
              “{deciding.exception.title}” on <code>{deciding.exception.control_key}</code>, until <Time value={deciding.exception.expires_at} />.{' '}
              {deciding.decision === 'approve' ? 'The control counts as covered while the exception is in force.' : 'The exception will cover nothing.'}
            </p>
            {mine ? <p className="notice">You asked for this exception: separation of duties means another person must decide it.</p> : null}
          </>
        ) : null}
      </ConfirmDialog>
    </>
  );
}

/** A control picker over every framework's controls (GET /governance/frameworks names them all). */
function ControlSelect({ id, describedBy, value, onChange, required }: { id: string; describedBy?: string; value: string; onChange: (v: string) => void; required: boolean }) {
  const frameworks = useFrameworks();
  return (
    <select id={id} aria-describedby={describedBy} value={value} onChange={(e) => onChange(e.target.value)} required={required} disabled={frameworks.isPending}>
      <option value="">{frameworks.isPending ? 'Loading the controls…' : required ? 'Choose a control' : 'No control'}</option>
      {frameworks.data?.items.map((f) => (
        <optgroup key={f.key} label={f.name}>
          {f.controls.map((c) => (
            <option key={c.id} value={c.id}>
              {c.ref}: {c.title}
            </option>
          ))}
        </optgroup>
      ))}
    </select>
  );
}

/** An agent picker over the register (the agents of the organisation, first 200). */
function AgentSelect({ id, describedBy, value, onChange }: { id: string; describedBy?: string; value: string; onChange: (v: string) => void }) {
  const agents = useQuery({
    queryKey: ['governance', 'systems', 'picker'],
    queryFn: () => must(api.GET('/governance/systems', { params: { query: { limit: 200 } } })),
  });
  return (
    <select id={id} aria-describedby={describedBy} value={value} onChange={(e) => onChange(e.target.value)}>
      <option value="">The whole organisation</option>
      {agents.data?.items.map((a) => (
        <option key={a.agent_id} value={a.agent_id}>
          {a.agent_name} ({a.environment})
        </option>
      ))}
    </select>
  );
}

/** A date input's day, as the end of that day in UTC (what "until" means to a person choosing a day). */
const endOfDay = (day: string) => `${day}T23:59:59Z`;
const dayFromNow = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);

function ExceptionForm({ onDone }: { onDone: () => void }) {
  const { me } = useSession();
  const queryClient = useQueryClient();
  const [f, setF] = useState({ control_id: '', agent_id: '', title: '', justification: '', compensating_controls: '', owner_email: me.user.email, expires: dayFromNow(30) });
  const set = (k: keyof typeof f) => (v: string) => setF((x) => ({ ...x, [k]: v }));
  const ask = useMutation({
    mutationFn: () =>
      must(
        api.POST('/exceptions', {
          body: {
            control_id: f.control_id,
            ...(f.agent_id ? { agent_id: f.agent_id } : {}),
            title: f.title.trim(),
            justification: f.justification.trim(),
            compensating_controls: f.compensating_controls.trim(),
            owner_email: f.owner_email.trim(),
            expires_at: endOfDay(f.expires),
          },
        }),
      ),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ['governance'] });
      onDone();
    },
  });
  return (
    <Section title="Ask for an exception">
      <form
        className="form-narrow"
        onSubmit={(e) => {
          e.preventDefault();
          ask.mutate();
        }}
      >
        <p className="small muted">It stays pending until another person with the right to approve exceptions decides it.</p>
        <Field label="Control">{(id) => <ControlSelect id={id} value={f.control_id} onChange={set('control_id')} required />}</Field>
        <Field label="About" hint="An exception about one agent covers only that agent’s gap, not the organisation’s coverage.">
          {(id, hint) => <AgentSelect id={id} describedBy={hint} value={f.agent_id} onChange={set('agent_id')} />}
        </Field>
        <Field label="Title">{(id) => <input id={id} value={f.title} onChange={(e) => set('title')(e.target.value)} required minLength={5} maxLength={300} />}</Field>
        <Field label="Justification" hint="Why the control cannot be met for now (at least 20 characters).">
          {(id, hint) => <textarea id={id} aria-describedby={hint} rows={3} value={f.justification} onChange={(e) => set('justification')(e.target.value)} required />}
        </Field>
        <Field label="Compensating controls (optional)" hint="What is done instead meanwhile.">
          {(id, hint) => <textarea id={id} aria-describedby={hint} rows={2} value={f.compensating_controls} onChange={(e) => set('compensating_controls')(e.target.value)} />}
        </Field>
        <Field label="Owner’s email" hint="Who answers for it; told a week before it lapses.">
          {(id, hint) => <input id={id} aria-describedby={hint} type="email" value={f.owner_email} onChange={(e) => set('owner_email')(e.target.value)} required />}
        </Field>
        <Field label="Expires on" hint="It lapses by itself at the end of this day (UTC).">
          {(id, hint) => <input id={id} aria-describedby={hint} type="date" value={f.expires} onChange={(e) => set('expires')(e.target.value)} required />}
        </Field>
        {ask.isError ? <ErrorPanel error={ask.error} title="The exception was not asked for" /> : null}
        <div className="actions">
          <button type="submit" className="primary" disabled={ask.isPending}>
            {ask.isPending ? 'Sending…' : 'Ask for the exception'}
          </button>
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        </div>
      </form>
    </Section>
  );
}

/* Remediation */

function Remediation() {
  const { can } = useSession();
  const [params, setParams] = useSearchParams();
  const queryClient = useQueryClient();
  const status = choiceParam(params, 'status', TASK_STATUSES);
  const agentId = params.get('agent_id') ?? undefined;
  const list = usePaged(['governance', 'remediation', status, agentId], (cursor) =>
    must(
      api.GET('/governance/remediation', {
        params: { query: { limit: 50, ...(status ? { status } : {}), ...(agentId ? { agent_id: agentId } : {}), ...(cursor ? { cursor } : {}) } },
      }),
    ),
  );
  const [opening, setOpening] = useState(false);
  const [cancelling, setCancelling] = useState<Task | null>(null);
  const move = useMutation({
    mutationFn: (v: { id: string; status: TaskStatus }) =>
      must(api.PATCH('/governance/remediation/{task_id}', { params: { path: { task_id: v.id } }, body: { status: v.status } })),
    onSuccess: () => {
      setCancelling(null);
      void queryClient.invalidateQueries({ queryKey: ['governance'] });
    },
  });
  return (
    <>
      <div className="card-head">
        <ChoiceButtons
          label="Task status"
          options={[undefined, ...TASK_STATUSES].map((s) => ({ value: s, label: s ? capital(words(s)) : 'All' }))}
          current={status}
          onPick={(s) =>
            setParams(() => {
              const next = new URLSearchParams();
              if (s) next.set('status', s);
              if (agentId) next.set('agent_id', agentId);
              return next;
            })
          }
        />
        {can('governance:write') && !opening ? (
          <button type="button" className="primary" onClick={() => setOpening(true)}>
            Open a task
          </button>
        ) : null}
      </div>
      {agentId ? (
        <p className="notice">
          Tasks about one agent only. <Link to="/governance/remediation">Show every task</Link>
        </p>
      ) : null}
      {opening ? <TaskForm onDone={() => setOpening(false)} /> : null}
      {move.isError && !cancelling ? <ErrorPanel error={move.error} title="The task did not move" /> : null}
      {move.isSuccess && !cancelling ? (
        <p className="success" role="status">
          “{move.data.title}” is {words(move.data.status)}.
        </p>
      ) : null}
      <QueryView
        query={{ ...list, data: list.rows }}
        isEmpty={(rows) => rows.length === 0}
        empty={status ? `No ${words(status)} task.` : 'No remediation task: nothing is being put right.'}
      >
        {(rows) => (
          <>
            <DataTable
              caption="Remediation tasks"
              rows={rows}
              rowKey={(r) => r.id}
              columns={[
                {
                  header: 'Task',
                  cell: (r) => (
                    <>
                      <strong>{r.title}</strong>
                      {r.description ? <p className="small task-description">{r.description}</p> : null}
                    </>
                  ),
                },
                { header: 'Priority', cell: (r) => <Tag value={r.priority} tones={PRIORITY_TONE} /> },
                { header: 'Status', cell: (r) => <Tag value={r.status} tones={{ open: 'warn', in_progress: 'info', done: 'good', cancelled: 'neutral' }} /> },
                { header: 'Control', cell: (r) => (r.control_id ? <Link className="nowrap" to={`/governance/controls/${r.control_id}`}>{r.control_key}</Link> : <span className="muted">—</span>) },
                { header: 'Agent', cell: (r) => (r.agent_id ? <AgentName id={r.agent_id} /> : <span className="muted">—</span>) },
                { header: 'Opened by', cell: (r) => (r.source === 'classification' ? `classification (${words(r.gap ?? '')})` : 'a person') },
                { header: 'Assignee', cell: (r) => r.assignee_email ?? <span className="muted">—</span> },
                { header: 'Due', cell: (r) => <Time value={r.due_at} /> },
                ...(can('governance:write')
                  ? [
                      {
                        header: 'Move',
                        cell: (r: Task) =>
                          MOVES[r.status].length === 0 ? (
                            <span className="muted">closed</span>
                          ) : (
                            <span className="actions">
                              {MOVES[r.status].map((m) => (
                                <button
                                  key={m.to}
                                  type="button"
                                  aria-label={`${m.label}: ${r.title}`}
                                  disabled={move.isPending}
                                  onClick={() => {
                                    move.reset();
                                    if (m.to === 'cancelled') setCancelling(r);
                                    else move.mutate({ id: r.id, status: m.to });
                                  }}
                                >
                                  {m.label}
                                </button>
                              ))}
                            </span>
                          ),
                      },
                    ]
                  : []),
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
      <ConfirmDialog
        open={cancelling !== null}
        title="Cancel this task"
        confirmLabel="Cancel task"
        danger
        busy={move.isPending}
        error={move.error}
        onConfirm={() => move.mutate({ id: cancelling!.id, status: 'cancelled' })}
        onClose={() => {
          setCancelling(null);
          move.reset();
        }}
      >
        <p>
          “{cancelling?.title}” will be closed for good: a cancelled task cannot be reopened. {cancelling?.control_key ? 'Its control no longer counts as not met because of it.' : null}
        </p>
      </ConfirmDialog>
    </>
  );
}

function TaskForm({ onDone }: { onDone: () => void }) {
  const queryClient = useQueryClient();
  const [f, setF] = useState({ title: '', description: '', control_id: '', agent_id: '', assignee_email: '', due: '', priority: 'medium' as Priority });
  const set = (k: keyof typeof f) => (v: string) => setF((x) => ({ ...x, [k]: v }));
  const open = useMutation({
    mutationFn: () =>
      must(
        api.POST('/governance/remediation', {
          body: {
            title: f.title.trim(),
            description: f.description.trim(),
            priority: f.priority,
            ...(f.control_id ? { control_id: f.control_id } : {}),
            ...(f.agent_id ? { agent_id: f.agent_id } : {}),
            ...(f.assignee_email.trim() ? { assignee_email: f.assignee_email.trim() } : {}),
            ...(f.due ? { due_at: endOfDay(f.due) } : {}),
          },
        }),
      ),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ['governance'] });
      onDone();
    },
  });
  return (
    <Section title="Open a remediation task">
      <form
        className="form-narrow"
        onSubmit={(e) => {
          e.preventDefault();
          open.mutate();
        }}
      >
        <Field label="Title">{(id) => <input id={id} value={f.title} onChange={(e) => set('title')(e.target.value)} required minLength={5} maxLength={300} />}</Field>
        <Field label="Description (optional)">{(id) => <textarea id={id} rows={2} value={f.description} onChange={(e) => set('description')(e.target.value)} maxLength={4000} />}</Field>
        <Field label="Control (optional)" hint="While the task is open or in progress, its control is not met.">
          {(id, hint) => <ControlSelect id={id} describedBy={hint} value={f.control_id} onChange={set('control_id')} required={false} />}
        </Field>
        <Field label="Agent (optional)">{(id) => <AgentSelect id={id} value={f.agent_id} onChange={set('agent_id')} />}</Field>
        <Field label="Priority">
          {(id) => (
            <select id={id} value={f.priority} onChange={(e) => set('priority')(e.target.value)}>
              {PRIORITIES.map((p) => (
                <option key={p} value={p}>
                  {capital(p)}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Assignee’s email (optional)">{(id) => <input id={id} type="email" value={f.assignee_email} onChange={(e) => set('assignee_email')(e.target.value)} />}</Field>
        <Field label="Due on (optional)">{(id) => <input id={id} type="date" value={f.due} onChange={(e) => set('due')(e.target.value)} />}</Field>
        {open.isError ? <ErrorPanel error={open.error} title="The task was not opened" /> : null}
        <div className="actions">
          <button type="submit" className="primary" disabled={open.isPending}>
            {open.isPending ? 'Opening…' : 'Open the task'}
          </button>
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        </div>
      </form>
    </Section>
  );
}

