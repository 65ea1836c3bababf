/**
 * Finds key-like material: in an action's parameters (the gateway denies with SECRET_DETECTED) and
 * where a secret-store path belongs (a credential reference refuses a pasted secret). A finding
 * names where and what kind, never the value.
 */
export interface SecretFinding {
  /** JSON path of the value, e.g. `$.headers.Authorization`. */
  path: string;
  kind: string;
}

const RULES: Array<[kind: string, pattern: RegExp]> = [
  ['cloud_access_key_id', /\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b/],
  ['cloud_api_key', /\bAIza[0-9A-Za-z_-]{35}\b/],
  ['oauth_client_secret', /\bGOCSPX-[0-9A-Za-z_-]{28}\b/],
  ['storage_account_key', /AccountKey=[A-Za-z0-9+/]{40,}={0,2}/],
  ['vcs_token', /\bgh[pousr]_[A-Za-z0-9]{36,}\b/],
  ['vcs_fine_grained_token', /\bgithub_pat_[A-Za-z0-9_]{40,}\b/],
  ['vcs_gitlab_token', /\bglpat-[A-Za-z0-9_-]{20,}\b/],
  ['chat_token', /\bxox[abposr]-[A-Za-z0-9-]{10,}\b/],
  ['chat_webhook', /https:\/\/hooks\.slack\.com\/services\/T[A-Z0-9]+\/B[A-Z0-9]+\/[A-Za-z0-9]+/],
  ['chat_bot_token', /\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b/],
  ['payment_key', /\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}\b/],
  ['payment_webhook_secret', /\bwhsec_[A-Za-z0-9]{24,}\b/],
  ['payment_square_token', /\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,}\b/],
  ['payment_gateway_token', /\baccess_token\$production\$[a-z0-9]{16}\$[a-f0-9]{32}\b/],
  ['model_vendor_key', /\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}\b/],
  ['email_api_key', /\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b/],
  ['email_mailgun_key', /\bkey-[0-9a-f]{32}\b/],
  ['sms_api_key', /\bSK[0-9a-f]{32}\b/],
  ['package_registry_token', /\bnpm_[A-Za-z0-9]{36}\b/],
  ['package_index_token', /\bpypi-AgE[A-Za-z0-9_-]{50,}\b/],
  ['container_registry_token', /\bdckr_pat_[A-Za-z0-9_-]{27,}\b/],
  ['commerce_token', /\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b/],
  ['cloud_do_token', /\bdo[opr]_v1_[a-f0-9]{64}\b/],
  ['vault_token', /\bhv[sbr]\.[A-Za-z0-9_-]{24,}\b/],
  ['data_platform_token', /\bdapi[0-9a-f]{32}\b/],
  ['age_secret_key', /\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b/],
  ['private_key_block', /-----BEGIN (?:[A-Z]+ )*PRIVATE KEY(?: BLOCK)?-----/],
  ['jwt', /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/],
  ['connection_string_password', /\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:[^\s@/]{3,}@[^\s/]+/i],
  ['authorization_header', /\b(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{20,}/],
];

/** Names under which a random-looking value is a secret even without a known format. */
const SECRET_NAME = /(?:pass(?:word|wd|phrase)?|secret|token|api[_-]?key|apikey|private[_-]?key|access[_-]?key|credential|auth(?:orization)?|session[_-]?key|signing[_-]?key)/i;

function entropy(s: string): number {
  const counts = new Map<string, number>();
  for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) h -= (n / s.length) * Math.log2(n / s.length);
  return h;
}

// Words joined by separators (`oauth_client_credentials`, `secret/data/payments`) are names, not secrets.
const WORDS = /^[a-z]+(?:[_\-/.:][a-z]+)+$/i;

const randomLooking = (s: string, minLength: number, minEntropy: number) =>
  s.length >= minLength && !/\s/.test(s) && !WORDS.test(s) && entropy(s) >= minEntropy;

/**
 * The formats without flags as one expression: most strings match none, and one pass turns them away
 * (an unanchored `A|B` matches exactly when `A` or `B` does); the formats with flags are tried on their own.
 */
const ANY_PLAIN_RULE = new RegExp(RULES.filter(([, p]) => !p.flags).map(([, p]) => `(?:${p.source})`).join('|'));
const FLAGGED_RULES = RULES.filter(([, p]) => p.flags);

/** The kind of key material in a string, or undefined. `name` is the field it was found under. */
export function classifySecret(value: string, name?: string): string | undefined {
  if (ANY_PLAIN_RULE.test(value) || FLAGGED_RULES.some(([, p]) => p.test(value))) {
    for (const [kind, pattern] of RULES) if (pattern.test(value)) return kind;
  }
  if (name && SECRET_NAME.test(name) && randomLooking(value, 12, 3.0)) return 'named_secret';
  // Assignments inside text: "password=…", "api_key: …".
  const assigned = /(?:^|[\s,;{"'])([A-Za-z_][A-Za-z0-9_.-]*)\s*[=:]\s*["']?([^\s"',;}]{12,})/g;
  for (const m of value.matchAll(assigned)) {
    if (SECRET_NAME.test(m[1]!) && randomLooking(m[2]!, 12, 3.0)) return 'assigned_secret';
  }
  return undefined;
}

/** Walks any JSON value: keys and string values, at any depth. */
export function findSecrets(value: unknown, path = '$', name?: string, out: SecretFinding[] = []): SecretFinding[] {
  if (typeof value === 'string') {
    const kind = classifySecret(value, name);
    if (kind) out.push({ path, kind });
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => findSecrets(v, `${path}[${i}]`, name, out));
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const keyKind = classifySecret(k);
      if (keyKind) out.push({ path: `${path}[key]`, kind: keyKind });
      findSecrets(v, /^[A-Za-z_$][\w$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`, k, out);
    }
  }
  return out;
}

/** A value that is key material rather than a reference to it (for credential references). */
export function looksLikeKeyMaterial(value: string): boolean {
  if (classifySecret(value) !== undefined) return true;
  // A long random token with no path structure is a secret, not a path.
  return /^[A-Za-z0-9+/=_-]{32,}$/.test(value) && entropy(value) > 4.2;
}
