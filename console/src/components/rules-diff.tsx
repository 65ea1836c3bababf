import type { ReactNode } from 'react';
import type { Paths } from '../api/client';
import { Badge } from './ui';

type Policy = Paths['/policies/{policy_id}']['get']['responses'][200]['content']['application/json'];
export type Rule = NonNullable<Policy['versions']>[number]['rules'][number];
type Condition = Rule['conditions'][number];

/** JSON with object keys sorted, so two values that mean the same compare equal whatever their key order. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** A condition as a person reads it: `tool.key eq "crm.export"`, `cel: action.amount > 100`. */
export function conditionText(c: Condition): string {
  if (c.op === 'cel') return `cel: ${typeof c.value === 'string' ? c.value : canonical(c.value)}`;
  if (c.op === 'exists' && (c.value === undefined || c.value === true)) return `${c.field ?? '?'} exists`;
  return `${c.field ?? '?'} ${c.op} ${c.value === undefined ? '' : canonical(c.value)}`.trim();
}

/** One field of a rule whose value differs between the two versions. */
export interface FieldChange {
  field: 'effect' | 'reason_code' | 'description' | 'approvals_required' | 'conditions';
  from: string[];
  to: string[];
}

export type RuleChange =
  | { kind: 'added'; id: string; rule: Rule }
  | { kind: 'removed'; id: string; rule: Rule }
  | { kind: 'changed'; id: string; from: Rule; to: Rule; fields: FieldChange[] }
  | { kind: 'unchanged'; id: string };

const approvals = (r: Rule) => (r.effect === 'require_approval' ? String(r.obligations?.approvals_required ?? 1) : '—');

/**
 * The difference between two versions' rules. Rules are matched by id (unique within a version), so a
 * rule that moved is not a change: neither the order of rules nor of a rule's conditions changes a
 * decision (every condition must hold). For a rule in both, each field that differs is named with its
 * two values; conditions are compared as sets of their text, listing only those removed and added.
 * The order: the "to" version's rules as written, then the rules it no longer has.
 */
export function diffRules(from: Rule[], to: Rule[]): RuleChange[] {
  const before = new Map(from.map((r) => [r.id, r]));
  const after = new Set(to.map((r) => r.id));
  const out: RuleChange[] = [];
  for (const rule of to) {
    const old = before.get(rule.id);
    if (!old) {
      out.push({ kind: 'added', id: rule.id, rule });
      continue;
    }
    const fields: FieldChange[] = [];
    const scalar = (field: FieldChange['field'], a: string, b: string) => {
      if (a !== b) fields.push({ field, from: [a], to: [b] });
    };
    scalar('effect', old.effect, rule.effect);
    scalar('reason_code', old.reason_code, rule.reason_code);
    scalar('description', old.description ?? '', rule.description ?? '');
    scalar('approvals_required', approvals(old), approvals(rule));
    const oldConditions = new Set(old.conditions.map(conditionText));
    const newConditions = new Set(rule.conditions.map(conditionText));
    const removed = [...oldConditions].filter((c) => !newConditions.has(c));
    const added = [...newConditions].filter((c) => !oldConditions.has(c));
    if (removed.length > 0 || added.length > 0) fields.push({ field: 'conditions', from: removed, to: added });
    out.push(fields.length > 0 ? { kind: 'changed', id: rule.id, from: old, to: rule, fields } : { kind: 'unchanged', id: rule.id });
  }
  for (const rule of from) if (!after.has(rule.id)) out.push({ kind: 'removed', id: rule.id, rule });
  return out;
}

const FIELD_NAMES: Record<FieldChange['field'], string> = {
  effect: 'Effect',
  reason_code: 'Reason code',
  description: 'Description',
  approvals_required: 'Approvals required',
  conditions: 'Conditions',
};

const KIND_TONE = { added: 'good', removed: 'bad', changed: 'warn' } as const;

/** A whole rule in one cell: what it does and when. */
function RuleSummary({ rule }: { rule: Rule }) {
  return (
    <div className="rule-summary">
      <div>
        <strong>{rule.effect.replaceAll('_', ' ')}</strong> with <code>{rule.reason_code}</code>
        {rule.effect === 'require_approval' ? ` (${approvals(rule)} approval${approvals(rule) === '1' ? '' : 's'})` : ''}
      </div>
      {rule.description ? <div className="muted">{rule.description}</div> : null}
      <Lines values={rule.conditions.map(conditionText)} empty="no conditions: always applies" />
    </div>
  );
}

