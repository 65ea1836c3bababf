import { randomBytes } from 'node:crypto';
import { findSecrets } from '../../shared/index.js';
import type { DecisionState } from '../snapshot.js';

/**
 * Simulated executors of the built-in sample tools (docs/gateway.md). Real tools are run by the
 * caller's proxy after an allow; Tollgate runs only these, with the tool's scoped credential.
 */
type Executor = (parameters: Record<string, unknown>) => Record<string, unknown>;

const ref = (prefix: string) => `${prefix}-${randomBytes(6).toString('hex').toUpperCase()}`;

const SAMPLE_EXECUTORS: Record<string, Executor> = {
  'payments.create_payment': (p) => ({
    payment_reference: ref('PAY'),
    status: 'submitted',
    amount: p.amount ?? null,
    currency: p.currency ?? null,
    payee: p.payee ?? null,
  }),
  'crm.lookup_customer': (p) => ({
    customer_id: String(p.customer_id ?? ''),
    name: `Customer ${String(p.customer_id ?? '')}`,
    email: `customer-${String(p.customer_id ?? 'x')}@example.com`,
    tier: 'gold',
  }),
  'email.send_message': () => ({ message_id: ref('MSG'), status: 'queued' }),
  'storage.delete_object': (p) => ({ deleted: String(p.path ?? ''), status: 'deleted' }),
};

/** What running an allowed action gave. */
export interface Execution {
  status: 'succeeded' | 'failed' | 'not_run';
  output: unknown;
}

/**
 * Runs an allowed action: the built-in sample tools through their simulated executors with the
 * tool's credential reference (which must not be revoked); other tools are authorised for the
 * caller's proxy to run (state `approved`).
 */
export function execute(toolKey: string, tool: DecisionState['tool'], parameters: Record<string, unknown>): Execution {
  const executor = SAMPLE_EXECUTORS[toolKey];
  if (!tool?.builtin || !executor) return { status: 'not_run', output: null };
  if (tool.credentialActive === false) return { status: 'failed', output: { error: 'credential_unavailable' } };
  return { status: 'succeeded', output: executor(parameters) };
}

const EMAIL = /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;

/**
 * What leaves Tollgate or is stored of parameters and output: under redacted_excerpts, secrets and email
 * addresses masked; under metadata_only, nothing at all.
 */
export function redact(value: unknown, retention: string): unknown {
  if (retention === 'metadata_only') return value === undefined || value === null ? null : { redacted: 'metadata_only' };
  const secretPaths = new Set(findSecrets(value).map((f) => f.path));
  const walk = (v: unknown, path: string): unknown => {
    if (secretPaths.has(path)) return '[redacted:secret]';
    if (typeof v === 'string') return v.replace(EMAIL, '[redacted:email]');
    if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}[${i}]`));
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(
        Object.entries(v).map(([k, x]) => [k, walk(x, /^[A-Za-z_$][\w$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`)]),
      );
    }
    return v;
  };
  return walk(value, '$');
}
