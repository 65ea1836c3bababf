/**
 * The Tollgate gateway client: `import { GatewayClient } from 'tollgate/client'` (docs/client.md).
 * Used by `tollgate sidecar` and by agents that talk to the gateway directly.
 */
export {
  GatewayClient,
  DEFAULTS,
  newIdempotencyKey,
  SESSION_ID,
  type AuthoriseOptions,
  type CallOptions,
  type GatewayClientOptions,
  type GatewayClientSettings,
  type SubmitOptions,
} from './gateway-client.js';
export {
  ActionDeniedError,
  ApprovalNotGrantedError,
  ApprovalTimeoutError,
  AuthenticationError,
  GatewayApiError,
  GatewayClientError,
} from './errors.js';
export type { ActionRequest, ActionResult, ActionState, AgentPermissions, Decision, GatewayActionStatus, SubmissionBody } from './result.js';
export type { ClientCredentials, CredentialsSource } from './tokens.js';
export type { Clock } from '../lib/clock.js';
