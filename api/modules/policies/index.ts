/**
 * The policies module's public face: the rule schemas that policies, their Kubernetes kind and the
 * decision cases are written in. Decisions read published policies through the gateway's snapshots.
 */
export { policyIn, rule } from './policies.schemas.js';
