import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { Link, Route, Routes, useNavigate, useParams } from 'react-router';
import { api, ApiFailure, must, type Paths } from '../api/client';
import { usePaged } from '../api/hooks';
import { ConfirmDialog } from '../components/confirm';
import { RulesDiff, type Rule } from '../components/rules-diff';
import { Badge, DataTable, ErrorPanel, Facts, Field, JsonView, LoadMore, PageHeader, QueryView, Section, StateBadge, Time } from '../components/ui';
import { useSession } from '../session';
import './policies.css';

type Policy = Paths['/policies/{policy_id}']['get']['responses'][200]['content']['application/json'];
type Version = NonNullable<Policy['versions']>[number];
type Simulation = Paths['/policies/simulate']['post']['responses'][200]['content']['application/json'];

const FOUR_EYES = 'A second person must publish this version: its author can never publish it, whatever their roles.';

const RULES_EXAMPLE: Rule[] = [
  {
    id: 'large-payments',
    description: 'A person looks at payments above 1000',
    effect: 'require_approval',
    reason_code: 'LARGE_PAYMENT',
    conditions: [
      { field: 'tool.privilege_class', op: 'eq', value: 'financial' },
      { field: 'action.amount', op: 'gt', value: 1000 },
    ],
  },
];

export default function PoliciesPage() {
  return (
    <Routes>
      <Route index element={<PolicyList />} />
      <Route path="new" element={<NewPolicy />} />
      <Route path=":policyId" element={<PolicyDetail />} />
    </Routes>
  );
}

const policyKey = (id: string | undefined) => ['policy', id] as const;

/** The answer of a change made from an outdated page: reloading the policy is the way on. */
const isStale = (e: unknown) => e instanceof ApiFailure && (e.code === 'version_conflict' || e.code === 'precondition_required');

/** A refused change in words, with "Reload the policy" when the refusal is a stale version. */
function RefusedWithReload({ error, title, onReload }: { error: unknown; title: string; onReload: () => Promise<unknown> | void }) {
  return (
    <>
      <ErrorPanel error={error} title={title} />
      {isStale(error) ? (
        <button type="button" onClick={() => void onReload()}>
          Reload the policy
        </button>
      ) : null}
    </>
  );
}

/**
 * A person by name where the reader may see people (user:read: the first 200 of the organisation, read
 * once), else by the start of their ID.
 */
function Who({ id }: { id: string | null }) {
  const { me, can } = useSession();
  const people = useQuery({
    queryKey: ['users', 'names'],
    queryFn: () => must(api.GET('/users', { params: { query: { limit: 200 } } })),
    enabled: can('user:read'),
    staleTime: 60_000,
  });
  if (!id) return <span className="muted">—</span>;
  if (id === me.user.id) return <>you</>;
  const person = people.data?.items.find((u) => u.id === id);
  if (person) return <span title={`${person.email} (${id})`}>{person.display_name}</span>;
  return <code title={id}>{id.slice(0, 8)}</code>;
}

