/** The notifications module's public face: notifying people. */
export { notify, notifyHoldersOf, type Notice, type NotificationKind } from './notifications.repository.js';
