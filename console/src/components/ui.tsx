import { useId, type ReactNode } from 'react';
import { Link } from 'react-router';
import { ApiFailure } from '../api/client';
import { asFailure, fieldErrors, inWords } from '../api/errors';

export function PageHeader({ title, description, actions }: { title: string; description?: ReactNode; actions?: ReactNode }) {
  return (
    <header className="page-header">
      <div>
        <h1>{title}</h1>
        {description ? <p className="muted">{description}</p> : null}
      </div>
      {actions ? <div className="actions">{actions}</div> : null}
    </header>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="loading" role="status" aria-live="polite">
      {label}
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

/** An API error: the code in words, the API's message, its field errors and the correlation ID. */
export function ErrorPanel({ error, title = 'That did not work' }: { error: unknown; title?: string }) {
  const f: ApiFailure = asFailure(error);
  const words = inWords(f.code);
  const fields = fieldErrors(f);
  const permission = f.code === 'forbidden' ? (f.details as { required_permission?: string } | undefined)?.required_permission : undefined;
  return (
    <div className="error-panel" role="alert">
      <strong>{title}</strong>
      {words ? <p>{words}</p> : null}
      <p>{f.message}</p>
      {permission ? (
        <p>
          Needs the permission <code>{permission}</code>.
        </p>
      ) : null}
      {fields.length > 0 ? (
        <ul>
          {fields.map((d) => (
            <li key={d.field + d.message}>
              <code>{d.field}</code>: {d.message}
            </li>
          ))}
        </ul>
      ) : null}
      <p className="small muted">
        <span>Error code </span>
        <code>{f.code}</code>
        {f.correlationId ? (
          <>
            <span> · correlation ID </span>
            <code data-testid="correlation-id">{f.correlationId}</code>
          </>
        ) : null}
      </p>
    </div>
  );
}

/** The three states of a query: loading, failed, and its data (or the empty state when `isEmpty`). */
export function QueryView<T>({
  query,
  empty,
  isEmpty,
  children,
}: {
  query: { isPending: boolean; isError: boolean; error: unknown; data: T | undefined };
  empty?: ReactNode;
  isEmpty?: (data: T) => boolean;
  children: (data: T) => ReactNode;
}) {
  if (query.isPending) return <Loading />;
  if (query.isError) return <ErrorPanel error={query.error} title="Could not load this" />;
  const data = query.data as T;
  if (isEmpty?.(data)) return <Empty>{empty ?? 'Nothing here yet.'}</Empty>;
  return <>{children(data)}</>;
}

export type Tone = 'good' | 'bad' | 'warn' | 'info' | 'neutral';

export function Badge({ tone = 'neutral', children }: { tone?: Tone; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

const DECISION_TONE: Record<string, Tone> = {
  allow: 'good',
  approved: 'good',
  active: 'good',
  executed: 'good',
  deny: 'bad',
  denied: 'bad',
  rejected: 'bad',
  revoked: 'bad',
  suspended: 'bad',
  failed: 'bad',
  require_approval: 'warn',
  pending: 'warn',
  pending_approval: 'warn',
  expired: 'neutral',
  cancelled: 'neutral',
};

/** A state or decision as a coloured word; the colour is never the only signal (the word is there). */
export function StateBadge({ value }: { value: string | null | undefined }) {
  if (!value) return <span className="muted">—</span>;
  return <Badge tone={DECISION_TONE[value] ?? 'neutral'}>{value.replaceAll('_', ' ')}</Badge>;
}

/** A time: local, readable, with the exact UTC value on hover and in the markup. */
export function Time({ value }: { value: string | null | undefined }) {
  if (!value) return <span className="muted">—</span>;
  const d = new Date(value);
  return (
    <time dateTime={value} title={d.toISOString()}>
      {d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}
    </time>
  );
}

export function Field({ label, hint, children }: { label: string; hint?: string; children: (id: string, describedBy?: string) => ReactNode }) {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children(id, hintId)}
      {hint ? (
        <p id={hintId} className="small muted">
          {hint}
        </p>
      ) : null}
    </div>
  );
}

export interface Column<T> {
  header: string;
  cell: (row: T) => ReactNode;
  className?: string;
}

export function DataTable<T>({ caption, columns, rows, rowKey }: { caption: string; columns: Array<Column<T>>; rows: T[]; rowKey: (row: T) => string }) {
  return (
    <div className="table-wrap">
      <table>
        <caption className="sr-only">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.header} scope="col" className={c.className}>
                {c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={rowKey(r)}>
              {columns.map((c) => (
                <td key={c.header} className={c.className}>
                  {c.cell(r)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * Which view of a list to show (a status, a kind): toggle buttons in a named group, the chosen one pressed.
 * Not tabs: they filter one list in place rather than switch between panels.
 */
export function ChoiceButtons<T extends string | undefined>({
  label,
  options,
  current,
  onPick,
}: {
  label: string;
  options: Array<{ value: T; label: string }>;
  current: T;
  onPick: (value: T) => void;
}) {
  return (
    <div className="tabs" role="group" aria-label={label}>
      {options.map((o) => (
        <button key={o.value ?? ''} type="button" aria-pressed={o.value === current} onClick={() => onPick(o.value)}>
          {o.label}
        </button>
      ))}
    </div>
  );
}

/** "Load more" under a list of usePaged: the next page, its loading, and its failure shown where it happened. */
export function LoadMore({
  list,
  label = 'Load more',
}: {
  list: { hasNextPage: boolean; isFetchingNextPage: boolean; fetchNextPage: () => unknown; isFetchNextPageError?: boolean; error: unknown };
  label?: string;
}) {
  return (
    <>
      {list.isFetchNextPageError ? <ErrorPanel error={list.error} title="Could not load more" /> : null}
      {list.hasNextPage ? (
        <button type="button" className="load-more" onClick={() => list.fetchNextPage()} disabled={list.isFetchingNextPage}>
          {list.isFetchingNextPage ? 'Loading…' : label}
        </button>
      ) : null}
    </>
  );
}

export function JsonView({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre className="json" aria-label={label} tabIndex={0}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

export function IdLink({ to, id }: { to: string; id: string }) {
  return (
    <Link to={to} title={id}>
      <code>{id.slice(0, 8)}</code>
    </Link>
  );
}

export function Section({ title, children, actions }: { title: string; children: ReactNode; actions?: ReactNode }) {
  const id = useId();
  return (
    <section className="card" aria-labelledby={id}>
      <div className="card-head">
        <h2 id={id}>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

/** A definition list of label/value pairs. */
export function Facts({ items }: { items: Array<[string, ReactNode]> }) {
  return (
    <dl className="facts">
      {items.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v ?? <span className="muted">—</span>}</dd>
        </div>
      ))}
    </dl>
  );
}
