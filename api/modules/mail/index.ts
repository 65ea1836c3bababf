/**
 * The mail module's public face: the mailer of EMAIL_BACKEND (built once, in api/app.ts, as `app.deps.mailer`)
 * and the templates of the messages Tollgate sends. It depends on no other module.
 */
export { createMailer, MemoryMailer, NoMailer, SmtpMailer, type MailMessage, type Mailer } from './mail.js';
export { accountExistsEmail, escapeHtml, signupCodeEmail } from './templates.js';
