/** The users module's public face: people and their memberships. */
export { findOrCreatePerson, findPerson } from './users.repository.js';
