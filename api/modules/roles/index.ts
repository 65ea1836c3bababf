/** The roles module's public face: built-in roles and the permission catalogue. */
export * from './catalogue.js';
