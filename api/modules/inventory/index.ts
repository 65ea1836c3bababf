/** The inventory module's public face: MCP servers, models, resources, credentials and tools. */
export { recordExists } from './inventory.repository.js';
export { seedSampleTools } from './sample-tools.js';
