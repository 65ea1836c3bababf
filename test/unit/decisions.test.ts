import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { decide } from '../../api/modules/gateway/engine/decide.js';
import { compileRules } from '../../api/modules/gateway/engine/compile.js';
import type { DecisionInput, Rule, Snapshot } from '../../api/modules/gateway/engine/types.js';

/**
 * Decision cases as data: each file in test/fixtures/decisions holds an input and a snapshot (both
 * merged onto _base.json) and the expected decision. Adding a case is adding a file.
 */
const dir = path.join(import.meta.dirname, '../fixtures/decisions');
const base = JSON.parse(readFileSync(path.join(dir, '_base.json'), 'utf8')) as { input: DecisionInput; snapshot: Snapshot };

/** Objects merge key by key; arrays and `parameters` replace what they override. */
function merge<T>(a: T, b: unknown, key?: string): T {
  if (b === undefined) return a;
  if (key === 'parameters' || Array.isArray(b) || b === null || typeof b !== 'object' || a === null || typeof a !== 'object') return b as T;
  const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
  for (const [k, v] of Object.entries(b)) out[k] = k in out ? merge(out[k], v, k) : v;
  return out as T;
}

const cases = readdirSync(dir)
  .filter((f) => f.endsWith('.json') && !f.startsWith('_'))
  .map((file) => {
    const c = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    const snapshot = merge(base.snapshot, c.snapshot) as Snapshot & { rules: Rule[] };
    // Rules are stored as written; the engine runs them compiled, as the gateway does.
    return { file, ...c, input: merge(base.input, c.input), snapshot: { ...snapshot, rules: compileRules(snapshot.rules) } };
  });

describe('decision engine', () => {
  it('has at least 40 cases covering every reason code it can give', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    const seen = new Set(cases.flatMap((c) => c.expect.reason_codes as string[]));
    for (const code of [
      'PERMISSION_GRANTED',
      'PERMISSION_NOT_GRANTED',
      'SECRET_DETECTED',
      'UNKNOWN_TOOL',
      'PERMISSION_CONSTRAINT_EXCEEDED',
      'UNTRUSTED_MCP_PRIVILEGED_TOOL',
      'AGENT_SUSPENDED',
      'AGENT_REVOKED',
      'GATEWAY_ACCESS_DISABLED',
      'TOOL_BLOCKED',
      'TOOL_DEFINITION_CHANGED',
      'PRIVILEGE_CLASS_DENIED',
      'DELEGATION_MISSING',
      'TOOL_APPROVAL_REQUIRED',
      'APPROVAL_GRANTED',
    ]) {
      expect(seen, code).toContain(code);
    }
  });

  it.each(cases)('$file', ({ input, snapshot, expect: expected }) => {
    const result = decide(input, snapshot);
    expect({ decision: result.decision, reason_codes: result.reasonCodes, approvals_required: result.approvalsRequired }).toEqual(expected);
    expect(result.trace.length).toBeGreaterThan(0);
  });

  it('never puts a secret it found into the trace', () => {
    const secret = 'AKIAQWERTYUIOPASDFGH';
    const input = merge(base.input, { action: { parameters: { note: `use ${secret}` } } });
    const result = decide(input, base.snapshot);
    expect(result.reasonCodes).toContain('SECRET_DETECTED');
    expect(JSON.stringify(result.trace)).not.toContain(secret);
  });
});
