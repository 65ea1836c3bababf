import { useMutation, useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, Route, Routes, useParams, useSearchParams } from 'react-router';
import { api, ApiFailure, must, type Paths } from '../api/client';
import { useAgent, usePaged } from '../api/hooks';
import { Badge, DataTable, ErrorPanel, Facts, Field, JsonView, Loading, LoadMore, PageHeader, QueryView, Section, Time } from '../components/ui';
import { useSession } from '../session';
import './evidence.css';

type EvidenceQuery = NonNullable<Paths['/evidence']['get']['parameters']['query']>;
type ChainReport = Paths['/evidence/verify']['get']['responses'][200]['content']['application/json'];

/**
 * The event types the API writes today, offered as suggestions; the filter takes any type, so a
 * type added later can still be searched before this list learns it.
 */
const EVENT_TYPES = [
  'decision',
  'approval_request',
  'approval',
  'approval_cancelled',
  'execution',
  'containment',
  'mcp_trust_change',
  'policy_change',
  'binding_reapproval',
  'exception_decision',
  'finding_update',
  'discovery_run',
  'connector_enabled',
  'integration_status',
  'control_mapping',
  'ai_system_classification',
  'risk_ruleset_change',
];

/** What each `first_broken.reason` of GET /evidence/verify means, in words. */
const BROKEN_IN_WORDS: Record<string, string> = {
  hash_mismatch: 'its content was changed after it was written: its hash no longer matches what it holds.',
  prev_hash_mismatch: 'it does not link to the record before it: records were re-ordered or re-linked.',
  sequence_gap: 'the record before it is missing: the sequence numbers skip.',
  missing_records: 'the newest records are missing: the chain ends before the head the service recorded.',
  unknown_key: 'it is signed with a key this service does not hold, so it cannot be proven.',
  signature_invalid: 'its signature does not verify: it was forged or altered.',
};

const words = (v: string) => v.replaceAll('_', ' ');

export default function EvidencePage() {
  const { can } = useSession();
  if (!can('evidence:read'))
    return (
      <>
        <PageHeader title="Evidence" />
        <ErrorPanel
          title="You cannot see the evidence chain"
          error={new ApiFailure(403, 'forbidden', 'Reading and verifying the evidence chain needs the permission evidence:read; ask an administrator for a role that has it.', null, {
            required_permission: 'evidence:read',
          })}
        />
      </>
    );
  return (
    <Routes>
      <Route index element={<Chain />} />
      <Route path=":evidenceId" element={<RecordDetail />} />
    </Routes>
  );
}

function AgentName({ id }: { id: string }) {
  const agent = useAgent(id);
  return <Link to={`/agents/${id}`}>{agent.data?.name ?? id.slice(0, 8)}</Link>;
}

function filtersOf(params: URLSearchParams): EvidenceQuery {
  const f: EvidenceQuery = {};
  for (const k of ['event_type', 'action_request_id', 'agent_id', 'control_ref'] as const) {
    const v = params.get(k)?.trim();
    if (v) f[k] = v;
  }
  return f;
}