function PolicyList() {
  const { can } = useSession();
  const list = usePaged(['policies'], (cursor) => must(api.GET('/policies', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } })));
  return (
    <>
      <PageHeader
        title="Policies"
        description="Rules on top of the baseline. A version is a draft until published; four eyes: a version's author can never publish it."
        actions={
          can('policy:write') ? (
            <Link className="button primary" to="/policies/new">
              New policy
            </Link>
          ) : null
        }
      />
      <QueryView query={{ ...list, data: list.rows }} isEmpty={(rows) => rows.length === 0} empty="No policy yet: only the baseline applies.">
        {(rows) => (
          <>
            <DataTable
              caption="Policies"
              rows={rows}
              rowKey={(p) => p.id}
              columns={[
                { header: 'Key', cell: (p) => <Link to={`/policies/${p.id}`}><code>{p.key}</code></Link> },
                { header: 'Name', cell: (p) => p.name },
                { header: 'Status', cell: (p) => <StateBadge value={p.status} /> },
                {
                  header: 'Published version',
                  cell: (p) => (p.published_version === null ? <span className="muted">none: drafts only</span> : `version ${p.published_version}`),
                },
                { header: 'Latest version', cell: (p) => `version ${p.latest_version}` },
                { header: 'Critical', cell: (p) => (p.critical ? <Badge tone="warn">critical</Badge> : <span className="muted">no</span>) },
                { header: 'Updated', cell: (p) => <Time value={p.updated_at} /> },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </>
  );
}

/** Rules typed as JSON: the parsed list, or why it is not one (the API checks each rule again). */
function parseRules(text: string): { rules: Rule[] } | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { problem: `The rules are not valid JSON: ${(err as Error).message}` };
  }
  if (!Array.isArray(value)) return { problem: 'The rules must be a JSON list of rules: [ { "id": …, "effect": …, "reason_code": …, "conditions": [ … ] } ].' };
  return { rules: value as Rule[] };
}

/** The rules editor: a JSON textarea with its parse error tied to it. */
function RulesField({ label, value, onChange, problem }: { label: string; value: string; onChange: (v: string) => void; problem: string | null }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        className="rules-editor"
        value={value}
        onChange={(e) => onChange(e.target.value)}
        rows={16}
        spellCheck={false}
        aria-invalid={problem ? true : undefined}
        aria-describedby={`${id}-hint${problem ? ` ${id}-problem` : ''}`}
      />
      <p id={`${id}-hint`} className="small muted">
        A JSON list of rules: <code>id</code>, <code>effect</code> (allow, deny, require_approval), <code>reason_code</code> (UPPER_SNAKE_CASE),{' '}
        <code>conditions</code> (all must hold), optional <code>description</code> and <code>obligations</code>.
      </p>
      {problem ? (
        <p id={`${id}-problem`} className="field-problem" role="alert">
          {problem}
        </p>
      ) : null}
    </div>
  );
}

/** An API failure; for invalid_policy, each problem with its rule and condition. */
function Failure({ error }: { error: unknown }) {
  const problems =
    error instanceof ApiFailure && error.code === 'invalid_policy' && Array.isArray(error.details)
      ? (error.details as Array<{ rule?: string; rule_index?: number; condition_index?: number; field?: string; message?: string }>)
      : [];
  return (
    <>
      <ErrorPanel error={error} />
      {problems.length > 0 ? (
        <ul className="rule-problems" aria-label="Problems in the rules">
          {problems.map((p, i) => (
            <li key={i}>
              Rule <code>{p.rule}</code> (number {(p.rule_index ?? 0) + 1})
              {p.condition_index !== undefined ? `, condition ${p.condition_index + 1}` : ''}
              {p.field ? (
                <>
                  , field <code>{p.field}</code>
                </>
              ) : null}
              : {p.message}
            </li>
          ))}
        </ul>
      ) : null}
    </>
  );
}

function NewPolicy() {
  const { can } = useSession();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [key, setKey] = useState('');
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [critical, setCritical] = useState(false);
  const [note, setNote] = useState('Initial draft');
  const [rulesText, setRulesText] = useState(JSON.stringify(RULES_EXAMPLE, null, 2));
  const [problem, setProblem] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: (body: Paths['/policies']['post']['requestBody']['content']['application/json']) => must(api.POST('/policies', { body })),
    onSuccess: (p) => {
      queryClient.setQueryData(policyKey(p.id), p);
      void queryClient.invalidateQueries({ queryKey: ['policies'] });
      navigate(`/policies/${p.id}`);
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const parsed = parseRules(rulesText);
    if ('problem' in parsed) {
      setProblem(parsed.problem);
      return;
    }
    setProblem(null);
    create.mutate({ key, name, description, critical, change_note: note, rules: parsed.rules });
  };
  return (
    <>
      <PageHeader
        title="New policy"
        description={
          <>
            <Link to="/policies">Policies</Link> · its rules become version 1, a draft that no decision reads until a second person publishes it.
          </>
        }
      />
      {!can('policy:write') ? (
        <p className="notice">Creating a policy needs the permission policy:write, which your roles do not grant.</p>
      ) : (
        <form className="card" onSubmit={submit} aria-label="New policy">
          <div className="grid-2">
            <Field label="Key" hint="3-100 letters, digits and . _ -; unique in the organisation">
              {(id, hint) => <input id={id} aria-describedby={hint} value={key} onChange={(e) => setKey(e.target.value)} required />}
            </Field>
            <Field label="Name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
          </div>
          <Field label="Description">{(id) => <textarea id={id} value={description} onChange={(e) => setDescription(e.target.value)} rows={2} />}</Field>
          <Field label="Change note">{(id) => <input id={id} value={note} onChange={(e) => setNote(e.target.value)} />}</Field>
          <div className="field checkbox">
            <label>
              <input type="checkbox" checked={critical} onChange={(e) => setCritical(e.target.checked)} /> Critical: deactivating it needs an explicit confirmation and a reason
            </label>
          </div>
          <RulesField label="Rules (JSON)" value={rulesText} onChange={setRulesText} problem={problem} />
          {create.isError ? <Failure error={create.error} /> : null}
          <button type="submit" className="primary" disabled={create.isPending}>
            {create.isPending ? 'Creating…' : 'Create policy'}
          </button>
        </form>
      )}
    </>
  );
}

