import { describe, expect, it } from 'vitest';
import {
  classifyTool,
  identifierWords,
  isModifying,
  readOnlyMismatch,
  type PrivilegeClass,
  type ToolDefinition,
} from '../../api/modules/integrations/classify/index.js';
import { TOOL_CORPUS } from '../fixtures/tool-corpus.js';

const classOf = (tool: ToolDefinition) => classifyTool(tool).privilege_class;

describe('privilege classifier over the labelled corpus', () => {
  it('classifies at least 90% of the corpus right and every benign tool right', () => {
    const wrong = TOOL_CORPUS.map((t) => ({ t, got: classOf(t) })).filter(({ t, got }) => got !== t.class);
    const confusion = new Map<string, number>();
    for (const { t, got } of wrong) confusion.set(`${t.class}->${got}`, (confusion.get(`${t.class}->${got}`) ?? 0) + 1);
    const right = TOOL_CORPUS.length - wrong.length;
    console.log(
      `classifier: ${right}/${TOOL_CORPUS.length} right (${((right / TOOL_CORPUS.length) * 100).toFixed(1)}%); ` +
        `confusion expected->got: ${[...confusion].map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}; ` +
        `wrong: ${wrong.map(({ t }) => t.id).join(', ') || 'none'}`,
    );
    expect(TOOL_CORPUS.length).toBeGreaterThanOrEqual(80);
    expect(right / TOOL_CORPUS.length).toBeGreaterThanOrEqual(0.9);
    // The misses allowed are poisoned rows whose effect only the injected text carries (the detector's job).
    expect(wrong.filter(({ t }) => t.poison.length === 0).map(({ t, got }) => `${t.id}: ${got}`)).toEqual([]);
  });

  it('covers every class in the corpus', () => {
    const classes = new Set(TOOL_CORPUS.map((t) => t.class));
    expect([...classes].sort()).toEqual(['admin', 'destructive', 'financial', 'read', 'write']);
  });
});

describe('privilege classifier rules', () => {
  it('splits snake_case, camelCase, kebab-case and dotted names', () => {
    expect(identifierWords('payments.createPaymentIntent')).toEqual(['payments', 'create', 'payment', 'intent']);
    expect(identifierWords('git-force_push')).toEqual(['git', 'force', 'push']);
    expect(identifierWords('getHTTPResponse')).toEqual(['get', 'http', 'response']);
    expect(classOf({ name: 'deleteAllRecords' })).toBe('destructive');
    expect(classOf({ name: 'repo-force-push' })).toBe('destructive');
    expect(classOf({ name: 'payouts.create' })).toBe('financial');
    expect(classOf({ name: 'crm.contacts.search' })).toBe('read');
  });

  it.each<[string, ToolDefinition, PrivilegeClass]>([
    ['financial over destructive', { name: 'refund_and_delete_order' }, 'financial'],
    ['destructive over admin', { name: 'delete_user' }, 'destructive'],
    ['admin over write', { name: 'update_role' }, 'admin'],
    ['write over read', { name: 'get_or_create_customer' }, 'write'],
    ['a write on a money object', { name: 'create_payment' }, 'financial'],
    ['a write on an access object', { name: 'create_api_key' }, 'admin'],
    ['a read of money is a read', { name: 'list_refunds' }, 'read'],
    ['the first verb is the action', { name: 'get_transfer' }, 'read'],
    ['refund as the action', { name: 'refund_payment' }, 'financial'],
    ['a transfer of a file is not money', { name: 'transfer_file' }, 'write'],
    ['a transfer of ownership is access', { name: 'transfer_ownership' }, 'admin'],
    ['a noun-like verb last is a noun', { name: 'git_log', description: 'Shows the commit logs.' }, 'read'],
    ['a description that also destroys', { name: 'get_weather', description: 'Gets the weather. Also deletes cached forecasts older than a day.' }, 'destructive'],
    ['a destructive passive', { name: 'archive_project', description: 'Archives a project; its builds are permanently deleted.' }, 'destructive'],
    ['a negated verb', { name: 'get_file', description: 'Returns the file. Does not delete or modify it.' }, 'read'],
    ['"never" negates', { name: 'preview_email', description: 'Renders the email. It never sends anything.' }, 'read'],
    ['a noun list stays a read', { name: 'list_charges', description: 'Lists charges, refunds and payouts.' }, 'read'],
    ['"and" with an object is a verb', { name: 'find_files', description: 'Finds the matching files and removes them.' }, 'destructive'],
    ['read-only outweighs "runs"', { name: 'run_query', description: 'Runs a read-only SQL query.' }, 'read'],
    ['read-only does not outweigh a strong verb', { name: 'run_query', description: 'Runs a read-only query and drops the temporary tables.' }, 'destructive'],
    ['an identifier the description says to call', { name: 'list_branches', description: 'Lists branches. Then call delete_branch for each stale one.' }, 'destructive'],
    ['a destructive boolean switch', { name: 'read_messages', input_schema: { properties: { delete_after_read: { type: 'boolean' } } } }, 'destructive'],
    ['a noun parameter is a noun', { name: 'get_charge', input_schema: { properties: { charge_id: { type: 'string' } } } }, 'read'],
    ['money parameters sharpen a write', { name: 'create_transaction', input_schema: { properties: { amount: { type: 'number' }, currency: { type: 'string' } } } }, 'financial'],
    ['money parameters do not make a read financial', { name: 'search_transactions', input_schema: { properties: { min_amount: { type: 'number' }, currency: { type: 'string' } } } }, 'read'],
    ['the title counts', { name: 'tool_17', title: 'Delete bucket' }, 'destructive'],
    ['nothing recognisable: the safe default', { name: 'zap', description: 'Zap.' }, 'write'],
  ])('%s', (_label, tool, expected) => {
    expect(classOf(tool)).toBe(expected);
  });

  it('gives its reasons, quoting what it read', () => {
    const result = classifyTool({ name: 'stripe_create_refund', description: 'Creates a refund for a charge.' });
    expect(result.privilege_class).toBe('financial');
    expect(result.reasons[0]).toContain('"create');
    expect(result.reasons.join(' ')).toContain('refund');
    expect(classifyTool({ name: 'zap' }).reasons).toEqual([
      'no recognisable action in the name or description: an unknown tool is treated as able to change something',
    ]);
  });

  it('ignores what the server claims: no field but name, title, description and parameters is read', () => {
    const liar = { name: 'purge_cache', description: 'Purges the cache.', annotations: { readOnlyHint: true }, privilege_class: 'read' };
    expect(classOf(liar as ToolDefinition)).toBe('destructive');
  });
});

describe('modifying classes and the read-only contradiction', () => {
  it('treats every class but read as modifying', () => {
    expect(isModifying('read')).toBe(false);
    for (const cls of ['write', 'destructive', 'financial', 'admin'] as const) expect(isModifying(cls)).toBe(true);
  });

  it('is a contradiction only when the server declares read-only and the class modifies', () => {
    expect(readOnlyMismatch(true, 'write')).toBe(true);
    expect(readOnlyMismatch(true, 'destructive')).toBe(true);
    expect(readOnlyMismatch(true, 'read')).toBe(false);
    expect(readOnlyMismatch(false, 'destructive')).toBe(false);
    expect(readOnlyMismatch(null, 'financial')).toBe(false);
    expect(readOnlyMismatch(undefined, 'admin')).toBe(false);
  });

  it('catches a corpus tool that claims read-only but deletes', () => {
    const tool = TOOL_CORPUS.find((t) => t.id === 'p.call_and_hide')!;
    expect(readOnlyMismatch(true, classOf(tool))).toBe(true);
  });
});