function Chain() {
  const [params, setParams] = useSearchParams();
  const filters = filtersOf(params);
  const filtered = Object.keys(filters).length > 0;
  const list = usePaged(['evidence', filters], (cursor) => must(api.GET('/evidence', { params: { query: { ...filters, limit: 50, ...(cursor ? { cursor } : {}) } } })));
  return (
    <>
      <PageHeader title="Evidence" description="The organisation’s append-only chain: every record hash-linked to the one before it and signed, newest first." />
      <div className="ev-layout">
        <div className="ev-main">
          <Verify />
          <EvidenceFilters filters={filters} onChange={(f) => setParams(new URLSearchParams(Object.entries(f).filter(([, v]) => v) as Array<[string, string]>))} />
          <QueryView
            query={{ ...list, data: list.rows }}
            isEmpty={(rows) => rows.length === 0}
            empty={filtered ? 'No record matches these filters.' : 'The chain is empty: decisions, approvals and containment write their records here.'}
          >
            {(rows) => (
              <>
                <DataTable
                  caption="Evidence records, newest first"
                  rows={rows}
                  rowKey={(r) => r.id}
                  columns={[
                    { header: 'Record', cell: (r) => <Link to={`/evidence/${r.id}`}>#{r.seq}</Link> },
                    { header: 'Recorded', cell: (r) => <Time value={r.created_at} /> },
                    { header: 'Event', cell: (r) => words(r.event_type) },
                    { header: 'Agent', cell: (r) => (r.agent_id ? <AgentName id={r.agent_id} /> : <span className="muted">—</span>) },
                    {
                      header: 'Action',
                      cell: (r) =>
                        r.action_request_id ? (
                          <Link to={`/actions/${r.action_request_id}`} title={r.action_request_id}>
                            <code>{r.action_request_id.slice(0, 8)}</code>
                          </Link>
                        ) : (
                          <span className="muted">—</span>
                        ),
                    },
                    { header: 'Hash', cell: (r) => <code title={r.hash}>{r.hash.slice(0, 16)}…</code> },
                  ]}
                />
                {list.isFetchNextPageError ? <ErrorPanel error={list.error} title="Could not load more" /> : null}
                <LoadMore list={list} />
              </>
            )}
          </QueryView>
        </div>
        <aside className="ev-side" aria-label="Signing">
          <Keys />
          <Checkpoint />
        </aside>
      </div>
    </>
  );
}

function EvidenceFilters({ filters, onChange }: { filters: EvidenceQuery; onChange: (f: EvidenceQuery) => void }) {
  const [draft, setDraft] = useState<EvidenceQuery>(filters);
  const [last, setLast] = useState(filters);
  // The address changed (back, a link, "Clear"): the fields follow it.
  if (JSON.stringify(last) !== JSON.stringify(filters)) {
    setLast(filters);
    setDraft(filters);
  }
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onChange(Object.fromEntries(Object.entries(draft).map(([k, v]) => [k, typeof v === 'string' ? v.trim() : v])));
  };
  const text = (key: 'event_type' | 'action_request_id' | 'agent_id' | 'control_ref', label: string, hint?: string, list?: string) => (
    <Field label={label} hint={hint}>
      {(id, describedBy) => (
        <input
          id={id}
          aria-describedby={describedBy}
          value={draft[key] ?? ''}
          onChange={(e) => setDraft({ ...draft, [key]: e.target.value })}
          list={list}
          spellCheck={false}
          autoComplete="off"
          maxLength={key === 'control_ref' ? 200 : 80}
          className={key.endsWith('_id') ? 'ev-id-input' : undefined}
        />
      )}
    </Field>
  );
  return (
    <form className="toolbar ev-filters" role="search" aria-label="Filter evidence" onSubmit={submit}>
      {text('event_type', 'Event type', undefined, 'ev-event-types')}
      <datalist id="ev-event-types">
        {EVENT_TYPES.map((t) => (
          <option key={t} value={t} />
        ))}
      </datalist>
      {text('action_request_id', 'Action ID')}
      {text('agent_id', 'Agent ID')}
      {text('control_ref', 'Control reference')}
      <div className="ev-filter-buttons">
        <button type="submit">Apply</button>
        <button type="button" onClick={() => onChange({})} disabled={Object.keys(filters).length === 0}>
          Clear filters
        </button>
      </div>
    </form>
  );
}

/** "Verify chain": the API recomputes every hash and signature; the answer is said in words. */
function Verify() {
  const verify = useMutation({
    mutationFn: async () => {
      const report = await must(api.GET('/evidence/verify'));
      // The head's hash, to quote beside a verified chain (the report names only its sequence number).
      const newest = report.valid && report.head_seq > 0 ? (await must(api.GET('/evidence', { params: { query: { limit: 1 } } }))).items[0] : undefined;
      return { report, head: newest && newest.seq === report.head_seq ? newest : undefined };
    },
  });
  return (
    <Section
      title="Chain integrity"
      actions={
        <button type="button" className="primary" onClick={() => verify.mutate()} disabled={verify.isPending}>
          {verify.isPending ? 'Verifying…' : 'Verify chain'}
        </button>
      }
    >
      <div aria-live="polite">
        {verify.isPending ? (
          <Loading label="Recomputing every hash and signature…" />
        ) : verify.isError ? (
          <ErrorPanel error={verify.error} title="The chain could not be verified" />
        ) : verify.isSuccess ? (
          <VerifyResult report={verify.data.report} head={verify.data.head} />
        ) : (
          <p className="muted">Recomputes every record’s hash, its link to the record before it and its signature, and names the first record that fails.</p>
        )}
      </div>
    </Section>
  );
}

