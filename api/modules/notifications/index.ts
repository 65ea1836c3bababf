/** The notifications module's public face: notifying people. */
export { notify } from './notifications.repository.js';
