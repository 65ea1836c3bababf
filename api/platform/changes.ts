export type Changes = Record<string, { from: unknown; to: unknown }>;

/**
 * What a patch changes: the fields of `patch` that are set (not undefined or null, which the spec's
 * PATCH bodies use for "leave as is") and differ from `before`. Audit entries record exactly this.
 */
export function changesOf<T extends Record<string, unknown>>(before: T, patch: Partial<{ [K in keyof T]: T[K] | null }>): Changes {
  const changes: Changes = {};
  for (const [key, to] of Object.entries(patch)) {
    if (to === undefined || to === null) continue;
    const from = before[key];
    if (JSON.stringify(from) !== JSON.stringify(to)) changes[key] = { from, to };
  }
  return changes;
}

/** The values a patch sets, for an UPDATE. */
export function valuesOf(changes: Changes): Record<string, unknown> {
  return Object.fromEntries(Object.entries(changes).map(([k, v]) => [k, v.to]));
}
