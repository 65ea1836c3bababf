import { z } from 'zod';
import { actionIn, approvalSummary, IDEMPOTENCY_KEY, SESSION_ID, STATES } from './actions.schemas.js';

/**
 * The MCP external-authorisation check (docs/integrations.md, "Envoy and agentgateway: the HTTP
 * ext_authz check"): what an HTTP ext_authz client (Envoy's `http_service`, agentgateway's
 * `protocol.http`) sends for an MCP streamable-HTTP request, and what Tollgate answers.
 */

/**
 * Where the check lives under /api/v1. The proxy prepends `<EXT_AUTHZ_MCP_PATH>/<prefix>` to the
 * original request's path (Envoy's `path_prefix`, agentgateway's `path` expression), so whatever the
 * upstream MCP path is (`/mcp`, `/`, `/v1/mcp?x=1`) it lands on the wildcard.
 */
export const EXT_AUTHZ_MCP_PATH = '/access/v1/ext-authz/mcp';

/** At most this many messages in one JSON-RPC batch: each tools/call in it is a gateway decision of its own. */
export const MAX_BATCH = 50;

/** The tool prefix: the registry's tools are `<prefix>.<name>`, their target `mcp://<prefix>/<name>` (as the sidecar's MCP proxy names them). */
export const TOOL_PREFIX = /^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/;

export const checkParams = z.object({
  prefix: z
    .string()
    .regex(TOOL_PREFIX, '1-100 characters of A-Z a-z 0-9 _ -, starting with a letter or digit')
    .describe('The MCP server\'s tool prefix: its tools are decided as `<prefix>.<tool name>`, target `mcp://<prefix>/<tool name>`'),
  '*': z.string().describe('The original request\'s path (and query), as the proxy appends it; not read'),
});

export const checkHeaders = z.object({
  'tollgate-session': z
    .string()
    .regex(SESSION_ID, '1-200 characters of A-Z a-z 0-9 . _ : -')
    .optional()
    .describe("The agent's session for flow rules, as POST /actions takes it; without it the session is the access token's lifetime"),
  'x-envoy-auth-partial-body': z
    .enum(['true', 'false'])
    .optional()
    .describe('Set by Envoy and agentgateway when they include the body; `true` (a body cut at max_request_bytes) is refused: a partial call cannot be decided'),
});

/** One JSON-RPC 2.0 message as MCP sends it: a request, a notification (no id) or a response to the server. */
const rpcMessage = z
  .object({
    jsonrpc: z.literal('2.0'),
    id: z.union([z.string(), z.number(), z.null()]).optional(),
    method: z.string().min(1).max(200).optional(),
    // MCP's params are objects; `tools/call`'s are checked where it is decided.
    params: z.record(z.string(), z.unknown()).optional(),
    result: z.unknown().optional(),
    error: z.unknown().optional(),
  })
  .refine((m) => m.method !== undefined || m.result !== undefined || m.error !== undefined, {
    message: 'neither a request or notification (method) nor a response (result or error)',
  });
export type RpcMessage = z.output<typeof rpcMessage>;

export const checkBody = z
  .union([rpcMessage, z.array(rpcMessage).min(1).max(MAX_BATCH)])
  .describe(`The JSON-RPC message the agent sent to the MCP server, or a batch of up to ${MAX_BATCH}, as the proxy forwards it (Envoy: with_request_body)`);

/**
 * The `_meta` keys Tollgate reads in a tools/call (MCP's own place for metadata beside a request's params,
 * named with a prefix as MCP asks): the idempotency key a call is decided under and, to run a call whose
 * approval was granted, that approval's token, as POST /actions takes them in its header and body.
 */
export const META_IDEMPOTENCY_KEY = 'tollgate.dev/idempotency_key';
export const META_APPROVAL_TOKEN = 'tollgate.dev/approval_token';

/** A tools/call's params: the tool's name, its arguments (an object, optional) and the `_meta` keys Tollgate reads. */
export const toolsCallParams = z.object({
  name: z.string().min(1).max(200).regex(/^\S+$/, 'a tool name without whitespace'),
  arguments: z.record(z.string(), z.unknown()).optional(),
  _meta: z
    .object({
      [META_IDEMPOTENCY_KEY]: z.string().regex(IDEMPOTENCY_KEY, '8-200 characters of A-Z a-z 0-9 . _ : -').optional(),
      [META_APPROVAL_TOKEN]: actionIn.shape.approval_token,
    })
    .refine((m) => m[META_APPROVAL_TOKEN] === undefined || m[META_IDEMPOTENCY_KEY] !== undefined, {
      message: `an approval token is redeemed under the idempotency key of the call it approved: send ${META_IDEMPOTENCY_KEY} too`,
      path: [META_APPROVAL_TOKEN],
    })
    .optional(),
});

/** One tools/call of the request and Tollgate's decision on it. */
const callDecision = z.object({
  id: z.union([z.string(), z.number(), z.null()]).describe('The JSON-RPC id of the tools/call (null for a notification)'),
  tool: z.string().describe('The tool decided: `<prefix>.<name>`'),
  decision: z.enum(['allow', 'deny', 'require_approval']),
  reason_codes: z.array(z.string()),
  action: z.object({ id: z.uuid(), status: z.enum(STATES) }).describe('The recorded action: GET /actions/{id}, GET /actions/gateway/{id}'),
  approval: approvalSummary.nullable().describe('For require_approval: the approval opened'),
  idempotency_key: z.string().describe(`The key it was decided under: send it again in _meta["${META_IDEMPOTENCY_KEY}"] with the approval token to run an approved call`),
  replayed: z.boolean().describe('An earlier decision under the same key, answered again: never allowed a second time'),
});
export type CallDecision = z.infer<typeof callDecision>;

export const checkOut = z.object({
  decision: z.literal('allow').describe('Only an allowed check answers 200; any other answers 403 with the decisions in `error.details`'),
  decisions: z.array(callDecision).describe('One per tools/call of the request, in order; empty when it held none'),
});
export type CheckOut = z.infer<typeof checkOut>;

/** The response headers a proxy can pass on: to the client on a denial (Envoy: allowed_client_headers), upstream on an allow. */
export const DECISION_HEADER = 'tollgate-decision';
export const REASON_CODES_HEADER = 'tollgate-reason-codes';
export const ACTION_IDS_HEADER = 'tollgate-action-ids';
