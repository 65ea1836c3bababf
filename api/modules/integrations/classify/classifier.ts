import type { PRIVILEGE_CLASS } from '../../shared/index.js';

/**
 * The privilege classifier (behaviour.md, "MCP discovery protocol"): Tollgate assigns each discovered
 * tool a class from its own reading of the tool's name, title, description and parameter names, never
 * from what the server claims (a server that lies about `readOnlyHint` is exactly what it must catch).
 *
 * It is a reading of English, not an understanding of it: word lists (below, as data) and a few rules
 * about where a word is a verb. What it does:
 * - Names (`delete_file`, `createPaymentIntent`, `payouts.create`, `git-push`) are split into words;
 *   the first known verb is the action (`list_refunds` lists, `refund_charge` refunds) and the other
 *   words are its objects, so a generic write on a money object is financial (`create_payment`) and
 *   on an access object is admin (`create_user`, `update_role`).
 * - In descriptions a word counts as a verb where English puts verbs: first in a sentence ("Deletes
 *   a file", "Use this to delete"), after a modal ("will delete"), after "to", after a conjunction when
 *   an object follows ("and deletes it"), as a gerund after a preposition ("by deleting"), and in the
 *   destructive passive ("is permanently deleted"). "Lists charges and refunds" stays a read.
 * - Negations within three words before a verb cancel it ("does not delete", "never sends",
 *   "without modifying"). Limits: it reads no further back than that, nor across sentences, so
 *   "not only reads but deletes" still counts the delete, and a denial phrased another way ("deletion
 *   is impossible") is not understood; both err on the side of the higher class.
 * - Weak write verbs (run, execute, invoke, trigger, call) are only "it runs something"; a description
 *   that states it is read-only ("read-only", "no side effects", "select only") turns those into a
 *   read. It never turns a strong verb (delete, send, create) into one.
 * - Identifiers the description tells the model to call ("call transfer_funds") are classified like
 *   names: using the tool entails their privilege.
 * - Parameters: a boolean switch named for a destructive, financial or access action
 *   (`delete_after_read`) brings that class; an amount with where it goes (currency, IBAN, payee)
 *   makes a write financial, a role or permission parameter makes it admin. Parameter descriptions and
 *   text hidden in invisible characters are not classified (the poisoning detector reads those).
 * - English only: a description in another language leaves the name to decide, or the safe default.
 *
 * Precedence when several classes are evidenced: financial > destructive > admin > write > read. The
 * class decides approval and policy, so the highest risk must win or a tool would be under-governed:
 * moving money is irreversible and leaves the organisation; destroying data is irreversible but
 * internal; changing who may do what is reversible but widens every later action; a write changes
 * state reversibly. `read` is given only when nothing else is evidenced and some read is; a tool
 * with no recognisable action at all is `write`, the safe default: an unknown tool is treated as
 * able to change something until someone with the authority says otherwise (PATCH /tools).
 */
export type PrivilegeClass = (typeof PRIVILEGE_CLASS)[number];

/** What the classifier reads of a tool: the parts of its definition a server publishes. */
export interface ToolDefinition {
  name: string;
  title?: string | null;
  description?: string | null;
  input_schema?: Record<string, unknown> | null;
}

export interface Classification {
  privilege_class: PrivilegeClass;
  /** Why, in words a reviewer can check against the definition (the evidence of the winning class). */
  reasons: string[];
}

// ---------------------------------------------------------------------------------------------------
// Word lists (data). Verbs are listed in their base form; the inflected forms are derived below.
// ---------------------------------------------------------------------------------------------------

/** Verbs that destroy data or resources. */
const DESTRUCTIVE_VERBS = [
  'delete', 'drop', 'purge', 'wipe', 'destroy', 'truncate', 'terminate', 'remove', 'erase', 'shred', 'nuke',
  'obliterate', 'kill', 'expunge', 'deprovision', 'decommission', 'uninstall', 'rm', 'del',
];

/** Verbs that move money. `transfer` is financial unless its object is not money (TRANSFER_NON_MONEY). */
const FINANCIAL_VERBS = [
  'pay', 'transfer', 'refund', 'charge', 'invoice', 'payout', 'wire', 'bill', 'purchase', 'buy', 'sell',
  'withdraw', 'deposit', 'disburse', 'remit', 'reimburse', 'trade',
];

/** Verbs that change who may do what. */
const ADMIN_VERBS = ['grant', 'revoke', 'impersonate', 'sudo', 'elevate', 'promote', 'demote'];