function PolicyDetail() {
  const { policyId } = useParams();
  const { can, me } = useSession();
  const queryClient = useQueryClient();
  // Never refreshed behind the person's back: If-Match carries the version they have looked at, so a change
  // made meanwhile is refused (version_conflict) rather than published unseen.
  const policy = useQuery({
    queryKey: policyKey(policyId),
    queryFn: () => must(api.GET('/policies/{policy_id}', { params: { path: { policy_id: policyId! } } })),
    refetchOnWindowFocus: false,
    staleTime: Infinity,
  });
  const [publishing, setPublishing] = useState<Version | null>(null);
  const [statusChange, setStatusChange] = useState<'active' | 'inactive' | null>(null);
  const [done, setDone] = useState<string | null>(null);

  const changed = (p: Policy, message: string) => {
    queryClient.setQueryData(policyKey(p.id), p);
    void queryClient.invalidateQueries({ queryKey: ['policies'] });
    setDone(message);
  };
  const publish = useMutation({
    mutationFn: (v: { number: number; ifMatch: number }) =>
      must(
        api.POST('/policies/{policy_id}/versions/{number}/publish', {
          params: { path: { policy_id: policyId!, number: v.number }, header: { 'If-Match': String(v.ifMatch) } },
        }),
      ),
    onSuccess: (p, v) => {
      changed(p, `Version ${v.number} is published: decisions use it from now on${p.status === 'inactive' ? ' once the policy is active' : ''}.`);
      setPublishing(null);
    },
  });
  const setStatus = useMutation({
    mutationFn: (v: { status: 'active' | 'inactive'; reason: string; critical: boolean; ifMatch: number }) =>
      must(
        api.POST('/policies/{policy_id}/status', {
          params: { path: { policy_id: policyId! }, header: { 'If-Match': String(v.ifMatch) } },
          body: { status: v.status, ...(v.reason ? { reason: v.reason } : {}), ...(v.critical && v.status === 'inactive' ? { confirm: true } : {}) },
        }),
      ),
    onSuccess: (p) => {
      changed(p, `The policy is ${p.status}.`);
      setStatusChange(null);
    },
  });
  const reload = async () => {
    publish.reset();
    setStatus.reset();
    setPublishing(null);
    setStatusChange(null);
    setDone(null);
    await policy.refetch();
  };

  return (
    <QueryView query={policy}>
      {(p) => {
        const versions = p.versions ?? [];
        return (
          <>
            <PageHeader
              title={`Policy: ${p.name}`}
              description={
                <>
                  <Link to="/policies">Policies</Link> · <code>{p.key}</code> · <StateBadge value={p.status} />
                  {p.critical ? (
                    <>
                      {' '}
                      · <Badge tone="warn">critical</Badge>
                    </>
                  ) : null}
                </>
              }
              actions={
                can('policy:publish') ? (
                  p.status === 'active' ? (
                    <button type="button" className="danger" onClick={() => setStatusChange('inactive')}>
                      Deactivate
                    </button>
                  ) : (
                    <button type="button" className="primary" onClick={() => setStatusChange('active')}>
                      Activate
                    </button>
                  )
                ) : null
              }
            />
            {done ? (
              <p className="success" role="status">
                {done}
              </p>
            ) : null}
            <Section title="About this policy">
              <Facts
                items={[
                  ['Key', <code>{p.key}</code>],
                  ['Status', <StateBadge value={p.status} />],
                  ['Published version', p.published_version === null ? 'none: no version is in force' : `version ${p.published_version}`],
                  ['Latest version', `version ${p.latest_version}`],
                  ['Critical', p.critical ? 'yes: deactivating needs a confirmation and a reason' : 'no'],
                  ['Four eyes', 'always: a version is published by someone other than its author'],
                  ['Record version (If-Match)', String(p.version)],
                  ['Created', <Time value={p.created_at} />],
                  ['Updated', <Time value={p.updated_at} />],
                  ['Description', p.description || null],
                ]}
              />
            </Section>
            <Section title="Versions">
              <DataTable
                caption="Versions, newest first"
                rows={versions}
                rowKey={(v) => String(v.number)}
                columns={[
                  { header: 'Version', cell: (v) => `version ${v.number}` },
                  { header: 'State', cell: (v) => <StateBadge value={v.state} /> },
                  { header: 'Author', cell: (v) => <Who id={v.author_id} /> },
                  { header: 'Created', cell: (v) => <Time value={v.created_at} /> },
                  { header: 'Change note', cell: (v) => v.change_note },
                  {
                    header: 'Published',
                    cell: (v) =>
                      v.published_at ? (
                        <>
                          <Time value={v.published_at} /> by <Who id={v.published_by} />
                        </>
                      ) : (
                        <span className="muted">never</span>
                      ),
                  },
                  { header: 'Latest replay', cell: (v) => <ReplaySummary replay={v.latest_replay} /> },
                  {
                    header: 'Publishing',
                    cell: (v) =>
                      v.state === 'published' ? (
                        <span className="muted">in force{p.status === 'inactive' ? ' once active' : ''}</span>
                      ) : (
                        <div className="publish-cell">
                          {v.author_id === me.user.id ? <p className="four-eyes">You wrote this version: a second person must publish this version.</p> : null}
                          {can('policy:publish') ? (
                            <button type="button" onClick={() => setPublishing(v)} aria-label={`Publish version ${v.number}`}>
                              {v.state === 'superseded' ? 'Publish again (roll back)' : 'Publish'}
                            </button>
                          ) : v.author_id !== me.user.id ? (
                            <span className="muted small">needs policy:publish</span>
                          ) : null}
                        </div>
                      ),
                  },
                ]}
              />
            </Section>
            {versions.length > 0 ? <Compare versions={versions} /> : null}
            {can('policy:write') || can('action:test') ? <Workbench policy={p} latest={versions[0]} /> : null}

            <ConfirmDialog
              open={publishing !== null}
              title={`Publish version ${publishing?.number ?? ''}`}
              confirmLabel="Publish"
              busy={publish.isPending}
              onConfirm={() => publishing && publish.mutate({ number: publishing.number, ifMatch: p.version })}
              onClose={() => {
                setPublishing(null);
                publish.reset();
              }}
            >
              {publishing ? (
                <>
                  <p>
                    Version {publishing.number} of <strong>{p.name}</strong> becomes the version in force
                    {p.published_version !== null ? `, in place of version ${p.published_version}` : ''}
                    {p.status === 'inactive' ? ' (the policy is inactive: no decision reads it until it is activated)' : ''}.
                  </p>
                  {publishing.author_id === me.user.id ? (
                    <p className="notice">Four eyes: you wrote version {publishing.number}. {FOUR_EYES}</p>
                  ) : (
                    <p className="small muted">Written by <Who id={publishing.author_id} />; you are the second person.</p>
                  )}
                  <p className="small muted">As you loaded it: record version {p.version}. If someone changed the policy since, the API refuses and you reload.</p>
                </>
              ) : null}
              {publish.isError ? <RefusedWithReload error={publish.error} title="The version was not published" onReload={reload} /> : null}
            </ConfirmDialog>
            <ConfirmDialog
              open={statusChange !== null}
              title={statusChange === 'inactive' ? 'Deactivate this policy' : 'Activate this policy'}
              confirmLabel={statusChange === 'inactive' ? 'Deactivate' : 'Activate'}
              danger={statusChange === 'inactive'}
              reason={statusChange === 'inactive' ? { label: 'Reason', required: p.critical } : undefined}
              busy={setStatus.isPending}
              onConfirm={(reason) => statusChange && setStatus.mutate({ status: statusChange, reason, critical: p.critical, ifMatch: p.version })}
              onClose={() => {
                setStatusChange(null);
                setStatus.reset();
              }}
            >
              <p>
                {statusChange === 'inactive'
                  ? `No decision reads ${p.name} while it is inactive: its published rules stop applying at once.`
                  : `The published version of ${p.name} applies to decisions again at once.`}
              </p>
              {statusChange === 'inactive' && p.critical ? <p className="notice">This policy is critical: say why it is switched off (3-2000 characters).</p> : null}
              {setStatus.isError ? <RefusedWithReload error={setStatus.error} title="The status did not change" onReload={reload} /> : null}
            </ConfirmDialog>
          </>
        );
      }}
    </QueryView>
  );
}

