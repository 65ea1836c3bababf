import { protocol, types, type PGlite } from '@electric-sql/pglite';
import type { CompiledQuery } from 'kysely';

type BackendMessage = Awaited<ReturnType<PGlite['execProtocolStream']>>[number];

/** A statement's result, as Kysely's PGlite driver answers it. */
export interface RoundResult {
  rows: unknown[];
  numAffectedRows?: bigint;
}

/**
 * A statement text as the database described it: its parameters' types, and the name it is kept under
 * (planned once, PostgreSQL's generic plan once it settles on one) if it is.
 */
interface Described {
  oids: number[];
  name?: string;
}

/** Names kept statements uniquely in the process (so in every PGlite session). */
let named = 0;

/** Rows a command tag says it changed, as PGlite counts them. */
function affectedBy(tag: string): number {
  const parts = tag.split(' ');
  if (parts[0] === 'INSERT') return Number(parts[2]);
  return ['UPDATE', 'DELETE', 'COPY', 'MERGE'].includes(parts[0]!) ? Number(parts[1]) : 0;
}

/** The messages of one statement each: a statement's run ends at its ReadyForQuery (each is followed by its own Sync). */
function perStatement(messages: BackendMessage[]): BackendMessage[][] {
  const groups: BackendMessage[][] = [[]];
  for (const m of messages) {
    if (m.name === 'readyForQuery') groups.push([]);
    else groups.at(-1)!.push(m);
  }
  return groups;
}

/**
 * Several statements of the embedded database in one call into PGlite, in turn, as node-postgres's
 * pipeline mode sends them to PostgreSQL (`inScopePiped`): each statement goes as its own extended-query
 * run (bind, execute, sync), so one's failure ends that one only, and a failed statement inside a
 * transaction leaves it aborted, as there. PGlite's `query` costs ~0.1 ms a statement beyond the
 * statement's own work (six calls into the WASM postgres, a copy of its table of type parsers, and a parse
 * and plan of the text every time): the gateway batch's six statements took ~1.9 ms that way and take
 * ~1.0 ms here (issue 20, `bench/low-load.ts`). Each text's parameter types are described once (so values
 * are serialised as `query` serialises them) and results are parsed with PGlite's own parsers: what a
 * caller reads is what `query` answers.
 *
 * A statement the caller names as `kept` is prepared once: parsed, analysed and rewritten (its row-level
 * security policies applied) once. PostgreSQL then plans it for its values for its first five runs and
 * afterwards takes its generic plan when that is estimated no dearer (`plan_cache_mode` auto), and plans it
 * again whenever its tables' statistics change (each analyze of the embedded database's maintenance, D1).
 * Kept: the batch's write (its inserts and the head's update by key, ~0.25 ms more to plan each time) and
 * the gateway's probe (~0.12 ms of PGlite a decision in bench/low-load: 0.93 against 1.05 ms). The probe
 * looks each pair up by the actions' unique key (a lateral lookup of one row), so its plan reads an index
 * entry a pair for any values, on tables analysed or not (migration 0022). Only for statements whose text
 * the schema cannot change under while the process runs (the embedded database migrates before it serves).
 */
export class PgliteRounds {
  /** By text, least recently used first. */
  private readonly texts = new Map<string, Described>();

  constructor(
    private readonly pglite: PGlite,
    private readonly max = 64,
  ) {}

  /**
   * Runs `statements` in turn, in one call into PGlite (two the first time a text is seen, to describe
   * it). The caller holds the database's one connection. Answers each statement's result or error.
   */
  async run(statements: readonly CompiledQuery[], kept: ReadonlySet<CompiledQuery> = new Set()): Promise<PromiseSettledResult<RoundResult>[]> {
    const settled: Array<PromiseSettledResult<RoundResult> | undefined> = statements.map(() => undefined);
    const described = await this.describe(statements, kept, settled);
    const parts: Uint8Array[] = [];
    const sent: number[] = [];
    statements.forEach((s, i) => {
      const d = described[i];
      if (!d) return;
      const values = s.parameters.map((v, j) => this.serialise(v, d.oids[j]!));
      const name = kept.has(s) ? d.name : undefined;
      if (!name) parts.push(protocol.serialize.parse({ text: s.sql }));
      parts.push(protocol.serialize.bind({ statement: name ?? '', values }), protocol.serialize.describe({ type: 'P' }), protocol.serialize.execute({}), protocol.serialize.sync());
      sent.push(i);
    });
    if (sent.length > 0) {
      const groups = perStatement(await this.pglite.execProtocolStream(concat(parts), { syncToFs: false, throwOnError: false }));
      sent.forEach((i, k) => (settled[i] = this.result(groups[k] ?? [], statements[i]!)));
    }
    // What PGlite's `query` does after each statement outside its own transactions: the file system's
    // own sync, so durability stays PGlite's, as for every other statement. Its postgres runs with fsync
    // off (`-F` in its default start parameters): a commit is answered once its WAL is written to the
    // files, so an acknowledged decision outlives the process (test/e2e/crash.test.ts), not the machine.
    await this.pglite.syncToFs();
    return settled as PromiseSettledResult<RoundResult>[];
  }

