import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { GatewayApiError, ActionDeniedError, AuthenticationError, type ActionResult } from '../../client/index.js';
import { BreakerOpenError, CircuitBreaker, type BreakerState } from '../../sidecar/breaker.js';
import { sidecarConfig, SidecarConfigError } from '../../sidecar/main.js';
import { containmentOf, isOutage } from '../../sidecar/tollgate.js';
import { eventually } from '../support/kubectl.js';

const log = pino({ level: 'silent' });

function breaker(threshold = 2, ready = false) {
  let up = ready;
  const moves: BreakerState[] = [];
  const b = new CircuitBreaker({ threshold, probe: async () => up, probeIntervalMs: 10, log, onTransition: (to) => moves.push(to) });
  return { b, moves, setUp: (v: boolean) => (up = v) };
}

describe('CircuitBreaker', () => {
  it('while the API answers its readiness check, opens after the threshold of consecutive failures only; a success resets the count', async () => {
    const { b, moves } = breaker(3, true);
    const settle = () => new Promise((r) => setTimeout(r, 20)); // the background readiness check after a failure
    b.done(b.enter(), false);
    b.done(b.enter(), false);
    await settle();
    b.done(b.enter(), true);
    b.done(b.enter(), false);
    b.done(b.enter(), false);
    await settle();
    expect(b.state).toBe('closed');
    b.done(b.enter(), false);
    expect(b.state).toBe('open');
    expect(() => b.enter()).toThrow(BreakerOpenError);
    expect(moves).toEqual(['open']);
    b.stop();
  });

  it('opens at the first failure when the readiness check fails too (a hung or dead API), long before the threshold', async () => {
    const { b, moves } = breaker(5, false);
    b.done(b.enter(), false);
    await eventually(() => b.state === 'open', 2000, 'open');
    expect(moves).toEqual(['open']);
    b.stop();
  });

  it('a slow call (suspect) opens it when the readiness check fails, with no failure yet; not while the API answers', async () => {
    const down = breaker(5, false);
    down.b.suspect();
    await eventually(() => down.b.state === 'open', 2000, 'open');
    expect(down.moves).toEqual(['open']);
    down.b.stop();
    const up = breaker(5, true);
    up.b.suspect();
    await new Promise((r) => setTimeout(r, 30));
    expect(up.b.state).toBe('closed');
    expect(up.moves).toEqual([]);
    up.b.stop();
  });

  it('while open, probes until the API answers; half-open admits one trial at a time; a failed trial opens it again, a good one closes it', async () => {
    const { b, moves, setUp } = breaker(1);
    b.done(b.enter(), false);
    await new Promise((r) => setTimeout(r, 50));
    expect(b.state).toBe('open'); // the probe keeps failing
    setUp(true);
    await eventually(() => b.state === 'half_open', 2000, 'half-open');
    const trial = b.enter();
    expect(trial.trial).toBe(true);
    expect(() => b.enter()).toThrow(BreakerOpenError); // one trial at a time
    setUp(false);
    b.done(trial, false);
    expect(b.state).toBe('open');
    setUp(true);
    await eventually(() => b.state === 'half_open', 2000, 'half-open again');
    b.done(b.enter(), true);
    expect(b.state).toBe('closed');
    expect(b.enter().trial).toBe(false);
    expect(moves).toEqual(['open', 'half_open', 'open', 'half_open', 'closed']);
    b.stop();
  });
});