/** Verbs that change something without being one of the above. */
const WRITE_VERBS = [
  'create', 'update', 'send', 'post', 'write', 'upload', 'set', 'unset', 'modify', 'insert', 'add', 'edit', 'patch',
  'put', 'save', 'store', 'submit', 'publish', 'push', 'commit', 'merge', 'rebase', 'move', 'rename', 'copy',
  'duplicate', 'clone', 'fork', 'append', 'prepend', 'replace', 'overwrite', 'reply', 'forward', 'comment',
  'schedule', 'reschedule', 'book', 'reserve', 'cancel', 'assign', 'unassign', 'close', 'reopen', 'open', 'label',
  'tag', 'mark', 'flag', 'archive', 'unarchive', 'enable', 'disable', 'toggle', 'activate', 'deactivate', 'start',
  'stop', 'restart', 'reboot', 'shutdown', 'suspend', 'resume', 'pause', 'deploy', 'rollback', 'revert', 'restore',
  'reset', 'clear', 'flush', 'evict', 'invalidate', 'expire', 'apply', 'import', 'sync', 'synchronise', 'synchronize',
  'register', 'unregister', 'subscribe', 'unsubscribe', 'invite', 'share', 'unshare', 'star', 'unstar', 'follow',
  'unfollow', 'pin', 'unpin', 'mute', 'unmute', 'block', 'unblock', 'lock', 'unlock', 'upsert', 'mutate', 'change',
  'alter', 'configure', 'install', 'upgrade', 'downgrade', 'scale', 'resize', 'mount', 'unmount', 'attach',
  'detach', 'connect', 'disconnect', 'link', 'unlink', 'bind', 'provision', 'launch', 'spawn', 'allocate', 'build',
  'generate', 'record', 'track', 'log', 'notify', 'email', 'broadcast', 'approve', 'reject', 'decline', 'accept',
  'complete', 'finish', 'retry', 'rerun', 'dispatch', 'enqueue', 'emit', 'release', 'transition', 'escalate',
  'annotate', 'sign', 'vote', 'join', 'leave', 'enroll', 'click', 'type', 'fill', 'press', 'drag', 'upvote',
  'capture', 'authorize', 'finalize', 'finalise', 'rotate', 'migrate', 'stage', 'resolve', 'react',
];

/**
 * Write verbs that say only "it runs something": weak evidence, which a description's own statement
 * that it is read-only outweighs (READ_ONLY_PHRASES).
 */
const WEAK_WRITE_VERBS = ['run', 'execute', 'exec', 'eval', 'invoke', 'trigger', 'call'];

/** Verbs that only look, compute or return. */
const READ_VERBS = [
  'get', 'list', 'read', 'search', 'fetch', 'describe', 'query', 'find', 'lookup', 'show', 'view', 'display', 'count',
  'check', 'inspect', 'preview', 'download', 'export', 'browse', 'retrieve', 'return', 'summarize', 'summarise',
  'explain', 'validate', 'verify', 'lint', 'diff', 'compare', 'analyze', 'analyse', 'calculate', 'compute',
  'convert', 'parse', 'render', 'echo', 'translate', 'estimate', 'ping', 'monitor', 'tail', 'head', 'cat', 'ls',
  'grep', 'stat', 'whoami', 'scan', 'detect', 'classify', 'extract', 'recommend', 'suggest', 'navigate', 'visit',
  'screenshot', 'wait', 'sleep', 'peek', 'poll', 'measure', 'predict', 'forecast', 'select', 'filter', 'sort',
  'match', 'trace', 'evaluate', 'test', 'format', 'diagnose', 'audit', 'look', 'watch', 'hover', 'locate',
];

/** Objects that make a generic write financial (`create_payment`, "sends an invoice"). */
const FINANCIAL_NOUNS = [
  'payment', 'payout', 'invoice', 'charge', 'refund', 'transfer', 'money', 'fund', 'funds', 'wire', 'billing', 'bill',
  'payroll', 'salary', 'wallet', 'bank', 'iban', 'ledger', 'balance', 'paymentintent', 'remittance', 'disbursement',
];