function ReplaySummary({ replay }: { replay: Version['latest_replay'] }) {
  if (!replay) return <span className="muted">never replayed</span>;
  return (
    <span>
      {replay.changed} of {replay.replayed} decisions changed
      {replay.reason_codes_changed > 0 ? `, ${replay.reason_codes_changed} with other reason codes` : ''} (<Time value={replay.created_at} />)
    </span>
  );
}

/** Two versions side by side: "from" defaults to the one in force (else the one before the latest), "to" to the latest. */
function Compare({ versions }: { versions: Version[] }) {
  const latest = versions[0]!;
  const published = versions.find((v) => v.state === 'published');
  const initialFrom = published && published.number !== latest.number ? published : (versions[1] ?? latest);
  const [from, setFrom] = useState(initialFrom.number);
  const [to, setTo] = useState(latest.number);
  const a = versions.find((v) => v.number === from) ?? initialFrom;
  const b = versions.find((v) => v.number === to) ?? latest;
  const label = (v: Version) => `version ${v.number} (${v.state})`;
  const options = versions.map((v) => (
    <option key={v.number} value={v.number}>
      {label(v)}
    </option>
  ));
  return (
    <Section title="Compare versions">
      {versions.length < 2 ? (
        <p className="muted">Only one version so far: nothing to compare.</p>
      ) : (
        <>
          <div className="toolbar">
            <Field label="From version">
              {(id) => (
                <select id={id} value={a.number} onChange={(e) => setFrom(Number(e.target.value))}>
                  {options}
                </select>
              )}
            </Field>
            <Field label="To version">
              {(id) => (
                <select id={id} value={b.number} onChange={(e) => setTo(Number(e.target.value))}>
                  {options}
                </select>
              )}
            </Field>
          </div>
          <RulesDiff from={a.rules} to={b.rules} fromLabel={`version ${a.number}`} toLabel={`version ${b.number}`} />
        </>
      )}
    </Section>
  );
}

