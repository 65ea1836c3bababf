import { randomUUID } from 'node:crypto';
import { ApiError, type ValidationDetail } from '../../platform/errors.js';
import { actionIn, type ActionIn } from './actions.schemas.js';
import { detailsOf, malformed } from '../../platform/malformed.js';
import { submitterOf, type Asker, type Submissions } from './authzen.service.js';
import {
  ACTION_IDS_HEADER,
  DECISION_HEADER,
  META_APPROVAL_TOKEN,
  META_IDEMPOTENCY_KEY,
  REASON_CODES_HEADER,
  toolsCallParams,
  type CallDecision,
  type CheckOut,
  type RpcMessage,
} from './ext-authz.schemas.js';

/** What the proxy forwarded of the agent's MCP request. */
export interface McpCheck {
  /** The MCP server's tool prefix, from the check's path. */
  prefix: string;
  /** The Tollgate-Session header, if the agent sent one. */
  session: string | undefined;
  /** Whether the proxy says it cut the body (x-envoy-auth-partial-body: true). */
  partial: boolean;
  body: RpcMessage | RpcMessage[] | null | undefined;
}

/** The check's answer when every tools/call is allowed, and the headers that go with it. */
export interface Allowed {
  out: CheckOut;
  headers: Record<string, string>;
}

/** A tools/call of the request mapped onto POST /actions' body, as the sidecar's MCP proxy submits it. */
interface Call {
  id: string | number | null;
  body: ActionIn;
  /** The key the agent named in `_meta`, if any. */
  key: string | undefined;
}

/**
 * Maps each `tools/call` of the messages onto POST /actions' body exactly as the sidecar's MCP proxy does
 * (sidecar/mcp-proxy.ts): tool `<prefix>.<name>`, operation `invoke`, target `mcp://<prefix>/<name>`,
 * parameters the call's arguments. A tools/call without an id (sent as a notification) is decided too: a
 * server that ran it anyway must not run it undecided. Any malformed call refuses the whole request.
 */
function callsOf(prefix: string, messages: RpcMessage[], batch: boolean): Call[] {
  const invalid: ValidationDetail[] = [];
  const calls: Call[] = [];
  messages.forEach((m, i) => {
    if (m.method !== 'tools/call') return;
    const at = batch ? `${i}.params.` : 'params.';
    const params = toolsCallParams.safeParse(m.params ?? {});
    if (!params.success) {
      invalid.push(...detailsOf(params.error, at));
      return;
    }
    const { name, arguments: args, _meta: meta } = params.data;
    const body = actionIn.safeParse({
      tool: `${prefix}.${name}`,
      operation: 'invoke',
      target: `mcp://${prefix}/${name}`,
      parameters: args ?? {},
      approval_token: meta?.[META_APPROVAL_TOKEN],
    });
    if (!body.success) {
      invalid.push(...detailsOf(body.error, at, (p) => (p.startsWith('parameters') ? p.replace(/^parameters/, 'arguments') : 'name')));
      return;
    }
    calls.push({ id: m.id ?? null, body: body.data, key: meta?.[META_IDEMPOTENCY_KEY] });
  });
  if (invalid.length > 0) throw malformed(invalid);
  return calls;
}

const describe = (d: CallDecision) =>
  d.replayed && d.decision === 'allow'
    ? `${d.tool}: allowed once already under idempotency key ${d.idempotency_key} (a replay never passes again)`
    : `${d.tool}: ${d.decision} (${d.reason_codes.join(', ')})`;

/**
 * The MCP external-authorisation check: every `tools/call` of the JSON-RPC message (or batch) the agent
 * sent is a gateway decision through the app's one SubmissionService, recorded as POST /actions records
 * it, each under a fresh idempotency key or the one its `_meta` names (with an approval token there, an
 * approved call is redeemed as POST /actions redeems it). Answers when every call is allowed afresh,
 * including when there is none (initialize, tools/list, notifications, responses need no decision); otherwise throws 403
 * `forbidden` with every decision in the details and the headers a proxy can pass to the client. The
 * calls of a batch are decided together, so a batch with one refused call is refused whole while the
 * others stay recorded as allowed but are never forwarded.
 */
export async function checkMcp(submissions: Submissions, asker: Asker, check: McpCheck): Promise<Allowed> {
  if (check.body === null || check.body === undefined) {
    throw malformed([
      {
        field: 'body',
        message: 'no body: the proxy must include the request body (Envoy: with_request_body; agentgateway: includeRequestBody) and its Content-Type',
      },
    ]);
  }
  if (check.partial) {
    throw malformed([
      { field: 'header.x-envoy-auth-partial-body', message: "the body was cut at the proxy's max_request_bytes: a partial message cannot be decided" },
    ]);
  }
  const batch = Array.isArray(check.body);
  const calls = callsOf(check.prefix, batch ? (check.body as RpcMessage[]) : [check.body as RpcMessage], batch);
  const who = submitterOf(asker, check.session);
  const decisions: CallDecision[] = await Promise.all(
    calls.map(async (call) => {
      // A fresh key per call unless the agent names one: a JSON-RPC id repeats across connections and
      // Mcp-Session-Id is what the client presents, so a derived key could replay an earlier allow for a
      // new call (docs/integrations.md).
      const out = await submissions.submit(who, call.key ?? `ext-authz-${randomUUID()}`, call.body);
      return {
        id: call.id,
        tool: call.body.tool,
        decision: out.decision.decision,
        reason_codes: out.decision.reason_codes,
        action: out.action,
        approval: out.approval,
        idempotency_key: out.idempotency_key,
        replayed: out.replayed,
      };
    }),
  );
  // A replay is an answer to a call already decided: the proxy would forward the call again, so even a
  // replayed allow (the same approved payment sent twice) refuses.
  const refused = decisions.filter((d) => d.decision !== 'allow' || d.replayed);
  const actionIds = decisions.map((d) => d.action.id).join(',');
  if (refused.length === 0) {
    return { out: { decision: 'allow', decisions }, headers: { [DECISION_HEADER]: 'allow', ...(actionIds ? { [ACTION_IDS_HEADER]: actionIds } : {}) } };
  }
  // The strongest refusal names the whole request: a deny anywhere wins over an approval to wait for.
  const decision = refused.some((d) => d.decision !== 'require_approval') ? 'deny' : 'require_approval';
  // A replayed allow's codes (PERMISSION_GRANTED) would read as a grant: only the refusals' own codes.
  const codes = [...new Set(refused.filter((d) => d.decision !== 'allow').flatMap((d) => d.reason_codes))];
  throw new ApiError('forbidden', `Tollgate did not allow this MCP request: ${refused.map(describe).join('; ')}.`, { decision, decisions }, {
    [DECISION_HEADER]: decision,
    [REASON_CODES_HEADER]: codes.join(','),
    [ACTION_IDS_HEADER]: actionIds,
  });
}