/** Objects that make a generic write an access change (`create_user`, "updates the role"). */
const ADMIN_NOUNS = [
  'user', 'users', 'role', 'roles', 'permission', 'permissions', 'member', 'members', 'membership', 'collaborator',
  'collaborators', 'acl', 'iam', 'privilege', 'privileges', 'credential', 'credentials', 'apikey', 'password',
  'passwords', 'mfa', 'sso', 'owner', 'ownership', 'admin', 'administrator', 'superuser', 'sudoer', 'policy',
  'policies', 'access', 'principal', 'grant', 'token', 'tokens', 'secret', 'secrets', 'serviceaccount', 'sshkey',
  'publickey', 'accesstoken', 'accesskey', 'apitoken', 'deploykey', 'signingkey', 'privatekey',
];

/**
 * Verbs whose class depends on their object: transferring a file is not a payment, opening a file
 * or a page is a read, transferring ownership changes access. The first rule whose objects match wins.
 */
const OBJECT_RULES: Record<string, ReadonlyArray<readonly [readonly string[], PrivilegeClass, string]>> = {
  transfer: [
    [['ownership', 'owner'], 'admin', 'changes who owns it'],
    [
      [
        'file', 'files', 'data', 'dataset', 'repository', 'repo', 'domain', 'issue', 'ticket', 'call', 'conversation', 'chat',
        'project', 'document', 'channel', 'job', 'object', 'objects', 'bucket',
      ],
      'write',
      'moves something that is not money',
    ],
  ],
  open: [
    [['file', 'files', 'url', 'page', 'document', 'link', 'tab', 'folder', 'directory', 'browser', 'website'], 'read', 'opens to look'],
  ],
};

/**
 * Phrases (word sequences) with a class of their own. The words they match are consumed: "transfer
 * ownership" is admin, not a transfer of money; "look up" is a read.
 */
const PHRASES: ReadonlyArray<readonly [string, PrivilegeClass | 'read_only']> = [
  ['transfer ownership', 'admin'],
  ['transfer repository', 'admin'],
  ['create user', 'admin'],
  ['rotate credentials', 'admin'],
  ['rotate key', 'admin'],
  ['reset password', 'admin'],
  ['admin privileges', 'admin'],
  ['administrator privileges', 'admin'],
  ['root access', 'admin'],
  ['full access', 'admin'],
  ['on behalf of any user', 'admin'],
  ['on behalf of other users', 'admin'],
  ['domain wide delegation', 'admin'],
  ['assume role', 'admin'],
  ['force push', 'destructive'],
  ['hard reset', 'destructive'],
  ['factory reset', 'destructive'],
  ['empty trash', 'destructive'],
  ['empty the trash', 'destructive'],
  ['cannot be undone', 'destructive'],
  ['can not be undone', 'destructive'],
  ['cannot be recovered', 'destructive'],
  ['irreversible', 'destructive'],
  ['irreversibly', 'destructive'],
  ['data loss', 'destructive'],
  ['moves money', 'financial'],
  ['move money', 'financial'],
  ['moving money', 'financial'],
  ['send money', 'financial'],
  ['sends money', 'financial'],
  ['sends funds', 'financial'],
  ['send funds', 'financial'],
  ['place order', 'financial'],
  ['place an order', 'financial'],
  ['places an order', 'financial'],
  ['look up', 'read'],
  ['looks up', 'read'],
  ['read only', 'read_only'],
  ['readonly', 'read_only'],
  ['no side effects', 'read_only'],
  ['does not modify', 'read_only'],
  ['without modifying', 'read_only'],
  ['non destructive', 'read_only'],
  ['select only', 'read_only'],
  ['only reads', 'read_only'],
];

/** Words that cancel a verb when they come within NEGATION_WINDOW words before it. */
const NEGATORS = new Set(['not', 'never', 'no', 'without', 'nor', 'cannot', 'neither', 'none']);
const NEGATION_WINDOW = 3;

/** Words that may open a sentence before its verb ("Use this tool to delete", "It also sends"). */
const LEAD_INS = new Set([
  'this', 'tool', 'function', 'endpoint', 'operation', 'it', 'will', 'can', 'may', 'also', 'then', 'use', 'used', 'to',
  'you', 'lets', 'let', 'allows', 'allow', 'enables', 'enable', 'helps', 'help', 'the', 'agent', 'assistant', 'model',
  'we', 'i', 'please', 'first', 'server', 'service', 'api', 'mcp', 'and', 'or', 'just', 'me', 'us', 'an', 'a', 'always',
]);

/** Modal verbs: the next word is a verb. */
const MODALS = new Set(['will', 'can', 'may', 'must', 'should', 'would', 'could', 'shall', 'might']);

