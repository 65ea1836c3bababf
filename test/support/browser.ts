import { existsSync } from 'node:fs';
import path from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { startTestApp, type TestApp } from './harness.js';

/**
 * The web console in a real browser: Debian's Chromium (`make test` installs it with apt when missing;
 * CHROMIUM_PATH points elsewhere) driven by playwright-core, against the real app listening on a
 * loopback port and serving the built console (dist/console, or CONSOLE_DIR).
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function consoleDir(): string {
  const dir = process.env.CONSOLE_DIR ?? path.join(ROOT, 'dist/console');
  if (!existsSync(path.join(dir, 'index.html'))) throw new Error(`no built console in ${dir}: run make build (or make console)`);
  return dir;
}

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: make test installs it (apt-get install chromium), or set CHROMIUM_PATH`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // The machine's network is closed: Chromium's background connections would only fail, many at a time.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
}

export interface ConsoleApp extends TestApp {
  /** http://127.0.0.1:port */
  url: string;
}

/** The real app on a fresh database, listening on a loopback port (`port`, else any free one), serving the console. */
export async function startConsoleApp(opts: Parameters<typeof startTestApp>[0] & { port?: number } = {}): Promise<ConsoleApp> {
  const t = await startTestApp({ ...opts, env: { CONSOLE_DIR: consoleDir(), ...opts.env } });
  const url = await t.app.listen({ port: opts.port ?? 0, host: '127.0.0.1' });
  return { ...t, url };
}

/** What a page reported that a person would never see: script errors and Content-Security-Policy refusals. */
export interface PageProblems {
  errors: string[];
}

/** A fresh browser context (cookies of its own) at laptop width, with the page's script errors collected. */
export async function openPage(
  browser: Browser,
  baseURL: string,
  // ignoreHTTPSErrors: for a test identity provider whose certificate the browser does not know.
  opts: { ignoreHTTPSErrors?: boolean } = {},
): Promise<{ context: BrowserContext; page: Page; problems: PageProblems }> {
  const context = await browser.newContext({ baseURL, viewport: { width: 1366, height: 860 }, ignoreHTTPSErrors: opts.ignoreHTTPSErrors ?? false });
  // Below the test's own limit, so a missing element fails with its locator rather than a bare timeout.
  context.setDefaultTimeout(10_000);
  const page = await context.newPage();
  const problems: PageProblems = { errors: [] };
  page.on('pageerror', (err) => problems.errors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    // A 4xx the page handles (a refused approval, a signed-out probe) logs a failed resource; those are expected.
    if (msg.type() === 'error' && !/Failed to load resource: the server responded with a status of 4\d\d/.test(msg.text())) {
      problems.errors.push(`console: ${msg.text()}`);
    }
  });
  return { context, page, problems };
}

/** Signs in with development sign-in as `email`, and waits for the signed-in frame. */
export async function signIn(page: Page, email: string, at = '/'): Promise<void> {
  await page.goto(at);
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

/** axe-core over the page as it is now: no WCAG 2.1 A or AA violation. */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  const result = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
  const found = result.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join('; ')}`);
  expect(found, `accessibility of ${what}`).toEqual([]);
}
