/** The inventory module's public face: MCP servers, models, resources, credentials and tools. */
export { toolDefinitionHash, type ToolDefinition } from './definition-hash.js';
export { recordExists } from './inventory.repository.js';
export { TOOL_KEY } from './inventory.schemas.js';
export { seedSampleTools } from './sample-tools.js';