/** Conjunctions that can start a second verb in the same sentence ("finds the file and deletes it"). */
const CONJUNCTIONS = new Set(['and', 'or', 'then', 'also', 'but', '&']);

/** Words after which an -ing form is a verb ("by deleting", "before sending"). */
const GERUND_PREPOSITIONS = new Set(['by', 'after', 'before', 'while', 'when', 'for', 'via', 'through', 'upon', 'on']);

/** Forms of "be" (and "get") that make a past participle a passive verb ("is deleted", "gets purged"). */
const PASSIVE_AUXILIARIES = new Set(['is', 'are', 'be', 'been', 'being', 'get', 'gets', 'getting']);

/** Words that introduce an object of a verb, so a word after a conjunction or "to" that is followed by one is a verb. */
const DETERMINERS = new Set([
  'the', 'a', 'an', 'it', 'them', 'this', 'that', 'these', 'those', 'all', 'any', 'every', 'each', 'its', 'their',
  'his', 'her', 'your', 'my', 'our', 'one', 'some', 'multiple', 'several', 'many', 'new', 'existing', 'specified',
  'given', 'selected', 'matching', 'both', 'up', 'out', 'back', 'off', 'money', 'funds',
]);

/** Words that end a verb's object: what follows is where or how, not what. */
const PREPOSITIONS = new Set([
  'to', 'in', 'into', 'on', 'onto', 'for', 'from', 'with', 'by', 'at', 'of', 'via', 'using', 'under', 'over', 'within',
  'across', 'after', 'before', 'when', 'if', 'as', 'that', 'which', 'who', 'so', 'than', 'per', 'between',
]);

/**
 * Base forms that are also common nouns ("updates", "posts", "charges", "runs"). After a conjunction,
 * a comma or "to", they count as verbs only when an object follows ("and refunds the payment").
 */
const NOUN_LIKE = new Set([
  'update', 'post', 'charge', 'refund', 'transfer', 'run', 'set', 'log', 'record', 'tag', 'label', 'comment', 'reply',
  'invoice', 'bill', 'wire', 'schedule', 'book', 'list', 'search', 'query', 'change', 'edit', 'move', 'copy', 'import',
  'export', 'download', 'upload', 'release', 'commit', 'push', 'merge', 'deploy', 'build', 'alert', 'fork', 'clone',
  'share', 'pin', 'star', 'vote', 'check', 'count', 'view', 'show', 'display', 'preview', 'lock', 'block', 'flag',
  'mark', 'match', 'filter', 'sort', 'trace', 'track', 'ping', 'call', 'stage', 'patch', 'sign', 'email', 'payout',
  'transition', 'invite', 'format', 'test', 'watch', 'type', 'trade', 'purchase', 'deposit', 'head', 'tail',
  'cat', 'link', 'capture', 'scan', 'audit', 'forecast', 'select',
]);

// ---------------------------------------------------------------------------------------------------
// Vocabulary built from the lists.
// ---------------------------------------------------------------------------------------------------

type VerbClass = PrivilegeClass | 'weak_write';
type Form = 'base' | 'third' | 'past' | 'gerund';

interface VerbEntry {
  verb: string;
  cls: VerbClass;
}

const VOWELS = new Set(['a', 'e', 'i', 'o', 'u']);

/** The inflected forms of a regular English verb (a few spellings too many are harmless). */
function inflections(v: string): Array<[string, Form]> {
  const out: Array<[string, Form]> = [[v, 'base']];
  const last = v.at(-1) ?? '';
  const beforeLast = v.at(-2) ?? '';
  if (/(s|x|z|ch|sh|o)$/.test(v)) out.push([`${v}es`, 'third']);
  else if (last === 'y' && !VOWELS.has(beforeLast)) out.push([`${v.slice(0, -1)}ies`, 'third']);
  else out.push([`${v}s`, 'third']);
  if (last === 'e') {
    out.push([`${v}d`, 'past'], [`${v.slice(0, -1)}ing`, 'gerund']);
  } else if (last === 'y' && !VOWELS.has(beforeLast)) {
    out.push([`${v.slice(0, -1)}ied`, 'past'], [`${v}ing`, 'gerund']);
  } else {
    out.push([`${v}ed`, 'past'], [`${v}ing`, 'gerund']);
    // drop -> dropped, stop -> stopping
    if (!VOWELS.has(last) && !'wxy'.includes(last) && VOWELS.has(beforeLast) && !VOWELS.has(v.at(-3) ?? 'a')) {
      out.push([`${v}${last}ed`, 'past'], [`${v}${last}ing`, 'gerund']);
    }
  }
  return out;
}

