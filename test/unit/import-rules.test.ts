import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult, type IForbiddenRuleType } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';

/**
 * The import rules of .dependency-cruiser.cjs (docs/architecture.md), proved on small trees: each folder
 * of test/fixtures/import-rules/ named after a rule holds one deliberately bad import, which that rule
 * and no other must report; `allowed/` holds every kind of import the rules permit. The repository
 * itself is checked by `make imports`, which `make lint` and `make test` run.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const fixtures = fileURLToPath(new URL('../fixtures/import-rules/', import.meta.url));
const { forbidden } = createRequire(import.meta.url)(`${root}.dependency-cruiser.cjs`) as { forbidden: IForbiddenRuleType[] };

async function violations(tree: string): Promise<{ rule: string; from: string; to: string }[]> {
  const { output } = await cruise(['.'], {
    baseDir: `${fixtures}${tree}`,
    validate: true,
    ruleSet: { forbidden },
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
  });
  return (output as ICruiseResult).summary.violations.map((v) => ({ rule: v.rule.name, from: v.from, to: v.to }));
}

describe('import rules', () => {
  const trees = readdirSync(fixtures).filter((t) => t !== 'allowed');

  it('has one fixture per rule', () => {
    expect(trees.sort()).toEqual(forbidden.map((r) => r.name).sort());
  });

  it.each(trees)('%s reports the bad import of its fixture, and only that rule does', async (tree) => {
    const found = await violations(tree);
    expect(found.length).toBeGreaterThan(0);
    expect(new Set(found.map((v) => v.rule))).toEqual(new Set([tree]));
  });

  it('lets through every import the rules permit', async () => {
    expect(await violations('allowed')).toEqual([]);
  });
});
