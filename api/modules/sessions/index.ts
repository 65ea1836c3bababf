/** The sessions module's public face: server-side sessions of signed-in people. */
export * from './sessions.repository.js';
