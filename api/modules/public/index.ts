/**
 * The public module's public face: the website's forms (leads, quote requests) and pricing are HTTP operations
 * only (public.routes.ts, registered by api/routes.ts); what they keep is read by the operator's staff through
 * the same routes. It offers other modules the retention and the pricing data, for the docs and tests.
 */
export { EXPORT_MAX_ROWS, SUBMISSION_RETENTION_DAYS, clientAddressHash } from './public.service.js';
export { loadPricing, PRICING } from './pricing.js';