describe('what the breaker counts, and what reads as a contained agent', () => {
  const result = (decision: 'allow' | 'deny', reason_codes: string[]) => ({ action_id: 'a', decision, reason_codes, state: 'denied' }) as unknown as ActionResult;
  const api = (status: number, code: string, details: unknown = null) => ({ status, code, message: code, correlationId: null, details });

  it('counts 5xx, unreadable answers and network errors; not denials, 4xx or contained agents', () => {
    expect(isOutage(new GatewayApiError(api(503, 'service_unavailable')))).toBe(true);
    expect(isOutage(new GatewayApiError(api(200, 'invalid_response')))).toBe(true);
    expect(isOutage(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isOutage(new DOMException('timed out', 'TimeoutError'))).toBe(true);
    expect(isOutage(new ActionDeniedError(result('deny', ['PERMISSION_NOT_GRANTED'])))).toBe(false);
    expect(isOutage(new GatewayApiError(api(429, 'rate_limited')))).toBe(false);
    expect(isOutage(new AuthenticationError(api(401, 'session_revoked', { reason: 'agent_suspended' })))).toBe(false);
    expect(isOutage(new BreakerOpenError('open'))).toBe(false);
  });

  it("reads containment from the exchange's reason, a revoked identity, or the engine's deny codes", () => {
    expect(containmentOf(new AuthenticationError(api(401, 'session_revoked', { reason: 'agent_suspended' })))).toEqual(['AGENT_SUSPENDED']);
    expect(containmentOf(new AuthenticationError(api(401, 'identity_revoked', { reason: 'agent_revoked' })))).toEqual(['AGENT_REVOKED']);
    expect(containmentOf(new AuthenticationError(api(401, 'identity_revoked')))).toEqual(['IDENTITY_REVOKED']);
    expect(containmentOf(new AuthenticationError(api(401, 'invalid_client')))).toBeNull();
    expect(containmentOf(result('deny', ['GATEWAY_ACCESS_DISABLED']))).toEqual(['GATEWAY_ACCESS_DISABLED']);
    expect(containmentOf(result('deny', ['UNKNOWN_TOOL']))).toBeNull();
    expect(containmentOf(result('allow', []))).toBeNull();
  });
});

describe('sidecarConfig: the new settings', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-sidecar-config-'));
  writeFileSync(path.join(dir, 'client-id'), 'tgc_x');
  writeFileSync(path.join(dir, 'client-secret'), 'secret');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const env = (extra: Record<string, string>) => ({ TOLLGATE_API_URL: 'http://api:8080', TOLLGATE_IDENTITY_DIR: dir, ...extra });

  it('has the documented defaults', () => {
    expect(sidecarConfig(env({}))).toMatchObject({ decisionTimeoutMs: 2000, breakerFailures: 5, toolsCacheSeconds: 10, toolsList: 'filtered', metricsPort: 15090 });
    expect(sidecarConfig(env({ TOLLGATE_SIDECAR_METRICS_PORT: 'off' })).metricsPort).toBeNull();
    expect(sidecarConfig(env({ TOLLGATE_SIDECAR_METRICS_PORT: '0', TOLLGATE_TOOLS_LIST: 'passthrough' }))).toMatchObject({ metricsPort: 0, toolsList: 'passthrough' });
  });

  it.each([
    ['TOLLGATE_DECISION_TIMEOUT_MS', '50'],
    ['TOLLGATE_DECISION_TIMEOUT_MS', '2s'],
    ['TOLLGATE_DECISION_TIMEOUT_MS', '60001'],
    ['TOLLGATE_BREAKER_FAILURES', '0'],
    ['TOLLGATE_TOOLS_CACHE_SECONDS', '-1'],
    ['TOLLGATE_TOOLS_LIST', 'all'],
    ['TOLLGATE_SIDECAR_METRICS_PORT', '70000'],
    ['TOLLGATE_SIDECAR_METRICS_PORT', 'on'],
    ['TOLLGATE_SIDECAR_SOCKET', 'relative/sidecar.sock'],
    ['TOLLGATE_SIDECAR_SOCKET', `/${'x'.repeat(120)}.sock`],
    ['TOLLGATE_SIDECAR_SOCKET', '/nonexistent-tollgate-dir/sidecar.sock'],
  ])('refuses %s=%s, naming it', (name, value) => {
    expect(() => sidecarConfig(env({ [name]: value }))).toThrow(SidecarConfigError);
    expect(() => sidecarConfig(env({ [name]: value }))).toThrow(name);
  });

  it('takes a socket path in a directory that exists; none by default', () => {
    expect(sidecarConfig(env({})).socket).toBeNull();
    expect(sidecarConfig(env({ TOLLGATE_SIDECAR_SOCKET: path.join(dir, 'sidecar.sock') })).socket).toBe(path.join(dir, 'sidecar.sock'));
    expect(() => sidecarConfig(env({ TOLLGATE_SIDECAR_SOCKET: path.join(dir, 'client-id', 'sidecar.sock') }))).toThrow(/does not exist/);
  });
});
