/**
 * The telemetry event types: the one list of their names, how each one's severity is decided, what its
 * attributes hold, and the builders the writers call. docs/telemetry.md and the OpenAPI descriptions are
 * written from it (`CATALOGUE`); test/api/telemetry.test.ts checks that every type is written by its real
 * writer.
 */

/** Severities, lowest first: `info` for routine events, then the findings' scale. */
export const TELEMETRY_SEVERITY = ['info', 'low', 'medium', 'high', 'critical'] as const;
export type TelemetrySeverity = (typeof TELEMETRY_SEVERITY)[number];

/** The outcomes of a gateway decision, as stats count them. */
export const DECISION_OUTCOMES = ['allow', 'deny', 'require_approval'] as const;
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number];

/** One event as a writer hands it over; the repository adds the organisation and, unless given, an id. */
export interface TelemetryEvent {
  /** The event's id when it has one already (a decision's event is its action's id). */
  id?: string;
  eventType: TelemetryEventType;
  severity: TelemetrySeverity;
  occurredAt: Date;
  agentId: string | null;
  correlationId: string;
  summary: string;
  attributes: Record<string, unknown>;
}

interface TypeEntry {
  /** Who writes it and when. */
  writtenBy: string;
  /** How its severity is decided. */
  severity: string;
  /** Its attributes, name → meaning. */
  attributes: Record<string, string>;
}

/** Deny reasons that point at an attack, a leak or a contained agent still acting: a deny with one is `high`. */
export const HIGH_SEVERITY_DENY_REASONS: ReadonlySet<string> = new Set([
  'SECRET_DETECTED',
  'UNTRUSTED_MCP_PRIVILEGED_TOOL',
  'TOOL_DEFINITION_CHANGED',
  'PRIVILEGE_CLASS_DENIED',
  'AGENT_SUSPENDED',
  'AGENT_REVOKED',
]);

export const CATALOGUE = {
  'gateway.decision': {
    writtenBy:
      'the gateway, for every decision it makes (POST /actions, POST /actions/console, and the decision again when an ' +
      'approved action is resubmitted with its token). A first decision is its action row, read as the event (the event ' +
      "id is the action's id); the decision on resubmission is a row of its own, written with the redemption's " +
      'evidence. A replay under the same Idempotency-Key is not a new decision and adds none',
    severity:
      `allow: info; require_approval: low; deny: medium, or high when a reason code is one of ${[...HIGH_SEVERITY_DENY_REASONS].join(', ')}`,
    attributes: {
      action_id: 'the action request',
      tool: 'the tool key submitted',
      operation: 'the operation submitted',
      decision: 'allow, deny or require_approval',
      reason_codes: 'every reason code of the decision',
      latency_ms:
        "milliseconds from the submission entering the gateway's group commit to its decision: the wait for its batch, the " +
        "batch's probe and the decision itself (the commit that follows, which records the decision, is not included)",
      source: 'gateway (an agent) or console (a person, POST /actions/console)',
      redeemed: 'true when this is the decision on resubmission with an approval token',
    },
  },
  'identity.token_issued': {
    writtenBy: 'POST /identities/token, when client credentials are exchanged for an agent token',
    severity: 'info',
    attributes: { identity_id: 'the workload identity', client_id: 'its client ID (public, not the secret)' },
  },
  'identity.token_refused': {
    writtenBy:
      'POST /identities/token, when a known client ID is refused; written once the answer is on its way, so a refusal ' +
      'takes as long as one for an unknown client ID (which belongs to no organisation and is not recorded)',
    severity: 'wrong_secret: medium; identity_revoked, agent_suspended, agent_revoked: high',
    attributes: {
      identity_id: 'the workload identity',
      client_id: 'its client ID',
      reason: 'wrong_secret, identity_revoked, agent_suspended or agent_revoked',
      error_code: 'the error code answered (invalid_client, identity_revoked, session_revoked)',
    },
  },
  'agent.containment': {
    writtenBy:
      'the containment operations on an agent (suspend, restore, revoke, revoke-sessions, gateway-access) and the ' +
      'deny-class rules (POST /actions/deny-class and its lift), in their transaction',
    severity:
      'revoke: critical; suspend: high; revoke_sessions, gateway access off, deny_class: medium; restore, gateway access on, ' +
      'deny_class_lifted: low',
    attributes: {
      action: 'suspend, restore, revoke, revoke_sessions, gateway_access, deny_class or deny_class_lifted',
      reason: 'the reason given',
      actor_id: 'the person (or service account) who did it',
      status: 'for an agent: {from, to}',
      gateway_access: 'for gateway_access: {from, to}',
      approvals_cancelled: 'for suspend and revoke: how many pending approvals were cancelled',
      rule_id: 'for deny-class rules: the rule',
      privilege_class: 'for deny_class: the class denied',
    },
  },
  'discovery.run': {
    writtenBy: 'a discovery run when it ends (succeeded or failed, the dead-letter path included), in the transaction that finishes it',
    severity: 'succeeded: info, or low when it opened findings; failed: medium',
    attributes: {
      run_id: 'the run',
      integration_id: 'its integration',
      adapter: 'the adapter key, e.g. mock.mcp',
      status: 'succeeded or failed',
      counters: 'what it added and changed (the run counters)',
      error_message: 'why it failed, else null',
    },
  },
  'mcp_server.trust_changed': {
    writtenBy:
      "PATCH of an MCP server's trust state by a person, and discovery demoting an approved server whose tool set changed",
    severity: 'to quarantined: high; to unsigned or unknown: medium; to approved: low',
    attributes: {
      mcp_server_id: 'the MCP server',
      trust_state: '{from, to}',
      reason: 'the reason given (discovery: its tool set changed)',
      source: 'person or discovery',
      run_id: 'for discovery: the run',
    },
  },
  'policy.published': {
    writtenBy: 'POST /policies/{id}/versions/{number}/publish, in its transaction',
    severity: 'low',
    attributes: {
      policy_id: 'the policy',
      key: 'its key',
      number: 'the version published',
      previous_published_version: 'the version in force before, or null',
      actor_id: 'the publisher',
    },
  },
} as const satisfies Record<string, TypeEntry>;

