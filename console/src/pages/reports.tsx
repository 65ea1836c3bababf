import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { api, must, type Paths } from '../api/client';
import { usePaged } from '../api/hooks';
import { Badge, DataTable, ErrorPanel, Field, LoadMore, PageHeader, QueryView, Section, Time, type Tone } from '../components/ui';
import { useSession } from '../session';
import './reports.css';

type KindInfo = Paths['/reports/kinds']['get']['responses'][200]['content']['application/json']['items'][number];
type Report = Paths['/reports']['get']['responses'][200]['content']['application/json']['items'][number];
type CreateBody = Paths['/reports']['post']['requestBody']['content']['application/json'];

/** A parameter of a kind, as its JSON Schema (GET /reports/kinds) describes it. */
interface ParamSchema {
  type?: string;
  enum?: unknown[];
  default?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
  format?: string;
}

const STATUS_TONE: Record<Report['status'], Tone> = { queued: 'neutral', running: 'info', ready: 'good', failed: 'bad' };

/** How often the list asks again while a report is being built: it turns ready on the page by itself. */
const BUILDING_MS = 2_000;

const words = (s: string) => s.replaceAll('_', ' ');
const capital = (s: string) => s[0]!.toUpperCase() + words(s.slice(1));

function size(bytes: number | null): string {
  if (bytes === null) return '';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export default function ReportsPage() {
  const { can } = useSession();
  const kinds = useQuery({ queryKey: ['reports', 'kinds'], queryFn: () => must(api.GET('/reports/kinds')), staleTime: 300_000 });
  const titles = new Map(kinds.data?.items.map((k) => [k.kind, k.title]));
  return (
    <>
      <PageHeader title="Reports" description="Reports for leadership and auditors, built in the background as PDF, CSV or an evidence archive." />
      {can('report:create') ? (
        <QueryView query={kinds} isEmpty={(d) => d.items.length === 0} empty="No kind of report is available.">
          {(d) => <CreateReport kinds={d.items} />}
        </QueryView>
      ) : null}
      <ReportList titles={titles} />
      <Section title="Kinds of report">
        <QueryView query={kinds} isEmpty={(d) => d.items.length === 0} empty="No kind of report is available.">
          {(d) => (
            <div className="kinds">
              {d.items.map((k) => (
                <KindCard key={k.kind} kind={k} />
              ))}
            </div>
          )}
        </QueryView>
      </Section>
    </>
  );
}

function KindCard({ kind: k }: { kind: KindInfo }) {
  const params = Object.entries((k.parameters.properties ?? {}) as Record<string, ParamSchema>).filter(([name]) => name !== 'format');
  return (
    <article className="kind" aria-label={k.title}>
      <h3>{k.title}</h3>
      <p>{k.description}</p>
      <p className="small">
        Formats:{' '}
        {k.formats.map((f) => (
          <Badge key={f}>{f.toUpperCase()}</Badge>
        ))}
      </p>
      <details>
        <summary>What it holds</summary>
        <ul>
          {k.contents.map((c) => (
            <li key={c}>{c}</li>
          ))}
        </ul>
        {params.length > 0 ? (
          <>
            <p className="small">Parameters:</p>
            <ul className="small">
              {params.map(([name, s]) => (
                <li key={name}>
                  <code>{name}</code>: {s.description ?? ''}
                </li>
              ))}
            </ul>
          </>
        ) : null}
      </details>
    </article>
  );
}

/** A datetime-local value (the person's own clock) as a date-time with its offset, as the API takes it. */
function localToIso(value: string): string {
  return new Date(value).toISOString();
}

function CreateReport({ kinds }: { kinds: KindInfo[] }) {
  const queryClient = useQueryClient();
  const [kind, setKind] = useState<KindInfo['kind']>(kinds[0]!.kind);
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const chosen = kinds.find((k) => k.kind === kind) ?? kinds[0]!;
  const props = Object.entries((chosen.parameters.properties ?? {}) as Record<string, ParamSchema>);
  const create = useMutation({
    mutationFn: (body: CreateBody) => must(api.POST('/reports', { body })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['reports', 'list'] }),
  });

  const submit = (e: FormEvent) => {
    e.preventDefault();
    // Only what the person set is sent: the API fills in every default and stores the parameters as built.
    const parameters: Record<string, unknown> = {};
    for (const [name, s] of props) {
      const v = values[name];
      if (v === undefined || v === '') continue;
      if (s.type === 'integer' || s.type === 'number') parameters[name] = Number(v);
      else if (s.type === 'boolean') parameters[name] = v === true;
      else if (s.format === 'date-time') parameters[name] = localToIso(String(v));
      else parameters[name] = v;
    }
    create.mutate({ kind: chosen.kind, parameters } as CreateBody);
  };

  return (
    <Section title="Create report">
      <form onSubmit={submit} className="report-form">
        <Field label="Kind" hint={chosen.description}>
          {(id, hint) => (
            <select
              id={id}
              aria-describedby={hint}
              value={kind}
              onChange={(e) => {
                setKind(e.target.value as KindInfo['kind']);
                setValues({});
                create.reset();
              }}
            >
              {kinds.map((k) => (
                <option key={k.kind} value={k.kind}>
                  {k.title}
                </option>
              ))}
            </select>
          )}
        </Field>
        {props.map(([name, s]) => (
          <ParamField key={`${chosen.kind}.${name}`} name={name} schema={s} value={values[name]} onChange={(v) => setValues((x) => ({ ...x, [name]: v }))} />
        ))}
        {create.isError ? <ErrorPanel error={create.error} title="The report was not created" /> : null}
        {create.isSuccess ? (
          <p className="success" role="status">
            {chosen.title} is queued; it appears below and turns ready when it is built.
          </p>
        ) : null}
        <div className="actions">
          <button type="submit" className="primary" disabled={create.isPending}>
            {create.isPending ? 'Creating…' : 'Create report'}
          </button>
        </div>
      </form>
    </Section>
  );
}

