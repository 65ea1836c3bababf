import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { APPROVAL_CLASS, PRIVILEGE_CLASS } from '../shared/index.js';

/** `GET /gateway/permissions`: the calling agent's containment state and the tools it may invoke. */
export const permissionsOut = z.object({
  agent_id: z.uuid(),
  contained: z.boolean().describe('suspended, revoked or gateway access off: the agent may call nothing'),
  reason_codes: z.array(z.string()).describe('why it is contained (AGENT_SUSPENDED, AGENT_REVOKED, GATEWAY_ACCESS_DISABLED); empty otherwise'),
  operation: z.literal('invoke'),
  tools: z.array(
    z.object({
      tool: z.string().describe('the tool key'),
      privilege_class: z.enum(PRIVILEGE_CLASS),
      approval_class: z.enum(APPROVAL_CLASS),
      mcp_server_id: z.uuid().nullable(),
      constrained: z.boolean().describe("a binding allows the tool for some arguments only (its constraints)"),
    }),
  ),
  registry_version: z.string(),
  evaluated_at: timestamp,
});
