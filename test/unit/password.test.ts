import { describe, expect, it } from 'vitest';
import { ARGON2_OPTIONS, hashPassword, passwordProblem, verifyPassword } from '../../api/modules/auth/password.js';

const who = { email: 'grace.hopper@example.org', name: 'Grace Brewster Hopper' };

describe('password hashing', () => {
  it('hashes with Argon2id and the documented parameters, salted, and verifies', async () => {
    const a = await hashPassword('correct horse battery staple');
    const b = await hashPassword('correct horse battery staple');
    expect(a).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword(a, 'correct horse battery staple')).toBe(true);
    expect(await verifyPassword(a, 'correct horse battery stable')).toBe(false);
    expect(ARGON2_OPTIONS).toMatchObject({ memoryCost: 19_456, timeCost: 2, parallelism: 1 });
  });
});

describe('passwordProblem', () => {
  it.each([
    'correct horse battery staple',
    'Tr0ub4dor&3-extended',
    'vN8#q2LmZ!r4wX',
    'my kettle sings at dawn',
  ])('accepts %s', (password) => {
    expect(passwordProblem(password, who)).toBeNull();
  });

  it.each<[string, string]>([
    ['short', 'at least 12 characters'],
    ['elevenchars', 'at least 12 characters'],
    ['x-grace.hopper-x', 'email address'],
    ['GRACE.HOPPER2024', 'email address'],
    ['brewster-rocks-1', 'your name'],
    ['gracebrewsterhopper', 'your name'],
    ['password1234', 'most common'],
    ['Password2024!', 'most common'],
    ['P@ssw0rd!!!!', 'most common'],
    ['!!Letmein2025', 'most common'],
    ['qwertyuiop12', 'most common'],
    ['1q2w3e4r5t6y', 'most common'],
    ['monkeymonkey', 'repeated'],
    ['dragondragon1', 'most common'],
    ['aaaaaaaaaaaa', 'repeated'],
    ['abcabcabcabc', 'repeated'],
    ['123456789012', 'running'],
    ['abcdefghijklm', 'running'],
    ['987654321098', 'running'],
  ])('refuses %s (%s)', (password, why) => {
    expect(passwordProblem(password, who)).toContain(why);
  });

  it('counts characters, not bytes or UTF-16 units', () => {
    expect(passwordProblem('ñandú-kétől-ö', who)).toBeNull();
    expect(passwordProblem('🔑🔑🔒🔓🗝️🚪', who)).toContain('at least 12 characters');
  });
});
