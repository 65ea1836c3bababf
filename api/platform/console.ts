import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * The web console's pages: `tollgate api` answers index.html at each of these paths and under them, and
 * the console's router takes over in the browser (console/src/sections.ts lists the same paths). Any
 * other path keeps its JSON 404, so a mistyped API address never gets a page.
 */
export const CONSOLE_PATHS = [
  '/',
  '/sign-in',
  '/onboarding',
  '/approvals',
  '/agents',
  '/actions',
  '/evidence',
  '/policies',
  '/inventory',
  '/findings',
  '/graph',
  '/risk',
  '/governance',
  '/reports',
  '/integrations',
] as const;

/** Hashed asset names change with their content, so a browser may keep them for a year without asking. */
const ASSET_CACHE = 'public, max-age=31536000, immutable';
/** The page itself names the current assets: revalidated on every load. */
const PAGE_CACHE = 'no-cache';

/**
 * The console built into the package: dist/console beside the compiled modules (dist/api/platform/ →
 * dist/console), or, when the code runs from source (tests, tsx), the repository's dist/console.
 */
export function builtInConsoleDir(): string | undefined {
  const here = fileURLToPath(new URL('.', import.meta.url));
  return [resolve(here, '../../console'), resolve(here, '../../dist/console')].find((d) => existsSync(join(d, 'index.html')));
}

/**
 * Serves the web console from `dir` (a `vite build` output: index.html, favicon.svg and assets/):
 * the page at CONSOLE_PATHS with `no-cache`, the hashed assets with a year's `immutable`. The API's
 * security headers (platform/security-headers.ts: a strict Content-Security-Policy allowing only this
 * origin's scripts and styles) cover these answers as every other. Without a built console nothing is
 * registered, and the API works as before.
 */
export async function registerConsole(app: FastifyInstance, dir: string | undefined): Promise<boolean> {
  if (dir === undefined || !existsSync(join(dir, 'index.html'))) return false;
  const page = await readFile(join(dir, 'index.html'));
  const icon = existsSync(join(dir, 'favicon.svg')) ? await readFile(join(dir, 'favicon.svg')) : undefined;

  const sendPage = async (_req: unknown, reply: FastifyReply) => reply.type('text/html; charset=utf-8').header('cache-control', PAGE_CACHE).send(page);
  const hidden = { schema: { hide: true } };
  for (const path of CONSOLE_PATHS) {
    app.get(path, hidden, sendPage);
    if (path !== '/') app.get(`${path}/*`, hidden, sendPage);
  }
  if (icon)
    app.get('/favicon.svg', hidden, async (_req, reply) =>
      reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(icon),
    );
  await app.register(fastifyStatic, {
    root: join(dir, 'assets'),
    prefix: '/assets/',
    decorateReply: false,
    index: false,
    serveDotFiles: false,
    // Our own header below; @fastify/static's would set max-age without immutable.
    cacheControl: false,
    etag: true,
    lastModified: false,
    setHeaders: (res) => res.setHeader('cache-control', ASSET_CACHE),
  });
  return true;
}