  /**
   * Each text as described, describing in one call those not seen yet (and preparing those to keep); a
   * text that fails to parse settles as its error, and is not sent.
   */
  private async describe(statements: readonly CompiledQuery[], kept: ReadonlySet<CompiledQuery>, settled: Array<PromiseSettledResult<RoundResult> | undefined>) {
    const fresh = new Map<string, string | undefined>();
    const found = statements.map((s) => {
      const d = this.texts.get(s.sql);
      if (d && (d.name || !kept.has(s))) {
        this.texts.delete(s.sql);
        this.texts.set(s.sql, d);
        return d;
      }
      if (!fresh.has(s.sql) || kept.has(s)) fresh.set(s.sql, kept.has(s) ? `tollgate_${++named}` : undefined);
      return undefined;
    });
    if (fresh.size === 0) return found;
    const parts: Uint8Array[] = [];
    for (const [text, name] of fresh) {
      parts.push(protocol.serialize.parse({ name, text }), protocol.serialize.describe({ type: 'S', name }), protocol.serialize.sync());
    }
    // Over the bound, the least recently used go (those kept closed in the same call), never one this call runs.
    const running = new Set(statements.map((s) => s.sql));
    const evicted = [...this.texts.keys()].filter((text) => !running.has(text)).slice(0, Math.max(0, this.texts.size + fresh.size - this.max));
    for (const text of evicted) {
      const name = this.texts.get(text)!.name;
      if (name) parts.push(protocol.serialize.close({ type: 'S', name }), protocol.serialize.sync());
      this.texts.delete(text);
    }
    const groups = perStatement(await this.pglite.execProtocolStream(concat(parts), { syncToFs: false, throwOnError: false }));
    const made = new Map<string, Described | Error>();
    [...fresh].forEach(([text, name], k) => {
      const group = groups[k] ?? [];
      const error = group.find((m) => m.name === 'error');
      if (error) return made.set(text, Object.assign(error as unknown as Error, { query: text }));
      const parameters = group.find((m) => m.name === 'parameterDescription') as { dataTypeIDs: number[] } | undefined;
      const d = { oids: parameters?.dataTypeIDs ?? [], ...(name ? { name } : {}) };
      // A text kept before and run once unkept since keeps its name.
      this.texts.set(text, d);
      made.set(text, d);
    });
    return statements.map((s, i) => {
      if (found[i]) return found[i];
      const d = made.get(s.sql);
      if (d instanceof Error || !d) {
        settled[i] = { status: 'rejected', reason: d ?? new Error('statement not described') };
        return undefined;
      }
      return d;
    });
  }

  /** A parameter as PGlite's `query` serialises it for its type. */
  private serialise(value: unknown, oid: number): string | null {
    if (value === null || value === undefined) return null;
    const serialise = this.pglite.serializers[oid];
    return serialise ? serialise(value) : String(value);
  }

  /** One statement's messages as its rows (PGlite's parsers) or its error (PGlite's error, with its text and parameters). */
  private result(group: BackendMessage[], statement: CompiledQuery): PromiseSettledResult<RoundResult> {
    let fields: Array<{ name: string; dataTypeID: number }> = [];
    const rows: unknown[] = [];
    let affected = 0;
    for (const m of group) {
      if (m.name === 'error') {
        // A statement the schema changed under (it cannot, once served), or one the session no longer has
        // (a DISCARD ALL): described and prepared again next time.
        const code = (m as { code?: string }).code;
        if (code === '0A000' || code === '26000') this.texts.delete(statement.sql);
        return { status: 'rejected', reason: Object.assign(m as unknown as Error, { query: statement.sql, params: statement.parameters }) };
      }
      if (m.name === 'rowDescription') fields = (m as unknown as { fields: typeof fields }).fields;
      else if (m.name === 'dataRow') {
        const values = (m as unknown as { fields: Array<string | null> }).fields;
        const row: Record<string, unknown> = {};
        fields.forEach((f, j) => (row[f.name] = types.parseType(values[j] ?? null, f.dataTypeID, this.pglite.parsers)));
        rows.push(row);
      } else if (m.name === 'commandComplete') affected += affectedBy((m as unknown as { text: string }).text);
    }
    return { status: 'fulfilled', value: affected ? { rows, numAffectedRows: BigInt(affected) } : { rows } };
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