function Lines({ values, empty, mark }: { values: string[]; empty: string; mark?: string }) {
  if (values.length === 0) return <span className="muted">{empty}</span>;
  return (
    <ul className="plain">
      {values.map((v) => (
        <li key={v}>
          {mark ? <span className="diff-mark">{mark} </span> : null}
          <code>{v}</code>
        </li>
      ))}
    </ul>
  );
}

/**
 * Two versions' rules side by side: one row per rule added or removed, one per changed field of a rule
 * in both (its old value on the left, its new one on the right); rules alike in both are only named.
 */
export function RulesDiff({ from, to, fromLabel, toLabel }: { from: Rule[]; to: Rule[]; fromLabel: string; toLabel: string }) {
  const changes = diffRules(from, to);
  const count = (k: RuleChange['kind']) => changes.filter((c) => c.kind === k).length;
  const shown = changes.filter((c): c is Exclude<RuleChange, { kind: 'unchanged' }> => c.kind !== 'unchanged');
  const unchanged = changes.filter((c) => c.kind === 'unchanged').map((c) => c.id);
  const summary = `${count('added')} added, ${count('removed')} removed, ${count('changed')} changed, ${unchanged.length} unchanged`;
  return (
    <div className="rules-diff">
      <p role="status" className="small">
        From {fromLabel} to {toLabel}: {summary}.
      </p>
      {shown.length === 0 ? (
        <p className="muted">The two versions have the same rules.</p>
      ) : (
        <div className="table-wrap">
          <table aria-label={`Rule changes from ${fromLabel} to ${toLabel}`}>
            <thead>
              <tr>
                <th scope="col">Rule</th>
                <th scope="col">Change</th>
                <th scope="col">Field</th>
                <th scope="col" className="diff-side">
                  {fromLabel}
                </th>
                <th scope="col" className="diff-side">
                  {toLabel}
                </th>
              </tr>
            </thead>
            {shown.map((c) => (
              <RuleRows key={`${c.kind}:${c.id}`} change={c} />
            ))}
          </table>
        </div>
      )}
      {unchanged.length > 0 ? (
        <p className="small muted">
          Unchanged:{' '}
          {unchanged.map((id, i) => (
            <span key={id}>
              {i > 0 ? ', ' : ''}
              <code>{id}</code>
            </span>
          ))}
        </p>
      ) : null}
    </div>
  );
}

function RuleRows({ change }: { change: Exclude<RuleChange, { kind: 'unchanged' }> }) {
  const head = (rows: number): ReactNode => (
    <>
      <th scope="rowgroup" rowSpan={rows}>
        <code>{change.id}</code>
      </th>
      <td rowSpan={rows}>
        <Badge tone={KIND_TONE[change.kind]}>{change.kind}</Badge>
      </td>
    </>
  );
  if (change.kind === 'added' || change.kind === 'removed') {
    const cell = <RuleSummary rule={change.rule} />;
    const none = <span className="muted">not in this version</span>;
    return (
      <tbody className={`diff-${change.kind}`}>
        <tr>
          {head(1)}
          <td className="muted">whole rule</td>
          <td className={change.kind === 'removed' ? 'diff-old' : undefined}>{change.kind === 'removed' ? cell : none}</td>
          <td className={change.kind === 'added' ? 'diff-new' : undefined}>{change.kind === 'added' ? cell : none}</td>
        </tr>
      </tbody>
    );
  }
  return (
    <tbody className="diff-changed">
      {change.fields.map((f, i) => (
        <tr key={f.field}>
          {i === 0 ? head(change.fields.length) : null}
          <td>{FIELD_NAMES[f.field]}</td>
          <td className="diff-old">
            {f.field === 'conditions' ? <Lines values={f.from} empty="none removed" mark="removed" /> : <code>{f.from[0] || '(none)'}</code>}
          </td>
          <td className="diff-new">
            {f.field === 'conditions' ? <Lines values={f.to} empty="none added" mark="added" /> : <code>{f.to[0] || '(none)'}</code>}
          </td>
        </tr>
      ))}
    </tbody>
  );
}