export type TelemetryEventType = keyof typeof CATALOGUE;
export const TELEMETRY_EVENT_TYPES = Object.keys(CATALOGUE) as TelemetryEventType[];

/** The longest summary; a longer one is cut to SUMMARY_MAX - 1 characters and an ellipsis. */
export const SUMMARY_MAX = 500;
const clip = (s: string) => (s.length > SUMMARY_MAX ? `${s.slice(0, SUMMARY_MAX - 1)}…` : s);

function event(
  eventType: TelemetryEventType,
  severity: TelemetrySeverity,
  at: Date,
  agentId: string | null,
  correlationId: string,
  summary: string,
  attributes: Record<string, unknown>,
): TelemetryEvent {
  return { eventType, severity, occurredAt: at, agentId, correlationId, summary: clip(summary), attributes };
}

export function decisionSeverity(decision: string, reasonCodes: readonly string[]): TelemetrySeverity {
  if (decision === 'allow') return 'info';
  if (decision === 'require_approval') return 'low';
  return reasonCodes.some((r) => HIGH_SEVERITY_DENY_REASONS.has(r)) ? 'high' : 'medium';
}

type Containment = 'suspend' | 'restore' | 'revoke' | 'revoke_sessions' | 'gateway_access' | 'deny_class' | 'deny_class_lifted';

function containmentSeverity(action: Containment, gatewayAccessTo: boolean | undefined): TelemetrySeverity {
  switch (action) {
    case 'revoke':
      return 'critical';
    case 'suspend':
      return 'high';
    case 'revoke_sessions':
    case 'deny_class':
      return 'medium';
    case 'gateway_access':
      return gatewayAccessTo === false ? 'medium' : 'low';
    case 'restore':
    case 'deny_class_lifted':
      return 'low';
  }
}

const TRUST_SEVERITY: Record<string, TelemetrySeverity> = { quarantined: 'high', unsigned: 'medium', unknown: 'medium', approved: 'low' };