/**
 * Draft rules, prefilled from the latest version: simulated against a sample request, and saved as the
 * next draft version (If-Match: the policy's version as loaded).
 */
function Workbench({ policy, latest }: { policy: Policy; latest: Version | undefined }) {
  const { can } = useSession();
  const queryClient = useQueryClient();
  const [text, setText] = useState(() => JSON.stringify(latest?.rules ?? [], null, 2));
  const [note, setNote] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [saved, setSaved] = useState<number | null>(null);
  const save = useMutation({
    mutationFn: (v: { rules: Rule[]; note: string }) =>
      must(
        api.POST('/policies/{policy_id}/versions', {
          params: { path: { policy_id: policy.id }, header: { 'If-Match': String(policy.version) } },
          body: { rules: v.rules, change_note: v.note },
        }),
      ),
    onSuccess: (p) => {
      queryClient.setQueryData(policyKey(p.id), p);
      void queryClient.invalidateQueries({ queryKey: ['policies'] });
      setSaved(p.latest_version);
      setNote('');
    },
  });
  const rules = (): Rule[] | null => {
    const parsed = parseRules(text);
    if ('problem' in parsed) {
      setProblem(parsed.problem);
      return null;
    }
    setProblem(null);
    return parsed.rules;
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const r = rules();
    if (r) {
      setSaved(null);
      save.mutate({ rules: r, note });
    }
  };
  return (
    <>
      <Section title="Draft rules">
        <p className="small muted">
          Prefilled from version {latest?.number ?? '—'}. Simulate them below; saving makes version {policy.latest_version + 1}, a draft that no decision reads until a
          second person publishes it.
        </p>
        <form onSubmit={submit} aria-label="New draft version">
          <RulesField label="Draft rules (JSON)" value={text} onChange={setText} problem={problem} />
          {can('policy:write') ? (
            <>
              <Field label="Change note" hint="3-2000 characters: what changes and why">
                {(id, hint) => <input id={id} aria-describedby={hint} value={note} onChange={(e) => setNote(e.target.value)} required minLength={3} maxLength={2000} />}
              </Field>
              {save.isError ? <Failure error={save.error} /> : null}
              {isStale(save.error) ? (
                <p>
                  Your draft rules stay as typed.{' '}
                  <button
                    type="button"
                    onClick={() => {
                      save.reset();
                      void queryClient.invalidateQueries({ queryKey: policyKey(policy.id) });
                    }}
                  >
                    Reload the policy
                  </button>
                </p>
              ) : null}
              {saved !== null && !save.isError ? (
                <p className="success" role="status">
                  Saved as version {saved}, a draft.
                </p>
              ) : null}
              <button type="submit" className="primary" disabled={save.isPending}>
                {save.isPending ? 'Saving…' : 'New draft version'}
              </button>
            </>
          ) : null}
        </form>
      </Section>
      {can('action:test') ? <Simulate draftRules={rules} /> : null}
    </>
  );
}

