import { z } from 'zod';

/**
 * The spec's shared enumerations (behaviour.md, "Shared enumerations"), one source for the API's
 * validation, its OpenAPI document and, later, the CRDs.
 */
export const CLASSIFICATION = ['public', 'internal', 'confidential', 'personal', 'regulated', 'restricted'] as const;
export const ENVIRONMENT = ['production', 'staging', 'development'] as const;
export const CRITICALITY = ['low', 'medium', 'high', 'critical'] as const;
export const INTERNET_EXPOSURE = ['none', 'controlled', 'public'] as const;
export const CODE_EXECUTION = ['none', 'sandboxed', 'privileged'] as const;
export const PERSISTENT_MEMORY = ['none', 'bounded', 'unbounded'] as const;
export const HUMAN_APPROVAL_COVERAGE = ['strong', 'partial', 'none'] as const;
export const PRIVILEGE_CLASS = ['read', 'write', 'destructive', 'financial', 'admin'] as const;
export const PRIVILEGED_CLASSES = ['write', 'destructive', 'financial', 'admin'] as const;
export const APPROVAL_CLASS = ['none', 'single', 'dual'] as const;
export const OWNER_TYPE = ['accountable', 'technical', 'business'] as const;
export const MCP_TRANSPORT = ['streamable_http', 'sse', 'stdio'] as const;
export const MCP_TRUST_STATE = ['approved', 'unknown', 'unsigned', 'quarantined'] as const;
export const MODEL_HOSTING = ['saas', 'private', 'customer_hosted'] as const;
export const DATA_RESOURCE_KIND = ['database', 'bucket', 'saas', 'dataset', 'document_store'] as const;
export const CREDENTIAL_PROVIDER = [
  'vault',
  'cloud_a_secrets_manager',
  'cloud_b_key_vault',
  'cloud_c_secret_manager',
  'env',
  'mock',
] as const;
export const CREDENTIAL_TYPE = ['api_key', 'oauth_client', 'token'] as const;

// Tollgate's own choices where the spec leaves the values open (docs/registry.md).
export const AGENT_STATUS = ['active', 'suspended', 'revoked'] as const;
export const AGENT_SOURCE = ['manual', 'discovery', 'kubernetes'] as const;
export const RISK_BAND = ['low', 'medium', 'high', 'critical'] as const;
export const MCP_AUTH_TYPE = ['oauth', 'api_key', 'mtls', 'none'] as const;
export const API_AUTH_TYPE = ['oauth_client_credentials', 'api_key', 'mtls', 'basic', 'none'] as const;
export const DATA_POLICY = ['unknown', 'no_training', 'zero_retention', 'training_allowed'] as const;
export const PRINCIPAL_TYPE = ['user', 'group', 'service'] as const;
export const TARGET_KIND = ['tool', 'mcp_server', 'api_resource', 'data_resource'] as const;

export const enumOf = <T extends readonly [string, ...string[]]>(values: T) => z.enum(values);