const IRREGULAR_PAST: Record<string, string[]> = {
  pay: ['paid'],
  send: ['sent'],
  sell: ['sold'],
  buy: ['bought'],
  run: ['ran'],
  write: ['written', 'wrote'],
};

/** Every known verb form: the verb it comes from, its class and which form it is. */
const VERB_FORMS = ((): Map<string, { entry: VerbEntry; forms: Set<Form> }> => {
  const map = new Map<string, { entry: VerbEntry; forms: Set<Form> }>();
  const lists: Array<[string[], VerbClass]> = [
    [READ_VERBS, 'read'],
    [WEAK_WRITE_VERBS, 'weak_write'],
    [WRITE_VERBS, 'write'],
    [ADMIN_VERBS, 'admin'],
    [DESTRUCTIVE_VERBS, 'destructive'],
    [FINANCIAL_VERBS, 'financial'],
  ];
  for (const [verbs, cls] of lists) {
    for (const verb of verbs) {
      const forms = inflections(verb);
      for (const past of IRREGULAR_PAST[verb] ?? []) forms.push([past, 'past']);
      for (const [form, kind] of forms) {
        // A spelling two verbs share keeps the first verb and gains the form.
        const slot = map.get(form) ?? { entry: { verb, cls }, forms: new Set<Form>() };
        slot.forms.add(kind);
        map.set(form, slot);
      }
    }
  }
  return map;
})();

const FINANCIAL_NOUN_SET = new Set(FINANCIAL_NOUNS.flatMap((n) => [n, `${n}s`]));
const ADMIN_NOUN_SET = new Set(ADMIN_NOUNS);
const PHRASE_TOKENS = PHRASES.map(([text, cls]) => [text.split(' '), cls] as const);

// ---------------------------------------------------------------------------------------------------
// Tokens.
// ---------------------------------------------------------------------------------------------------

/** A word, or a boundary: `hard` ends a sentence, `soft` a clause (comma). */
type Token = { word: string } | { boundary: 'hard' | 'soft' };