function Simulate({ draftRules }: { draftRules: () => Rule[] | null }) {
  const { can } = useSession();
  const agents = useQuery({
    queryKey: ['agents', 'for-simulation'],
    queryFn: () => must(api.GET('/agents', { params: { query: { limit: 100 } } })),
    enabled: can('agent:read'),
  });
  const [agentId, setAgentId] = useState('');
  const [tool, setTool] = useState('');
  const [target, setTarget] = useState('');
  const [operation, setOperation] = useState('invoke');
  const [parameters, setParameters] = useState('{}');
  const [useDraft, setUseDraft] = useState(true);
  const [problem, setProblem] = useState<string | null>(null);
  const run = useMutation({
    mutationFn: (body: Paths['/policies/simulate']['post']['requestBody']['content']['application/json']) => must(api.POST('/policies/simulate', { body })),
  });
  const paramsId = useId();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    let params: unknown;
    try {
      params = JSON.parse(parameters || '{}');
    } catch (err) {
      setProblem(`The parameters are not valid JSON: ${(err as Error).message}`);
      return;
    }
    if (!params || typeof params !== 'object' || Array.isArray(params)) {
      setProblem('The parameters must be a JSON object, for example {"amount": 120}.');
      return;
    }
    setProblem(null);
    const rules = useDraft ? draftRules() : null;
    if (useDraft && !rules) return;
    run.mutate({
      agent_id: agentId.trim(),
      tool: tool.trim(),
      operation,
      target,
      parameters: params as Record<string, unknown>,
      ...(useDraft ? { draft_rules: rules } : {}),
    });
  };
  const agentList = agents.data?.items ?? [];
  return (
    <Section title="Simulate">
      <p className="small muted">A dry run through the gateway's engine against this organisation's registry: nothing is stored, run or recorded.</p>
      <form onSubmit={submit} aria-label="Simulate a request">
        <div className="grid-2">
          <Field label="Agent">
            {(id) =>
              can('agent:read') && agentList.length > 0 ? (
                <select id={id} value={agentId} onChange={(e) => setAgentId(e.target.value)} required>
                  <option value="">Choose an agent…</option>
                  {agentList.map((a) => (
                    <option key={a.id} value={a.id}>
                      {a.name}
                    </option>
                  ))}
                </select>
              ) : (
                <input id={id} value={agentId} onChange={(e) => setAgentId(e.target.value)} placeholder="agent ID" required />
              )
            }
          </Field>
          <Field label="Tool" hint="The tool key, for example payments.create_payment">
            {(id, hint) => <input id={id} aria-describedby={hint} value={tool} onChange={(e) => setTool(e.target.value)} required />}
          </Field>
          <Field label="Target">{(id) => <input id={id} value={target} onChange={(e) => setTarget(e.target.value)} />}</Field>
          <Field label="Operation">{(id) => <input id={id} value={operation} onChange={(e) => setOperation(e.target.value)} />}</Field>
        </div>
        <div className="field">
          <label htmlFor={paramsId}>Parameters (JSON object)</label>
          <textarea
            id={paramsId}
            value={parameters}
            onChange={(e) => setParameters(e.target.value)}
            rows={4}
            spellCheck={false}
            aria-invalid={problem ? true : undefined}
            aria-describedby={problem ? `${paramsId}-problem` : undefined}
          />
          {problem ? (
            <p id={`${paramsId}-problem`} className="field-problem" role="alert">
              {problem}
            </p>
          ) : null}
        </div>
        <fieldset className="choice">
          <legend>Rules to decide with</legend>
          <label>
            <input type="radio" name="rules-source" checked={useDraft} onChange={() => setUseDraft(true)} /> The draft rules above (instead of every published rule)
          </label>
          <label>
            <input type="radio" name="rules-source" checked={!useDraft} onChange={() => setUseDraft(false)} /> The published rules of the active policies
          </label>
        </fieldset>
        {run.isError ? <Failure error={run.error} /> : null}
        <button type="submit" className="primary" disabled={run.isPending}>
          {run.isPending ? 'Simulating…' : 'Simulate'}
        </button>
      </form>
      {run.isSuccess ? <SimulationResult result={run.data} /> : null}
    </Section>
  );
}

