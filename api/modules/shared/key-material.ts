/**
 * Recognises values that are key material rather than a reference to it. Used to refuse a secret
 * pasted where a secret-store path belongs; the gateway's full scanner builds on the same patterns.
 */
const PATTERNS: RegExp[] = [
  /\bAKIA[0-9A-Z]{16}\b/, // cloud access key id
  /\bgh[pousr]_[A-Za-z0-9]{36,}\b/, // VCS tokens
  /\bgithub_pat_[A-Za-z0-9_]{40,}\b/,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}\b/, // chat platform tokens
  /\b[sr]k_(live|test)_[A-Za-z0-9]{16,}\b/, // payment platform keys
  /\bsk-[A-Za-z0-9_-]{20,}\b/, // model vendor keys
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
  /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b/, // JWT
  /\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:[^\s@/]+@/i, // URL with a password
];

function entropy(s: string): number {
  const counts = new Map<string, number>();
  for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) h -= (n / s.length) * Math.log2(n / s.length);
  return h;
}

export function looksLikeKeyMaterial(value: string): boolean {
  if (PATTERNS.some((p) => p.test(value))) return true;
  // A long random-looking token with no path structure is a secret, not a path.
  return /^[A-Za-z0-9+/=_-]{32,}$/.test(value) && entropy(value) > 4.2;
}
