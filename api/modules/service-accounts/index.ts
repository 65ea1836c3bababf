/** The service-accounts module's public face: the service accounts that controllers sign in with. */
export { ServiceAccountStates } from './service-accounts.state.js';
