/**
 * Malformed requests answered 400 `bad_request` instead of the API's 422 `validation_failed`, for the
 * operations whose callers need it (the AuthZEN endpoints, the MCP ext_authz check: docs/integrations.md),
 * and a JSON body refused when it repeats a key, for an operation whose body another program reads after
 * Tollgate has decided on it.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { ApiError, validationFailed, type ValidationDetail } from './errors.js';
import { jsonBodyParser } from './input.js';

type Issue = z.core.$ZodIssue;

/**
 * A union's issues, replaced by those of the branch that got furthest into the value (the deepest path):
 * for "a message or a batch of them", a batch's item errors rather than "expected object".
 */
function flatten(issues: readonly Issue[], base: PropertyKey[] = []): Array<Issue & { at: PropertyKey[] }> {
  return issues.flatMap((i) => {
    const at = [...base, ...i.path];
    if (i.code !== 'invalid_union' || i.errors.length === 0) return [{ ...i, at }];
    const depth = (branch: readonly Issue[]) => Math.max(...branch.map((x) => x.path.length));
    const best = i.errors.reduce((a, b) => (depth(b) > depth(a) ? b : a));
    return flatten(best, at);
  });
}

/** Validation details of a zod error, fields named from `prefix` (as the error envelope names them, D5) and `source`. */
export const detailsOf = (error: z.ZodError, prefix: string, source: (path: string) => string = (p) => p): ValidationDetail[] =>
  flatten(error.issues).map((i) => ({ field: prefix + source(i.at.map(String).join('.')) || 'body', message: i.message, code: i.code }));

/**
 * A malformed request's 400 `bad_request` (AuthZEN's HTTPS binding and its certification harness ask for
 * 400, not the 422 `validation_failed` of the rest of the API): the same details, and a message that names
 * the first problem.
 */
export function malformed(details: ValidationDetail[], message?: string): ApiError {
  const [first] = details;
  const more = details.length > 1 ? ` (and ${details.length - 1} more, in details)` : '';
  return new ApiError('bad_request', message ?? (first ? `The request is malformed: ${first.field}: ${first.message}${more}.` : 'The request is malformed.'), details);
}

// What fastify throws for a body whose Content-Type is missing, empty or not one this app parses (JSON only).
const NOT_JSON = new Set(['FST_ERR_CTP_INVALID_MEDIA_TYPE', 'FST_ERR_CTP_INVALID_TYPE', 'FST_ERR_CTP_EMPTY_TYPE']);

// How the error envelope names each part of a request (platform/error-handler.ts, D5); the body is unprefixed.
const PART_PREFIX: Record<string, string> = { body: '', headers: 'header.', params: 'path.', querystring: 'query.' };

/**
 * For a plugin whose operations answer a malformed request with 400 `bad_request` rather than the API's
 * 422 `validation_failed` (AuthZEN's HTTPS binding; the ext_authz check, whose status a proxy passes to
 * the client): scoped to the plugin that calls it, so every other operation keeps its 422. Schema
 * validation fails with the same details as elsewhere, and this plugin's error handler turns every
 * `validation_failed` (schema, JSON nesting, unstorable text, the service's own checks) and a body that is
 * not application/json (415 elsewhere) into `bad_request` before the app's one handler writes the envelope.
 */
export function answerMalformedWith400(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => (data: unknown) => {
    const result = (schema as z.ZodType).safeParse(data);
    return result.success ? { value: result.data } : { error: validationFailed(detailsOf(result.error, PART_PREFIX[httpPart ?? 'body'] ?? '')) };
  });
  app.setErrorHandler((err: FastifyError) => {
    if (err instanceof ApiError && err.code === 'validation_failed') throw malformed(err.details as ValidationDetail[]);
    // The certification harness sends a body that is not application/json and expects 400, not 415.
    if (NOT_JSON.has(err.code)) {
      throw malformed([{ field: 'header.content-type', message: 'send the body as application/json', code: 'unsupported_media_type' }]);
    }
    throw err;
  });
}

/** A container being scanned: an object's keys so far, or an array's index; and where it sits. */
interface Level {
  keys: Set<string> | null;
  index: number;
  path: string;
}

/**
 * Where a JSON text repeats a key within one object, if it does: the place (as validation details name it)
 * and the key. One linear pass that keeps no recursion, so any nesting the body limit lets in is safe; text
 * that is not JSON gets no answer here (the parser refuses it after).
 */
export function duplicateKey(text: string): { field: string; key: string } | undefined {
  const levels: Level[] = [];
  let expectKey = false;
  let last: string | undefined;
  const at = (l: Level | undefined, name: string) => (l?.path ? `${l.path}.${name}` : name);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = levels[levels.length - 1];
    if (c === 0x22 /* " */) {
      let j = i + 1;
      while (j < text.length && text.charCodeAt(j) !== 0x22) j += text.charCodeAt(j) === 0x5c /* \ */ ? 2 : 1;
      if (top?.keys && expectKey) {
        let key: string;
        try {
          key = JSON.parse(text.slice(i, j + 1)) as string;
        } catch {
          return undefined;
        }
        if (top.keys.has(key)) return { field: at(top, key), key };
        top.keys.add(key);
        last = key;
        expectKey = false;
      }
      i = j;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const path = top ? at(top, top.keys ? (last ?? '') : String(top.index)) : '';
      levels.push({ keys: c === 0x7b ? new Set() : null, index: 0, path });
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      levels.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      if (top?.keys) expectKey = true;
      else if (top) top.index++;
    }
  }
  return undefined;
}

/**
 * For a plugin that decides on a body another program reads after it (the ext_authz check: the proxy
 * forwards the agent's JSON-RPC body to the MCP server when Tollgate allows it). JSON.parse keeps the last
 * of two equal keys and some parsers keep the first, so `{"method": "tools/call", ..., "method": "ping"}`
 * would be an undecided ping here and a tool call there: a body that repeats a key in one object is
 * refused before it is parsed. The rest is the app's own JSON parser (api/platform/input.ts).
 */
export function refuseDuplicateKeys(app: FastifyInstance): void {
  const parse = jsonBodyParser(app);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    const dup = duplicateKey(text);
    if (dup) {
      const message = `the key "${dup.key.slice(0, 100)}" appears twice in one object: JSON parsers differ on which one counts`;
      return done(validationFailed([{ field: dup.field, message, code: 'duplicate_key' }]), undefined);
    }
    parse(req, body, done);
  });
}
