import type { MailMessage } from './mail.js';

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** The HTML around a message's paragraphs: plain, inline-styled, readable in any client. Values are escaped by the callers. */
function page(title: string, paragraphs: string[]): string {
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>${title}</title></head>`,
    '<body style="font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; line-height: 1.5; color: #1a1a1a;">',
    ...paragraphs.map((p) => `<p>${p}</p>`),
    '<p style="color: #666; font-size: 12px;">Tollgate</p>',
    '</body></html>',
  ].join('\n');
}

/** The sign-up's verification code. */
export function signupCodeEmail(to: string, name: string, code: string, validMinutes: number): MailMessage {
  const subject = 'Your Tollgate verification code';
  const text = [
    `Hello ${name},`,
    '',
    `Your Tollgate verification code is ${code}`,
    '',
    `Enter it on the sign-up page within ${validMinutes} minutes. It works once.`,
    "If you did not sign up for Tollgate, ignore this email: no account is created without the code.",
  ].join('\n');
  const html = page(escapeHtml(subject), [
    `Hello ${escapeHtml(name)},`,
    `Your Tollgate verification code is <strong style="font-size: 20px; letter-spacing: 2px;">${escapeHtml(code)}</strong>`,
    `Enter it on the sign-up page within ${validMinutes} minutes. It works once.`,
    'If you did not sign up for Tollgate, ignore this email: no account is created without the code.',
  ]);
  return { to, subject, text, html };
}

/**
 * What a sign-up with the address of an existing account sends instead of a code: the answer to the sign-up
 * is the same either way, so only the mailbox's owner learns that the account exists.
 */
export function accountExistsEmail(to: string): MailMessage {
  const subject = 'You already have a Tollgate account';
  const text = [
    'Hello,',
    '',
    'Someone, probably you, tried to sign up for Tollgate with this address, which already has an account.',
    'Sign in instead. If it was not you, you need do nothing: your account is unchanged.',
  ].join('\n');
  const html = page(escapeHtml(subject), [
    'Hello,',
    'Someone, probably you, tried to sign up for Tollgate with this address, which already has an account.',
    'Sign in instead. If it was not you, you need do nothing: your account is unchanged.',
  ]);
  return { to, subject, text, html };
}
