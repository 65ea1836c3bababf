import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

/**
 * The console's build: `make build` writes it to dist/console, where `tollgate api` serves it at `/`
 * (api/platform/console.ts). Every file is an external script or stylesheet with a hashed name under
 * assets/, so the API's Content-Security-Policy (script-src 'self', style-src 'self') holds and the
 * assets can be cached for good. `npx vite --config console/vite.config.ts` serves it in development,
 * with the API of `make run` behind /api.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  plugins: [react()],
  build: {
    outDir: process.env.CONSOLE_OUT_DIR ?? fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
    // Nothing inlined as data: URLs (fonts would break font-src 'self'), no inline module-preload script.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1024,
  },
  server: { proxy: { '/api': 'http://127.0.0.1:8080' } },
});
