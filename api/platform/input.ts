import type { FastifyInstance, FastifyRequest } from 'fastify';
import { validationFailed, type ValidationDetail } from './errors.js';

/**
 * The one input boundary every operation passes (docs/decisions.md, "One input boundary"): JSON bodies
 * nested deeper than MAX_JSON_DEPTH are refused while parsing, and text holding a NUL character or an unpaired
 * UTF-16 surrogate is refused in the body (values and keys), the query string and the path, before
 * validation and before any work, as are JSON numbers too large for a double (`1e999` parses as Infinity).
 * PostgreSQL can store neither character (22021, 22P05), the driver would silently turn a lone surrogate into
 * U+FFFD, JSON has no Infinity to store or sign, and deep nesting overflows the stack of whatever walks the
 * value later, so each would otherwise end in a 500 or in stored data that is not what was sent.
 */

/** Containers (objects and arrays) a JSON body may nest, the body itself being the first. */
export const MAX_JSON_DEPTH = 64;

/** Details listed at most, so a refusal stays small whatever the body holds. */
const MAX_DETAILS = 20;

/**
 * Whether JSON text nests more than `max` containers deep: one linear pass that counts brackets outside
 * strings, so a body is judged before JSON.parse builds anything from it. Text that is not JSON gets an
 * answer too; the parser refuses it after.
 */
export function jsonNestsDeeperThan(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > max) return true;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return false;
}

type Done = (err: Error | null, body?: unknown) => void;

/**
 * The application/json parser: an empty body is no body (operations that take none accept it, the others
 * answer 422 naming the body); a body nested too deep answers 422 naming the body; the rest goes to
 * fastify's own parser, which keeps its prototype-poisoning protection (`__proto__` and
 * `constructor.prototype` keys answer 400).
 */
export function jsonBodyParser(app: FastifyInstance) {
  const parse = app.getDefaultJsonParser('error', 'error');
  return (req: FastifyRequest, body: string | Buffer, done: Done): void => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (/^\s*$/.test(text)) return done(null, undefined);
    if (jsonNestsDeeperThan(text)) {
      return done(
        validationFailed(
          [{ field: 'body', message: `nests more than ${MAX_JSON_DEPTH} objects and arrays deep`, code: 'too_deep' }],
          `The body nests more than ${MAX_JSON_DEPTH} objects and arrays deep.`,
        ),
      );
    }
    parse(req, text, done);
  };
}

// A NUL, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one.
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** What is wrong with a string, if anything. */
function unstorable(s: string): string | undefined {
  const m = UNSTORABLE.exec(s);
  if (!m) return undefined;
  return m[0] === '\u0000' ? 'must not contain a NUL character (U+0000)' : 'must not contain an unpaired UTF-16 surrogate';
}

/** A key as a field name shows it: the characters that cannot be stored written as \uXXXX, at most 100 long. */
function printable(key: string): string {
  const shown = key.replace(
    /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return shown.length > 100 ? `${shown.slice(0, 100)}...` : shown;
}

/**
 * Every string, key and number of a value that cannot be stored, as validation details. `prefix` is how
 * the error envelope names the part of the request (D5): '' for the body, `query`, `path`.
 */
export function unstorableValues(value: unknown, prefix: string, out: ValidationDetail[] = []): ValidationDetail[] {
  const field = (path: string[]) => [prefix, ...path].filter(Boolean).join('.') || 'body';
  // Iterative, so the walk needs no stack however the value nests (the body is bounded, query and path are flat).
  const stack: Array<{ v: unknown; path: string[] }> = [{ v: value, path: [] }];
  while (stack.length > 0 && out.length < MAX_DETAILS) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') {
      const problem = unstorable(v);
      if (problem) out.push({ field: field(path), message: problem, code: 'invalid_characters' });
    } else if (typeof v === 'number' && !Number.isFinite(v)) {
      out.push({ field: field(path), message: 'is a number beyond the range of a double (about 1.8e308)', code: 'out_of_range' });
    } else if (v && typeof v === 'object') {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, x] = entries[i]!;
        const problem = unstorable(k);
        if (problem) out.push({ field: field([...path, printable(k)]), message: `its name ${problem}`, code: 'invalid_characters' });
        else stack.push({ v: x, path: [...path, k] });
      }
    }
  }
  return out.slice(0, MAX_DETAILS);
}

/**
 * Refuses values that cannot be stored in the path, the query string and the body, on every operation,
 * before validation. Register it before any other preValidation hook, so that nothing (the rate limiter
 * keys token exchange by the body's client_id) sends such text to the database first.
 */
export function registerInputBoundary(app: FastifyInstance): void {
  app.addHook('preValidation', async (req) => {
    const details = unstorableValues(req.params, 'path');
    unstorableValues(req.query, 'query', details);
    unstorableValues(req.body, '', details);
    if (details.length > 0) {
      const message = details.every((d) => d.code === 'invalid_characters')
        ? 'Text must not contain NUL characters or unpaired UTF-16 surrogates.'
        : 'The request holds values that cannot be stored.';
      throw validationFailed(details.slice(0, MAX_DETAILS), message);
    }
  });
}
