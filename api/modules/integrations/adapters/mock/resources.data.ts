import type { DiscoveredResource } from '../contract.js';

/**
 * The data stores and APIs of Aldergrove Mutual, the fictional insurer the mocks describe: what the mock MCP
 * servers' tools touch and what the mock code host's agents are granted. Names are what reconciliation
 * matches resources on.
 */
export const MOCK_RESOURCES: readonly DiscoveredResource[] = [
  { name: 'Customer records', kind: 'data', system: 'CRM', classification: 'personal', contains_personal_data: true, base_url: null },
  { name: 'Claims archive', kind: 'data', system: 'Claims platform', classification: 'personal', contains_personal_data: true, base_url: null },
  { name: 'Payments ledger', kind: 'data', system: 'Core banking', classification: 'regulated', contains_personal_data: true, base_url: null },
  { name: 'Analytics warehouse', kind: 'data', system: 'Data platform', classification: 'confidential', contains_personal_data: false, base_url: null },
  { name: 'Policy documents', kind: 'data', system: 'Document store', classification: 'internal', contains_personal_data: false, base_url: null },
  { name: 'HR records', kind: 'data', system: 'HR suite', classification: 'personal', contains_personal_data: true, base_url: null },
  { name: 'Shared workspace', kind: 'data', system: 'File vault', classification: 'internal', contains_personal_data: false, base_url: null },
  { name: 'Marketing assets', kind: 'data', system: 'Content hub', classification: 'public', contains_personal_data: false, base_url: null },
  { name: 'Payments API', kind: 'api', system: 'Payments gateway', classification: 'regulated', contains_personal_data: true, base_url: 'https://api.payments.example.com/v2' },
  { name: 'Directory API', kind: 'api', system: 'Corporate directory', classification: 'confidential', contains_personal_data: true, base_url: 'https://directory.example.com/api' },
  { name: 'CRM API', kind: 'api', system: 'CRM', classification: 'personal', contains_personal_data: true, base_url: 'https://crm.example.com/api/v1' },
  { name: 'Email relay API', kind: 'api', system: 'Messaging', classification: 'internal', contains_personal_data: false, base_url: 'https://mail.example.com/api' },
];
