/**
 * A direct translation of the common subset of CEL (literals, variables, field access, has(), size(),
 * comparisons, in, !, &&, ||, ?:, startsWith/endsWith/contains) into closures over the decision
 * document, so a typical condition costs a few property reads instead of an interpreter run. It
 * follows CEL's rules for errors (a missing key or a type mismatch is an error; `false && error` is
 * false and `true || error` true, in either order). Anything outside the subset, at translation or at
 * run time (comparing lists, say), answers FALLBACK and the CEL library decides. A differential test
 * holds the two to the same answers (test/unit/cel-fast.test.ts).
 */
export const ERR: unique symbol = Symbol('cel error');
export const FALLBACK: unique symbol = Symbol('cel fallback');
type Val = unknown;
type Fn = (doc: Record<string, unknown>) => Val;

interface Node {
  op: string;
  args: unknown;
}
const isNode = (x: unknown): x is Node => typeof x === 'object' && x !== null && 'op' in x && 'args' in x;
const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isScalar = (v: unknown) => v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/** CEL equality of scalars: numbers by value, other types only with their own type. FALLBACK for aggregates. */
function equal(a: Val, b: Val): boolean | typeof FALLBACK {
  if (!isScalar(a) || !isScalar(b)) return FALLBACK;
  return a === b;
}

function compare(op: string, a: Val, b: Val): Val {
  const ok = (typeof a === 'number' && typeof b === 'number') || (typeof a === 'string' && typeof b === 'string');
  if (!ok) return ERR;
  const x = a as number | string;
  const y = b as number | string;
  return op === '<' ? x < y : op === '<=' ? x <= y : op === '>' ? x > y : x >= y;
}

/** Both operands, left first; an error or a fallback of either is the answer, else `f` of the two. */
function binary(a: Fn, b: Fn, f: (x: Val, y: Val) => Val): Fn {
  return (doc) => {
    const x = a(doc);
    if (x === ERR || x === FALLBACK) return x;
    const y = b(doc);
    if (y === ERR || y === FALLBACK) return y;
    return f(x, y);
  };
}

/** A literal the translation reads as a scalar (`value` below: an int within 2^53 as a number), as `[value]`; undefined for anything else. */
export function scalarLiteral(node: unknown): [Val] | undefined {
  if (!isNode(node) || node.op !== 'value') return undefined;
  const v = translateCel(node);
  return v ? [v({})] : undefined;
}

/** `a.b.c` (a variable and field selections) as its names, or undefined for any other expression. */
export function selection(node: unknown): string[] | undefined {
  if (!isNode(node)) return undefined;
  if (node.op === 'id') return typeof node.args === 'string' ? [node.args] : undefined;
  if (node.op !== '.' || !Array.isArray(node.args) || typeof node.args[1] !== 'string') return undefined;
  const base = selection(node.args[0]);
  return base ? [...base, node.args[1]] : undefined;
}

/**
 * A selection read in one closure instead of one per name, with the same rules as `id` and `.` below:
 * a variable or key that is not there, or a selection on something other than a map, is an error.
 */
function readSelection([root, ...fields]: string[]): Fn {
  if (fields.length === 1) {
    const [field] = fields as [string];
    return (doc) => {
      if (!Object.hasOwn(doc, root!)) return ERR;
      const o = doc[root!];
      return isMap(o) && Object.hasOwn(o, field) ? o[field] : ERR;
    };
  }
  return (doc) => {
    if (!Object.hasOwn(doc, root!)) return ERR;
    let o = doc[root!];
    for (const field of fields) {
      if (!isMap(o) || !Object.hasOwn(o, field)) return ERR;
      o = o[field];
    }
    return o;
  };
}

