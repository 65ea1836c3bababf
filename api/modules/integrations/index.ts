/** The integrations module's public face: the discovery job the worker runs. */
export { abandonDiscovery, DISCOVERY_QUEUE, discoveryJobHandler, onDiscoveryFinished, runDiscovery, type DiscoveryDeps } from './discovery.job.js';