/** The words of an identifier: snake_case, camelCase, kebab-case, dotted and slashed prefixes. */
export function identifierWords(name: string): string[] {
  return name
    .split(/[^A-Za-z0-9]+/)
    .flatMap((part) => part.match(/[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+/g) ?? [])
    .map((w) => w.toLowerCase());
}

/** Words and boundaries of a description. Identifiers (`delete_file`) stay one word so they are not read as verbs. */
function proseTokens(text: string): Token[] {
  const normal = text
    .replace(/<[^<>\s]{1,60}>/g, ' ') // placeholders (<owner>/<repo>) are not objects
    .replace(/[\u2018\u2019\u02BC]/g, "'")
    .replace(/(\w)n't\b/gi, '$1 not')
    .replace(/'s\b/g, '');
  const tokens: Token[] = [];
  const re = /[A-Za-z0-9]+(?:[_][A-Za-z0-9]+)+|[A-Za-z0-9]+|[.;:!?()[\]{}\n\u2022*]|,|&/g;
  for (const m of normal.matchAll(re)) {
    const t = m[0];
    if (t === ',') tokens.push({ boundary: 'soft' });
    else if (t === '&') tokens.push({ word: '&' });
    else if (/^[.;:!?()[\]{}\n\u2022*]$/.test(t)) {
      // A dot inside a word (v1.2, e.g., ~/.ssh) is not a sentence end: only one followed by a space or the end.
      if (t === '.' && /\S/.test(normal[m.index + 1] ?? ' ')) continue;
      tokens.push({ boundary: 'hard' });
    } else tokens.push({ word: t.toLowerCase() });
  }
  return tokens;
}

// ---------------------------------------------------------------------------------------------------
// Evidence.
// ---------------------------------------------------------------------------------------------------

interface Signal {
  cls: PrivilegeClass;
  weak?: boolean;
  reason: string;
}

const quote = (s: string) => `"${s}"`;

/** The class a generic write takes from its objects: financial or admin when one of them says so. */
function upgradeByObjects(words: string[]): { cls: PrivilegeClass; noun: string } | undefined {
  // Compounds written as two words count as one: "api key", "service account", "payment intent".
  const objects = [...words, ...words.slice(1).map((w, i) => `${words[i]}${w}`)];
  const money = objects.find((o) => FINANCIAL_NOUN_SET.has(o));
  if (money) return { cls: 'financial', noun: money };
  const access = objects.find((o) => ADMIN_NOUN_SET.has(o));
  if (access) return { cls: 'admin', noun: access };
  return undefined;
}

/** The signal of one verb occurrence with its objects. */
function verbSignal(entry: VerbEntry, seen: string, objects: string[], where: string): Signal {
  const { verb, cls } = entry;
  for (const [nouns, ruleClass, why] of OBJECT_RULES[verb] ?? []) {
    const noun = objects.find((o) => nouns.includes(o));
    if (noun) return { cls: ruleClass, reason: `${where}: ${quote(`${seen} … ${noun}`)} (${why})` };
  }
  if (cls === 'write' || cls === 'weak_write') {
    const up = upgradeByObjects(objects);
    if (up) {
      const what = up.cls === 'financial' ? 'a money object' : 'an access object';
      return { cls: up.cls, reason: `${where}: ${quote(`${seen} … ${up.noun}`)} (a write on ${what})` };
    }
    if (cls === 'weak_write') return { cls: 'write', weak: true, reason: `${where}: ${quote(seen)} (runs something)` };
    return { cls: 'write', reason: `${where}: ${quote(seen)} (changes something)` };
  }
  const described: Record<PrivilegeClass, string> = {
    read: 'reads',
    write: 'changes something',
    destructive: 'destroys',
    financial: 'moves money',
    admin: 'changes access',
  };
  return { cls, reason: `${where}: ${quote(seen)} (${described[cls]})` };
}

/** Phrase matches in a word list; returns the signals and which word positions they consumed. */
function phraseSignals(words: string[], where: string): { signals: Signal[]; consumed: Set<number>; readOnly: boolean } {
  const signals: Signal[] = [];
  const consumed = new Set<number>();
  let readOnly = false;
  for (let i = 0; i < words.length; i++) {
    for (const [parts, cls] of PHRASE_TOKENS) {
      if (parts.every((p, k) => words[i + k] === p)) {
        for (let k = 0; k < parts.length; k++) consumed.add(i + k);
        const text = parts.join(' ');
        if (cls === 'read_only') {
          readOnly = true;
          signals.push({ cls: 'read', reason: `${where}: ${quote(text)} (states it is read-only)` });
        } else signals.push({ cls, reason: `${where}: ${quote(text)}` });
      }
    }
  }
  return { signals, consumed, readOnly };
}

/** Evidence from an identifier (a name, a title, an identifier in a description, a parameter name). */
function identifierSignals(words: string[], where: string): Signal[] {
  const { signals, consumed } = phraseSignals(words, where);
  // Clauses: `get_or_create_customer` is a get and a create.
  const clauses: Array<Array<{ w: string; i: number }>> = [[]];
  words.forEach((w, i) => {
    if (CONJUNCTIONS.has(w)) clauses.push([]);
    else if (!consumed.has(i)) clauses.at(-1)!.push({ w, i });
  });
  for (const clause of clauses) {
    // A noun-like verb last in a name is the noun (`git_log`, `stripe_refund`): the description decides.
    // A read verb may stand last (`web_search`, `db_query`): as a noun it claims no more than a read.
    const at = clause.findIndex(({ w }, k) => {
      const known = VERB_FORMS.get(w);
      if (!known?.forms.has('base')) return false;
      return known.entry.cls === 'read' || !NOUN_LIKE.has(w) || k < clause.length - 1 || clause.length === 1;
    });
    if (at < 0) continue;
    const { w } = clause[at]!;
    const entry = VERB_FORMS.get(w)!.entry;
    const after = clause.slice(at + 1).map((x) => x.w);
    const stop = after.findIndex((x) => PREPOSITIONS.has(x));
    const objects = after.length > 0 ? (stop < 0 ? after : after.slice(0, stop)) : clause.slice(0, at).map((x) => x.w);
    signals.push(verbSignal(entry, w, objects, where));
  }
  return signals;
}

/** Is the word at `i` preceded, within the negation window and the same sentence, by a negator? */
function negated(tokens: Token[], i: number): boolean {
  for (let k = i - 1, seen = 0; k >= 0 && seen < NEGATION_WINDOW; k--) {
    const t = tokens[k]!;
    if ('boundary' in t) {
      if (t.boundary === 'hard') return false;
      continue;
    }
    if (NEGATORS.has(t.word)) return true;
    seen++;
  }
  return false;
}

const wordAt = (tokens: Token[], i: number): string | undefined => {
  const t = tokens[i];
  return t && 'word' in t ? t.word : undefined;
};

/** Whether the word at `i` is used as a verb here, judged by where it stands (see the module comment). */
function verbPosition(tokens: Token[], i: number, clauseStart: boolean): boolean {
  const word = wordAt(tokens, i)!;
  const known = VERB_FORMS.get(word);
  if (!known) return false;
  const { forms, entry } = known;
  const prev = wordAt(tokens, i - 1);
  const before = tokens[i - 1];
  const prevIsSoft = before !== undefined && 'boundary' in before && before.boundary === 'soft';
  const next = wordAt(tokens, i + 1);
  const objectFollows = next !== undefined && DETERMINERS.has(next);
  const nounLike = NOUN_LIKE.has(entry.verb);
  const present = forms.has('base') || forms.has('third');
  if (clauseStart && present && !prevIsSoft) return true;
  if (prev !== undefined && MODALS.has(prev) && forms.has('base')) return true;
  if (prev === 'to' && forms.has('base')) return !nounLike || objectFollows;
  if ((clauseStart || (prev !== undefined && CONJUNCTIONS.has(prev))) && present) return !nounLike || objectFollows;
  if (prev !== undefined && GERUND_PREPOSITIONS.has(prev) && forms.has('gerund')) return true;
  if (forms.has('past') && (entry.cls === 'destructive')) {
    // "is deleted", "are permanently removed", "will be purged"
    const before = wordAt(tokens, i - 1);
    const before2 = wordAt(tokens, i - 2);
    if (before !== undefined && PASSIVE_AUXILIARIES.has(before)) return true;
    if (before?.endsWith('ly') && before2 !== undefined && PASSIVE_AUXILIARIES.has(before2)) return true;
  }
  return false;
}

/** The objects of a verb in prose: the words after it up to a boundary, a preposition or six words. */
function proseObjects(tokens: Token[], i: number): string[] {
  const out: string[] = [];
  for (let k = i + 1; k < tokens.length && out.length < 6; k++) {
    const w = wordAt(tokens, k);
    if (w === undefined || PREPOSITIONS.has(w) || CONJUNCTIONS.has(w)) break;
    out.push(w);
  }
  return out;
}

const CALL_VERBS = new Set(['call', 'calls', 'invoke', 'invokes', 'use', 'run', 'trigger']);

/** Evidence from a description. */
function proseSignals(text: string, where: string): { signals: Signal[]; readOnly: boolean } {
  const tokens = proseTokens(text);
  const words = tokens.map((t) => ('word' in t ? t.word : '\u0000'));
  const phrases = phraseSignals(words, where);
  const signals = [...phrases.signals];
  let clauseStart = true;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if ('boundary' in t) {
      clauseStart = true;
      continue;
    }
    const word = t.word;
    if (phrases.consumed.has(i)) {
      clauseStart = false;
      continue;
    }
    if (word.includes('_')) {
      // An identifier the description tells the model to call: its privilege comes with this tool's use.
      const prev = wordAt(tokens, i - 1);
      const prev2 = wordAt(tokens, i - 2);
      if ((prev && CALL_VERBS.has(prev)) || (prev2 && CALL_VERBS.has(prev2))) {
        if (!negated(tokens, i)) signals.push(...identifierSignals(identifierWords(word), `${where} (asks to call ${word})`));
      }
      clauseStart = false;
      continue;
    }
    const isLeadIn = clauseStart && (LEAD_INS.has(word) || (word.endsWith('ly') && !VERB_FORMS.has(word)));
    if (verbPosition(tokens, i, clauseStart) && !negated(tokens, i)) {
      const entry = VERB_FORMS.get(word)!.entry;
      signals.push(verbSignal(entry, word, proseObjects(tokens, i), where));
    }
    if (!isLeadIn) clauseStart = false;
  }
  return { signals, readOnly: phrases.readOnly };
}

/** The properties of an input schema (top level and nested objects): name and declared type. */
function properties(schema: unknown, depth = 0): Array<{ name: string; type: unknown }> {
  if (depth > 4 || typeof schema !== 'object' || schema === null) return [];
  const props = (schema as { properties?: unknown }).properties;
  if (typeof props !== 'object' || props === null) return [];
  return Object.entries(props).flatMap(([name, value]) => [
    { name: name.toLowerCase(), type: typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined },
    ...properties(value, depth + 1),
  ]);
}

/** Parameter names that move money when a tool writes: an amount together with where it goes. */
const MONEY_AMOUNT = /^amount/;
const MONEY_ROUTE = new Set([
  'currency', 'iban', 'account_number', 'routing_number', 'payee', 'beneficiary', 'recipient', 'destination_account', 'to_account',
  'card_number',
]);
const ACCESS_PARAMS = new Set(['role', 'roles', 'permission', 'permissions', 'privileges', 'access_level', 'is_admin', 'scopes']);

/**
 * Evidence from parameters. A boolean switch named for a destructive, financial or access action
 * (`delete_after_read`, `charge_now`, `grant_admin`) brings that class whatever the tool says; other
 * parameter names are nouns (`charge_id` is not a charge). Money and access parameters only sharpen a
 * write (a read with a `currency` filter is still a read), so they come back for the caller to apply.
 */
function parameterEvidence(schema: unknown): { signals: Signal[]; money: boolean; access: string | undefined } {
  const props = properties(schema);
  const names = props.map((p) => p.name);
  const signals: Signal[] = [];
  for (const { name, type } of props) {
    if (type !== 'boolean') continue;
    const first = identifierWords(name)[0];
    const known = first === undefined ? undefined : VERB_FORMS.get(first);
    if (!known?.forms.has('base')) continue;
    const { cls } = known.entry;
    if (cls === 'destructive' || cls === 'financial' || cls === 'admin') {
      signals.push(verbSignal(known.entry, first!, [], `parameter ${quote(name)}`));
    }
  }
  const money = names.some((n) => MONEY_AMOUNT.test(n)) && names.some((n) => MONEY_ROUTE.has(n));
  return { signals, money, access: names.find((n) => ACCESS_PARAMS.has(n)) };
}

const RANK: Record<PrivilegeClass, number> = { read: 0, write: 1, admin: 2, destructive: 3, financial: 4 };

/** Classify a tool from its definition alone (see the module comment for how and where it stops). */
export function classifyTool(tool: ToolDefinition): Classification {
  const signals: Signal[] = [];
  signals.push(...identifierSignals(identifierWords(tool.name), 'name'));
  if (tool.title) signals.push(...identifierSignals(identifierWords(tool.title), 'title'));
  let readOnly = false;
  if (tool.description) {
    const prose = proseSignals(tool.description, 'description');
    signals.push(...prose.signals);
    readOnly = prose.readOnly;
  }
  const params = parameterEvidence(tool.input_schema);
  signals.push(...params.signals);

  // A statement that it is read-only outweighs "it runs something", never a strong verb.
  const counted = readOnly ? signals.map((s) => (s.weak ? { cls: 'read' as const, reason: `${s.reason}, stated read-only` } : s)) : signals;

  // Money or access parameters sharpen a plain write.
  const hasWrite = counted.some((s) => s.cls === 'write');
  if (hasWrite && params.money) counted.push({ cls: 'financial', reason: 'parameters: an amount with where it goes (moves money)' });
  if (hasWrite && params.access) counted.push({ cls: 'admin', reason: `parameter ${quote(params.access)} (sets access)` });

  const top = counted.reduce<PrivilegeClass | undefined>(
    (best, s) => (best === undefined || RANK[s.cls] > RANK[best] ? s.cls : best),
    undefined,
  );
  if (top === undefined) {
    return {
      privilege_class: 'write',
      reasons: ['no recognisable action in the name or description: an unknown tool is treated as able to change something'],
    };
  }
  const reasons = [...new Set(counted.filter((s) => s.cls === top).map((s) => s.reason))].slice(0, 5);
  return { privilege_class: top, reasons };
}

/** Whether a class can change something: every class but `read`. */
export function isModifying(privilegeClass: PrivilegeClass): boolean {
  return privilegeClass !== 'read';
}

/**
 * Whether the server's `readOnlyHint` contradicts the classification: it declares the tool read-only
 * and Tollgate reads it as able to change something (a high-severity `tool_poisoning` finding). A
 * server that says nothing (null) or says it modifies is no contradiction.
 */
export function readOnlyMismatch(declaredReadOnlyHint: boolean | null | undefined, privilegeClass: PrivilegeClass): boolean {
  return declaredReadOnlyHint === true && isModifying(privilegeClass);
}
