import { hash, verify, type Algorithm } from '@node-rs/argon2';
import { COMMON_PASSWORD_BASES } from './common-passwords.js';

/**
 * Argon2id with OWASP's first recommended parameters (Password Storage Cheat Sheet): 19 MiB of memory, two
 * passes, one lane; a 16-byte random salt and a 32-byte hash, kept as the PHC string (`$argon2id$v=19$m=...`),
 * which names its parameters, so stronger ones can come later without breaking stored hashes.
 */
export const ARGON2_OPTIONS = {
  algorithm: 2 as Algorithm, // Argon2id (a const enum of the binding, which isolated modules cannot read)
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
  outputLen: 32,
};

export const MIN_PASSWORD_LENGTH = 12;

export const hashPassword = (password: string) => hash(password, ARGON2_OPTIONS);
export const verifyPassword = (phc: string, password: string) => verify(phc, password);

const COMMON = new Set(COMMON_PASSWORD_BASES);

// What people write for letters: p@55w0rd is password.
const LEET: Record<string, string> = { '0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', $: 's', '!': 'i' };

/** The password's base: lower-case, digits and symbols around it removed, then look-alike characters read as letters. */
function baseOf(password: string): string {
  const lower = password.toLowerCase();
  const core = lower.replace(/^[^a-z]+|[^a-z]+$/g, '');
  return core.replace(/[0-9@$!]/g, (c) => LEET[c] ?? c).replace(/[^a-z]/g, '');
}

/** Whether `s` is a shorter piece written over and over ("abcabcabcabc", "aaaaaaaaaaaa"). */
function isRepetition(s: string): boolean {
  for (let n = 1; n <= s.length / 2; n++) {
    if (s.length % n === 0 && s.slice(0, n).repeat(s.length / n) === s) return true;
  }
  return false;
}

/** Whether the characters climb or fall by one all the way ("123456789012" wraps, "abcdefghijkl"). */
function isSequence(s: string): boolean {
  if (s.length < 4) return false;
  const codes = [...s].map((c) => c.charCodeAt(0));
  const step = codes[1]! - codes[0]!;
  if (Math.abs(step) !== 1) return false;
  return codes.every((c, i) => i === 0 || c - codes[i - 1]! === step || (/\d/.test(s[i]!) && Math.abs(c - codes[i - 1]!) === 9));
}

/**
 * Why a password is too weak to keep, or null when it is acceptable: shorter than 12 characters; containing
 * the email's local part or the person's name (or a word of it of four letters or more); one of the most common
 * passwords (COMMON_PASSWORD_BASES) once case, the digits and symbols around it and look-alike characters are
 * set aside, or such a password repeated; a single character or piece repeated; a run such as 1234... or abcd....
 * No breach service is asked: the password never leaves the process.
 */
export function passwordProblem(password: string, who: { email: string; name: string }): string | null {
  if ([...password].length < MIN_PASSWORD_LENGTH) return `must be at least ${MIN_PASSWORD_LENGTH} characters`;
  const lower = password.toLowerCase();
  const compact = lower.replace(/\s+/g, '');
  const local = who.email.split('@')[0]!.toLowerCase();
  if (local.length >= 3 && compact.includes(local.replace(/\s+/g, ''))) return 'must not contain your email address';
  const nameWords = who.name.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w.length >= 4);
  const wholeName = who.name.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, '');
  if ((wholeName.length >= 3 && compact.includes(wholeName)) || nameWords.some((w) => compact.includes(w)))
    return 'must not contain your name';
  if (isRepetition(compact) || isSequence(compact)) return 'is a repeated or running pattern; choose something less predictable';
  const base = baseOf(password);
  if (COMMON.has(compact) || COMMON.has(base) || COMMON.has(smallestUnit(base)))
    return 'is one of the most common passwords (or made from one); choose something less predictable';
  return null;
}

/** The shortest piece that, repeated, makes `s`. */
function smallestUnit(s: string): string {
  for (let n = 1; n <= s.length; n++) if (s.length % n === 0 && s.slice(0, n).repeat(s.length / n) === s) return s.slice(0, n);
  return s;
}
