/**
 * Condition operators of policy rules. Comparisons of mismatched types are false, never an error:
 * a rule about amounts does not match an action without one.
 */
export const OPERATORS: Record<string, (actual: unknown, expected: unknown) => boolean> = {
  eq: (a, e) => a === e,
  neq: (a, e) => a !== e,
  in: (a, e) => Array.isArray(e) && e.includes(a),
  not_in: (a, e) => Array.isArray(e) && !e.includes(a),
  gt: (a, e) => typeof a === 'number' && typeof e === 'number' && a > e,
  gte: (a, e) => typeof a === 'number' && typeof e === 'number' && a >= e,
  lt: (a, e) => typeof a === 'number' && typeof e === 'number' && a < e,
  lte: (a, e) => typeof a === 'number' && typeof e === 'number' && a <= e,
  contains: (a, e) => (typeof a === 'string' && typeof e === 'string' ? a.includes(e) : Array.isArray(a) && a.includes(e)),
  starts_with: (a, e) => typeof a === 'string' && typeof e === 'string' && a.startsWith(e),
  exists: (a, e) => (e === false ? a === undefined || a === null : a !== undefined && a !== null),
};

/** `*` matches any run of characters; everything else matches itself. */
export function globMatch(pattern: string, value: string): boolean {
  const re = new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
  return re.test(value);
}