/** The builders, one per type: what each writer calls. */
export const telemetryEvents = {
  decision(e: {
    at: Date;
    agentId: string;
    correlationId: string;
    actionId: string;
    tool: string;
    operation: string;
    decision: string;
    reasonCodes: string[];
    latencyMs: number;
    source: string;
    redeemed: boolean;
  }): TelemetryEvent {
    const reasons = e.reasonCodes.length > 0 ? `: ${e.reasonCodes.join(', ')}` : '';
    return event(
      'gateway.decision',
      decisionSeverity(e.decision, e.reasonCodes),
      e.at,
      e.agentId,
      e.correlationId,
      `${e.decision} ${e.tool} (${e.operation})${e.redeemed ? ' after approval' : ''}${reasons}`,
      {
        action_id: e.actionId,
        tool: e.tool,
        operation: e.operation,
        decision: e.decision,
        reason_codes: e.reasonCodes,
        latency_ms: Math.round(e.latencyMs * 1000) / 1000,
        source: e.source,
        redeemed: e.redeemed,
      },
    );
  },

  tokenIssued(e: { at: Date; agentId: string; identityId: string; clientId: string; correlationId: string }): TelemetryEvent {
    return event('identity.token_issued', 'info', e.at, e.agentId, e.correlationId, `agent token issued to client ${e.clientId}`, {
      identity_id: e.identityId,
      client_id: e.clientId,
    });
  },

  tokenRefused(e: {
    at: Date;
    agentId: string;
    identityId: string;
    clientId: string;
    correlationId: string;
    reason: 'wrong_secret' | 'identity_revoked' | 'agent_suspended' | 'agent_revoked';
    errorCode: string;
  }): TelemetryEvent {
    const words = { wrong_secret: 'wrong client secret', identity_revoked: 'identity revoked', agent_suspended: 'agent suspended', agent_revoked: 'agent revoked' };
    return event(
      'identity.token_refused',
      e.reason === 'wrong_secret' ? 'medium' : 'high',
      e.at,
      e.agentId,
      e.correlationId,
      `agent token refused to client ${e.clientId}: ${words[e.reason]}`,
      { identity_id: e.identityId, client_id: e.clientId, reason: e.reason, error_code: e.errorCode },
    );
  },

  containment(e: {
    at: Date;
    agentId: string | null;
    correlationId: string;
    action: Containment;
    reason: string;
    actorId: string | null;
    /** What the action changed (status, gateway access, approvals cancelled, the rule). */
    details: Record<string, unknown>;
    /** The agent's name, or for deny-class rules what they cover. */
    subject: string;
  }): TelemetryEvent {
    const gatewayTo = (e.details.gateway_access as { to?: boolean } | undefined)?.to;
    const verb = e.action === 'gateway_access' ? `gateway access ${gatewayTo === false ? 'off' : 'on'}` : e.action.replaceAll('_', ' ');
    return event(
      'agent.containment',
      containmentSeverity(e.action, gatewayTo),
      e.at,
      e.agentId,
      e.correlationId,
      `${verb}: ${e.subject} (${e.reason})`,
      { action: e.action, reason: e.reason, actor_id: e.actorId, ...e.details },
    );
  },

  discoveryRun(e: {
    at: Date;
    correlationId: string;
    runId: string;
    integrationId: string;
    adapter: string;
    status: 'succeeded' | 'failed';
    counters: Record<string, number>;
    errorMessage: string | null;
  }): TelemetryEvent {
    const opened = Number(e.counters.findings_opened ?? 0);
    const severity: TelemetrySeverity = e.status === 'failed' ? 'medium' : opened > 0 ? 'low' : 'info';
    const added = Object.entries(e.counters)
      .filter(([, n]) => Number(n) > 0)
      .map(([k, n]) => `${k.replaceAll('_', ' ')} ${n}`)
      .join(', ');
    const summary =
      e.status === 'failed' ? `discovery run failed on ${e.adapter}: ${e.errorMessage ?? ''}` : `discovery run succeeded on ${e.adapter}${added ? `: ${added}` : ''}`;
    return event('discovery.run', severity, e.at, null, e.correlationId, summary, {
      run_id: e.runId,
      integration_id: e.integrationId,
      adapter: e.adapter,
      status: e.status,
      counters: e.counters,
      error_message: e.errorMessage,
    });
  },

  trustChanged(e: {
    at: Date;
    correlationId: string;
    mcpServerId: string;
    serverName: string;
    from: string;
    to: string;
    reason: string;
    source: 'person' | 'discovery';
    runId?: string;
  }): TelemetryEvent {
    return event(
      'mcp_server.trust_changed',
      TRUST_SEVERITY[e.to] ?? 'medium',
      e.at,
      null,
      e.correlationId,
      `MCP server ${e.serverName} trust ${e.from} → ${e.to} (${e.reason})`,
      {
        mcp_server_id: e.mcpServerId,
        trust_state: { from: e.from, to: e.to },
        reason: e.reason,
        source: e.source,
        ...(e.runId ? { run_id: e.runId } : {}),
      },
    );
  },

  policyPublished(e: {
    at: Date;
    correlationId: string;
    policyId: string;
    key: string;
    number: number;
    previous: number | null;
    actorId: string;
  }): TelemetryEvent {
    return event('policy.published', 'low', e.at, null, e.correlationId, `policy ${e.key} version ${e.number} published`, {
      policy_id: e.policyId,
      key: e.key,
      number: e.number,
      previous_published_version: e.previous,
      actor_id: e.actorId,
    });
  },
};

/** The catalogue as text for an OpenAPI description: each type, its writer and its severity rule. */
export function catalogueDescription(): string {
  return Object.entries(CATALOGUE)
    .map(([type, t]) => `\`${type}\`: ${t.writtenBy}. Severity: ${t.severity}. Attributes: ${Object.keys(t.attributes).join(', ')}.`)
    .join(' ');
}
