/** The agents module's public face: the registry's agents, their bindings and delegations. */
export { agentUri, countAgents } from './agents.repository.js';
export { agentParams } from './agents.schemas.js';
export { pinUnpinnedBindings } from './bindings.repository.js';
export { agentOr404, agentWithOwners } from './agents.service.js';
