import { randomUUID } from 'node:crypto';
import type { Tx } from '../../db/database.js';

/**
 * Built-in sample tools every organisation starts with (docs/registry.md), so the gateway can be tried
 * before any real tool is registered. Their executors are simulated by the gateway.
 */
export const SAMPLE_TOOLS = [
  {
    tool_key: 'payments.create_payment',
    name: 'Create payment',
    description: 'Pays an amount to a payee. Simulated: returns a reference beginning PAY-.',
    privilege_class: 'financial',
    approval_class: 'single',
    idempotent: false,
    input_schema: {
      type: 'object',
      required: ['amount', 'currency', 'payee'],
      properties: { amount: { type: 'number', minimum: 0 }, currency: { type: 'string' }, payee: { type: 'string' } },
    },
  },
  {
    tool_key: 'crm.lookup_customer',
    name: 'Look up customer',
    description: 'Reads a customer record by id. Read-only.',
    privilege_class: 'read',
    approval_class: 'none',
    idempotent: true,
    input_schema: { type: 'object', required: ['customer_id'], properties: { customer_id: { type: 'string' } } },
  },
  {
    tool_key: 'email.send_message',
    name: 'Send email',
    description: 'Sends an email message to a recipient.',
    privilege_class: 'write',
    approval_class: 'none',
    idempotent: false,
    input_schema: {
      type: 'object',
      required: ['to', 'subject'],
      properties: { to: { type: 'string' }, subject: { type: 'string' }, body: { type: 'string' } },
    },
  },
  {
    tool_key: 'storage.delete_object',
    name: 'Delete stored object',
    description: 'Deletes an object from storage permanently.',
    privilege_class: 'destructive',
    approval_class: 'single',
    idempotent: true,
    input_schema: { type: 'object', required: ['path'], properties: { path: { type: 'string' } } },
  },
] as const;

export async function seedSampleTools(tx: Tx, orgId: string, now: Date): Promise<void> {
  await tx
    .insertInto('tools')
    .values(
      SAMPLE_TOOLS.map((t) => ({
        id: randomUUID(),
        org_id: orgId,
        tool_key: t.tool_key,
        name: t.name,
        description: t.description,
        mcp_server_id: null,
        api_resource_id: null,
        data_resource_id: null,
        operations: ['invoke'],
        privilege_class: t.privilege_class,
        approval_class: t.approval_class,
        idempotent: t.idempotent,
        input_schema: JSON.stringify(t.input_schema),
        credential_ref_id: null,
        rate_limit_per_minute: null,
        builtin: true,
        created_at: now,
        updated_at: now,
      })),
    )
    .execute();
}