/** One parameter's control, from its JSON Schema: a choice, a number, a yes/no, or a date and time. */
function ParamField({ name, schema: s, value, onChange }: { name: string; schema: ParamSchema; value: string | boolean | undefined; onChange: (v: string | boolean) => void }) {
  const label = name === 'format' ? 'Format' : capital(name);
  if (s.type === 'boolean') {
    const checked = value === undefined ? s.default === true : value === true;
    return (
      <div className="field field-check">
        <label>
          <input type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} /> {label}
        </label>
        {s.description ? <p className="small muted">{s.description}</p> : null}
      </div>
    );
  }
  return (
    <Field label={label} hint={s.description}>
      {(id, hint) => {
        if (Array.isArray(s.enum)) {
          const current = value === undefined ? (s.default === undefined ? '' : String(s.default)) : String(value);
          return (
            <select id={id} aria-describedby={hint} value={current} onChange={(e) => onChange(e.target.value)}>
              {s.default === undefined ? <option value="">Any</option> : null}
              {s.enum.map((o) => (
                <option key={String(o)} value={String(o)}>
                  {name === 'format' ? String(o).toUpperCase() : String(o)}
                </option>
              ))}
            </select>
          );
        }
        if (s.type === 'integer' || s.type === 'number')
          return (
            <input
              id={id}
              aria-describedby={hint}
              type="number"
              inputMode="numeric"
              step={s.type === 'integer' ? 1 : 'any'}
              min={s.minimum}
              max={s.maximum}
              placeholder={s.default === undefined ? undefined : String(s.default)}
              value={typeof value === 'string' ? value : ''}
              onChange={(e) => onChange(e.target.value)}
            />
          );
        if (s.format === 'date-time')
          return <input id={id} aria-describedby={hint} type="datetime-local" value={typeof value === 'string' ? value : ''} onChange={(e) => onChange(e.target.value)} />;
        return <input id={id} aria-describedby={hint} value={typeof value === 'string' ? value : ''} onChange={(e) => onChange(e.target.value)} />;
      }}
    </Field>
  );
}

/** The parameters a report was built with, in a line. */
function describe(parameters: Record<string, unknown>): string {
  return Object.entries(parameters)
    .filter(([k]) => k !== 'format')
    .map(([k, v]) => `${words(k)} ${typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v) ? new Date(v).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : String(v)}`)
    .join(', ');
}

function ReportList({ titles }: { titles: Map<string, string> }) {
  // Live only while something is being built: a quiet list does not keep asking.
  const [building, setBuilding] = useState(false);
  const list = usePaged(['reports', 'list'], (cursor) => must(api.GET('/reports', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } })), {
    refetchInterval: building ? BUILDING_MS : false,
  });
  const unfinished = list.rows.some((r) => r.status === 'queued' || r.status === 'running');
  useEffect(() => setBuilding(unfinished), [unfinished]);
  return (
    <Section title="Your organisation’s reports">
      <QueryView query={{ ...list, data: list.rows }} isEmpty={(rows) => rows.length === 0} empty="No report yet. Create one above; it is built in the background.">
        {(rows) => (
          <>
            <DataTable
              caption="Reports, newest first"
              rows={rows}
              rowKey={(r) => r.id}
              columns={[
                { header: 'Asked for', cell: (r) => <Time value={r.created_at} /> },
                { header: 'Report', cell: (r) => titles.get(r.kind) ?? words(r.kind) },
                { header: 'Format', cell: (r) => r.format.toUpperCase() },
                { header: 'Parameters', cell: (r) => describe(r.parameters) || <span className="muted">defaults</span> },
                { header: 'Status', cell: (r) => <Badge tone={STATUS_TONE[r.status]}>{r.status}</Badge> },
                { header: 'File', cell: (r) => (r.status === 'ready' ? <Download report={r} /> : r.status === 'failed' ? <span className="report-error">{r.error}</span> : <span className="muted">being built…</span>) },
                { header: 'Completed', cell: (r) => <Time value={r.completed_at} /> },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </Section>
  );
}

/**
 * A plain link to the download: same origin, so the session cookie goes with it, and the API's
 * Content-Disposition makes the browser save the file under the report's own name.
 */
function Download({ report: r }: { report: Report }) {
  return (
    <span className="download">
      <a href={`/api/v1/reports/${encodeURIComponent(r.id)}/download`} download={r.file_name ?? true}>
        Download<span className="sr-only"> {r.file_name}</span>
      </a>{' '}
      <span className="small muted">
        {r.file_name} · {size(r.size)}
      </span>
    </span>
  );
}
