/** The identities module's public face: workload identities, their secrets and tokens. */
export { afterAnswer, hashSecret, UNKNOWN_CLIENT_HASH, verifySecret, type AfterAnswer } from './secrets.js';
export { RevocationCache } from './revocation.js';
export { TokenService } from './tokens.js';