function SimulationResult({ result }: { result: Simulation }) {
  return (
    <div className="simulation" aria-label="Simulation result" role="region">
      <h3>Result</h3>
      <Facts
        items={[
          ['Decision', <StateBadge value={result.decision} />],
          ['Reason codes', result.reason_codes.length ? result.reason_codes.map((c) => <Badge key={c} tone={result.decision === 'allow' ? 'good' : result.decision === 'deny' ? 'bad' : 'warn'}>{c}</Badge>) : null],
          ['Approvals required', String(result.approvals_required)],
          ['Rules evaluated', result.rules_evaluated === 'draft' ? 'the draft rules' : 'the published rules'],
        ]}
      />
      <h3>Trace</h3>
      <DataTable
        caption="The engine's steps"
        rows={result.trace.map((s, i) => ({ ...s, i }))}
        rowKey={(s) => String(s.i)}
        columns={[
          { header: 'Step', cell: (s) => s.step },
          { header: 'Outcome', cell: (s) => <StateBadge value={s.outcome} /> },
          { header: 'Reason', cell: (s) => (s.reason ? <code>{s.reason}</code> : null) },
          { header: 'Detail', cell: (s) => <StepDetail detail={s.detail} /> },
        ]}
      />
    </div>
  );
}

/** A policy step names its rule and each condition's result in words; other steps show their detail as it is. */
function StepDetail({ detail }: { detail: Record<string, unknown> | undefined }) {
  if (!detail) return null;
  const conditions = detail.conditions as Array<{ field?: string; op: string; matched: boolean }> | undefined;
  if (typeof detail.rule_id === 'string' && Array.isArray(conditions)) {
    return (
      <div>
        rule <code>{detail.rule_id}</code>
        {typeof detail.policy === 'string' ? (
          <>
            {' '}
            of <code>{detail.policy}</code>
          </>
        ) : null}
        <ul className="plain small">
          {conditions.map((c, i) => (
            <li key={i}>
              <code>
                {c.field ?? 'cel'} {c.op}
              </code>
              : {c.matched ? 'holds' : 'does not hold'}
            </li>
          ))}
        </ul>
      </div>
    );
  }
  return <JsonView value={detail} label="Step detail" />;
}
