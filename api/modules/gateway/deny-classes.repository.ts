import type { Insertable, Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { DenyClassRulesTable } from '../../db/schema.js';
import { iso } from '../../platform/schemas.js';
import type { PRIVILEGE_CLASS } from '../shared/index.js';

export type DenyClassRuleRow = Selectable<DenyClassRulesTable>;

export function insertDenyClassRule(tx: Tx, rule: Insertable<DenyClassRulesTable>): Promise<DenyClassRuleRow> {
  return tx.insertInto('deny_class_rules').values(rule).returningAll().executeTakeFirstOrThrow();
}

export function lockDenyClassRule(tx: Tx, orgId: string, id: string): Promise<DenyClassRuleRow | undefined> {
  return tx.selectFrom('deny_class_rules').selectAll().where('org_id', '=', orgId).where('id', '=', id).forUpdate().executeTakeFirst();
}

export function liftDenyClassRule(tx: Tx, id: string, lift: { lifted_at: Date; lifted_by: string; lift_reason: string }): Promise<DenyClassRuleRow> {
  return tx.updateTable('deny_class_rules').set(lift).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export const toDenyClass = (r: DenyClassRuleRow) => ({
  rule_id: r.id,
  privilege_class: r.privilege_class as (typeof PRIVILEGE_CLASS)[number],
  agent_id: r.agent_id,
  reason: r.reason,
  created_at: iso(r.created_at),
  lifted_at: r.lifted_at ? iso(r.lifted_at) : null,
});
