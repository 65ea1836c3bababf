import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    // expect.poll waits up to 10 s (vitest's default is 1 s): a browser page on a loaded 2-core machine can take
    // longer than that to show what it fetched, and a poll that gives up early fails a test that is right.
    expect: { poll: { timeout: 10_000, interval: 100 } },
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