/** The translated condition, or undefined when the expression leaves the subset. */
export function translateCel(ast: unknown): Fn | undefined {
  if (!isNode(ast)) return undefined;
  const { op, args } = ast;
  const pair = () => (Array.isArray(args) && args.length === 2 ? [translateCel(args[0]), translateCel(args[1])] : [undefined, undefined]);
  switch (op) {
    case 'value': {
      if (typeof args === 'bigint') {
        if (args > BigInt(Number.MAX_SAFE_INTEGER) || args < BigInt(Number.MIN_SAFE_INTEGER)) return undefined;
        const n = Number(args);
        return () => n;
      }
      if (isScalar(args)) return () => args;
      return undefined;
    }
    case 'id': {
      const name = args as string;
      return (doc) => (Object.hasOwn(doc, name) ? doc[name] : ERR);
    }
    case '.': {
      if (!Array.isArray(args) || typeof args[1] !== 'string') return undefined;
      const path = selection(ast);
      if (path) return readSelection(path);
      const obj = translateCel(args[0]);
      const field = args[1];
      if (!obj) return undefined;
      return (doc) => {
        const o = obj(doc);
        if (o === ERR || o === FALLBACK) return o;
        return isMap(o) && Object.hasOwn(o, field) ? o[field] : ERR;
      };
    }
    case 'list': {
      if (!Array.isArray(args)) return undefined;
      const items = args.map(translateCel);
      if (items.some((x) => !x)) return undefined;
      return (doc) => {
        const out: Val[] = [];
        for (const item of items as Fn[]) {
          const v = item(doc);
          if (v === ERR || v === FALLBACK) return v;
          out.push(v);
        }
        return out;
      };
    }
    case 'call': {
      if (!Array.isArray(args) || !Array.isArray(args[1]) || args[1].length !== 1) return undefined;
      const [name, [arg]] = args as [string, unknown[]];
      if (name === 'has') {
        if (!isNode(arg) || arg.op !== '.' || !Array.isArray(arg.args)) return undefined;
        const obj = translateCel(arg.args[0]);
        const field = arg.args[1];
        if (!obj || typeof field !== 'string') return undefined;
        return (doc) => {
          const o = obj(doc);
          if (o === ERR || o === FALLBACK) return o;
          return isMap(o) ? Object.hasOwn(o, field) : ERR;
        };
      }
      if (name === 'size') {
        const x = translateCel(arg);
        if (!x) return undefined;
        return (doc) => {
          const v = x(doc);
          if (v === ERR || v === FALLBACK) return v;
          if (typeof v === 'string') return [...v].length;
          if (Array.isArray(v)) return v.length;
          if (isMap(v)) return Object.keys(v).length;
          return ERR;
        };
      }
      return undefined;
    }
    case 'rcall': {
      if (!Array.isArray(args) || !Array.isArray(args[2]) || args[2].length !== 1) return undefined;
      const [name, receiver, [argument]] = args as [string, unknown, unknown[]];
      if (name !== 'startsWith' && name !== 'endsWith' && name !== 'contains') return undefined;
      const r = translateCel(receiver);
      const a = translateCel(argument);
      if (!r || !a) return undefined;
      return binary(r, a, (s, t) => {
        if (typeof s !== 'string' || typeof t !== 'string') return ERR;
        return name === 'startsWith' ? s.startsWith(t) : name === 'endsWith' ? s.endsWith(t) : s.includes(t);
      });
    }
    case '!_': {
      const x = translateCel(args);
      if (!x) return undefined;
      return (doc) => {
        const v = x(doc);
        if (v === ERR || v === FALLBACK) return v;
        return typeof v === 'boolean' ? !v : ERR;
      };
    }
    case '-_': {
      const x = translateCel(args);
      if (!x) return undefined;
      return (doc) => {
        const v = x(doc);
        if (v === ERR || v === FALLBACK) return v;
        return typeof v === 'number' ? -v : ERR;
      };
    }
    case '&&':
    case '||': {
      const [a, b] = pair();
      if (!a || !b) return undefined;
      const decisive = op === '||';
      return (doc) => {
        const x = a(doc);
        if (x === FALLBACK) return FALLBACK;
        if (x === decisive) return decisive;
        const y = b(doc);
        if (y === FALLBACK) return FALLBACK;
        if (y === decisive) return decisive;
        if (typeof x !== 'boolean' || typeof y !== 'boolean') return ERR;
        return !decisive;
      };
    }
    case '==':
    case '!=': {
      const [a, b] = pair();
      if (!a || !b) return undefined;
      // Against a scalar literal (the usual `tool.key == "..."`), compared in place: one call, not three.
      const literal = Array.isArray(args) ? scalarLiteral(args[1]) : undefined;
      if (literal) {
        const [y] = literal;
        const same = op === '==';
        return (doc) => {
          const x = a(doc);
          if (x === ERR || x === FALLBACK) return x;
          return isScalar(x) ? (x === y) === same : FALLBACK;
        };
      }
      return binary(a, b, (x, y) => {
        const eq = equal(x, y);
        if (eq === FALLBACK) return FALLBACK;
        return op === '==' ? eq : !eq;
      });
    }
    case '<':
    case '<=':
    case '>':
    case '>=': {
      const [a, b] = pair();
      if (!a || !b) return undefined;
      return binary(a, b, (x, y) => compare(op, x, y));
    }
    case 'in': {
      const [a, b] = pair();
      if (!a || !b) return undefined;
      return binary(a, b, (x, list) => {
        if (isMap(list)) return typeof x === 'string' ? Object.hasOwn(list, x) : FALLBACK;
        if (!Array.isArray(list)) return ERR;
        for (const item of list) {
          const eq = equal(x, item);
          if (eq === FALLBACK) return FALLBACK;
          if (eq) return true;
        }
        return false;
      });
    }
    case '?:': {
      if (!Array.isArray(args) || args.length !== 3) return undefined;
      const [c, t, f] = args.map(translateCel);
      if (!c || !t || !f) return undefined;
      return (doc) => {
        const v = c(doc);
        if (v === ERR || v === FALLBACK) return v;
        if (typeof v !== 'boolean') return ERR;
        return v ? t(doc) : f(doc);
      };
    }
    default:
      return undefined;
  }
}
