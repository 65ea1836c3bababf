/** The identities module's public face: workload identities, their secrets and tokens. */
export { hashSecret, UNKNOWN_CLIENT_HASH, verifySecret } from './secrets.js';
export { RevocationCache } from './revocation.js';
export { TokenService } from './tokens.js';