function VerifyResult({ report, head }: { report: ChainReport; head?: { id: string; hash: string } }) {
  if (report.valid) {
    return (
      <div className="success ev-result" data-testid="verify-result">
        <p>
          <Badge tone="good">Verified</Badge>{' '}
          <strong>
            {report.records_checked === 0
              ? 'The chain is empty: there is nothing to verify yet.'
              : `All ${report.records_checked} ${report.records_checked === 1 ? 'record checks' : 'records check'} out: every hash, link and signature is intact.`}
          </strong>
        </p>
        {report.head_seq > 0 ? (
          <p>
            Head: {head ? <Link to={`/evidence/${head.id}`}>record #{report.head_seq}</Link> : `record #${report.head_seq}`}
            {head ? (
              <>
                , hash <code className="ev-hash">{head.hash}</code>
              </>
            ) : null}
          </p>
        ) : null}
      </div>
    );
  }
  const b = report.first_broken;
  return (
    <div className="error-panel ev-result" data-testid="verify-result">
      <p>
        <Badge tone="bad">Broken</Badge> <strong>The chain does not verify.</strong>
      </p>
      {b ? (
        <p>
          First broken record: {b.id ? <Link to={`/evidence/${b.id}`}>record #{b.seq}</Link> : `record #${b.seq}`}: {BROKEN_IN_WORDS[b.reason] ?? 'it failed verification.'}{' '}
          <span className="small muted">
            (<code>{b.reason}</code>)
          </span>
        </p>
      ) : null}
      <p className="small">
        {report.records_checked} {report.records_checked === 1 ? 'record' : 'records'} before it verified; the service’s head is record #{report.head_seq}.
      </p>
    </div>
  );
}

function Keys() {
  const keys = useQuery({ queryKey: ['evidence-keys'], queryFn: () => must(api.GET('/evidence/keys')), staleTime: 60_000 });
  return (
    <Section title="Signing keys">
      <QueryView query={keys} isEmpty={(k) => k.items.length === 0} empty="No signing key.">
        {(k) => (
          <ul className="plain ev-keys">
            {k.items.map((key) => (
              <li key={key.kid}>
                <code className="ev-hash">{key.kid}</code> {key.current ? <Badge tone="good">signs new records</Badge> : <Badge>earlier key</Badge>}
                <div className="small muted">{key.algorithm}, public key (SPKI, base64url):</div>
                <code className="ev-hash small">{key.public_key}</code>
              </li>
            ))}
          </ul>
        )}
      </QueryView>
    </Section>
  );
}

function Checkpoint() {
  const checkpoint = useQuery({
    queryKey: ['evidence-checkpoint'],
    // 404 means no checkpoint was signed yet: a state of its own, not an error.
    queryFn: async () => {
      try {
        return await must(api.GET('/evidence/checkpoints/latest'));
      } catch (err) {
        if (err instanceof ApiFailure && err.status === 404) return null;
        throw err;
      }
    },
  });
  return (
    <Section title="Latest checkpoint">
      <QueryView query={checkpoint} isEmpty={(c) => c === null} empty="No checkpoint has been signed yet.">
        {(c) => (
          <>
            <Facts
              items={[
                ['Head record', `#${c!.seq}`],
                ['Signed', <Time value={c!.created_at} />],
                ['Key', <code className="ev-hash">{c!.kid}</code>],
              ]}
            />
            <h3>Head hash</h3>
            <code className="ev-hash small">{c!.hash}</code>
            <h3>Signature</h3>
            <code className="ev-hash small">{c!.signature}</code>
            <p className="small muted">Store a checkpoint outside Tollgate; `tollgate evidence verify` proves later that the chain still holds it.</p>
          </>
        )}
      </QueryView>
    </Section>
  );
}

function RecordDetail() {
  const { evidenceId } = useParams();
  const record = useQuery({
    queryKey: ['evidence-record', evidenceId],
    queryFn: () => must(api.GET('/evidence/{evidence_id}', { params: { path: { evidence_id: evidenceId! } } })),
  });
  return (
    <QueryView query={record}>
      {(r) => (
        <>
          <PageHeader
            title={`Evidence record #${r.seq}`}
            description={
              <>
                <Link to="/evidence">Evidence</Link> · {words(r.event_type)}
              </>
            }
          />
          <Section title="Record">
            <Facts
              items={[
                ['Sequence', `#${r.seq}`],
                ['Event', words(r.event_type)],
                ['Recorded', <Time value={r.created_at} />],
                ['Agent', r.agent_id ? <AgentName id={r.agent_id} /> : null],
                [
                  'Action',
                  r.action_request_id ? (
                    <Link to={`/actions/${r.action_request_id}`}>
                      <code>{r.action_request_id}</code>
                    </Link>
                  ) : null,
                ],
                ['Control reference', r.control_ref],
                ['Correlation ID', <code>{r.correlation_id}</code>],
                ['Signing key', <code className="ev-hash">{r.kid}</code>],
              ]}
            />
          </Section>
          <Section title="Integrity">
            <dl className="ev-integrity">
              <dt>Hash (SHA-256 of the record’s canonical JSON)</dt>
              <dd>
                <code className="ev-hash">{r.hash}</code>
              </dd>
              <dt>Previous record’s hash</dt>
              <dd>
                <code className="ev-hash">{r.prev_hash}</code>
                {/^0+$/.test(r.prev_hash) ? <span className="small muted"> (the first record: nothing before it)</span> : null}
              </dd>
              <dt>Signature (Ed25519, base64url)</dt>
              <dd>
                <code className="ev-hash">{r.signature}</code>
              </dd>
            </dl>
          </Section>
          <Section title="Payload">
            <JsonView value={r.payload} label="Payload as JSON" />
          </Section>
        </>
      )}
    </QueryView>
  );
}
