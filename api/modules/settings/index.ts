/**
 * The settings module's public face: an organisation's settings, kept on its row (the tenants module
 * reads and writes it). Other modules read a setting from the organisation itself.
 */
export { CONTENT_RETENTION } from './settings.schemas.js';
