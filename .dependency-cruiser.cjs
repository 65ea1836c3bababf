/**
 * Tollgate's import rules (docs/architecture.md). `make lint` and `make test` run them
 * (scripts/check-imports.mjs); test/unit/import-rules.test.ts proves each rule fails on a bad import.
 * Paths are relative to the folder dependency-cruiser runs in: the repository root.
 */

/** A module folder under api/modules (the first capture group is its name). */
const MODULE = '^api/modules/([^/]+)/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles anywhere, type-only imports included: a cycle means two files are one.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'platform-knows-no-module',
      severity: 'error',
      comment:
        'api/platform is what every operation shares; it imports nothing from api/modules. A module ' +
        'provides what the platform needs through the ports it declares (platform/context.ts), wired in api/app.ts.',
      from: { path: '^api/(platform|db)/' },
      to: { path: '^api/(modules/|routes\\.ts$|app\\.ts$|seed\\.ts$|server\\.ts$)' },
    },
    {
      name: 'module-through-index',
      severity: 'error',
      comment:
        "A module uses another module only through that module's index.ts (its services, repositories, " +
        'schemas and types), never its files directly.',
      from: { path: MODULE },
      to: { path: '^api/modules/[^/]+/', pathNot: ['^api/modules/$1/', '^api/modules/[^/]+/index\\.ts$'] },
    },
    {
      name: 'app-through-index',
      severity: 'error',
      comment:
        "The app's own files (app.ts, seed.ts, server.ts, jobs.ts) and the worker reach a module through its " +
        'index.ts; only api/routes.ts imports route files.',
      from: { path: '^(api/[^/]+\\.ts$|worker/)', pathNot: '^api/routes\\.ts$' },
      to: { path: '^api/modules/[^/]+/', pathNot: '^api/modules/[^/]+/index\\.ts$' },
    },
    {
      name: 'routes-only-from-api-routes',
      severity: 'error',
      comment: 'Only api/routes.ts registers route files; nothing else imports a *.routes.ts.',
      from: { pathNot: '^api/routes\\.ts$' },
      to: { path: '\\.routes\\.ts$' },
    },
    {
      name: 'routes-hold-no-sql',
      severity: 'error',
      comment:
        'Route handlers parse, authorise, call a service or repository and shape the answer: they do not ' +
        'import the database layer or the query builder. SQL lives in repositories.',
      from: { path: '\\.routes\\.ts$' },
      to: { path: ['^api/db/', '(^|/)node_modules/(kysely|pg|@electric-sql/pglite)/'] },
    },
    {
      name: 'engine-does-no-io',
      severity: 'error',
      comment:
        'The decision engine is pure: it imports its own files, the shared enumerations and secret scanner, ' +
        'and the CEL and RE2 libraries, nothing that does I/O (no Node built-in, database, HTTP or platform).',
      from: { path: '^api/modules/gateway/engine/' },
      to: {
        pathNot: [
          '^api/modules/gateway/engine/',
          '^api/modules/shared/(index|enums|secret-scanner)\\.ts$',
          '^node_modules/(re2js|@marcbachmann/cel-js)/',
        ],
      },
    },
    {
      name: 'processes-reach-the-api-over-http',
      severity: 'error',
      comment:
        'controller/, sidecar/ and client/ talk to the API over HTTP (client/); from api/ they import only ' +
        'the zod schemas the OpenAPI document is generated from (api/modules/*/*.schemas.ts).',
      from: { path: '^(controller|sidecar|client)/' },
      to: { path: '^api/', pathNot: '^api/modules/[^/]+/[^/]+\\.schemas\\.ts$' },
    },
    {
      name: 'console-stands-alone',
      severity: 'error',
      comment:
        'The web console runs in the browser and reaches the API over HTTP only, through its client typed from ' +
        'docs/openapi.json (console/src/api/); it imports nothing of the server, the processes or lib/.',
      from: { path: '^console/' },
      to: { path: '^(api|controller|sidecar|client|worker|lib|scripts|bench|test)/|^cli\\.ts$' },
    },
    {
      name: 'lib-is-a-leaf',
      severity: 'error',
      comment: 'lib/ holds what every process shares (the clock, canonical JSON); it imports nothing of the project.',
      from: { path: '^lib/' },
      to: { path: '^(api|controller|sidecar|client|scripts|bench|test)/' },
    },
    {
      name: 'no-test-code-in-the-product',
      severity: 'error',
      comment: 'Shipped code never imports tests, fixtures or benchmarks.',
      from: { path: '^(api|controller|sidecar|client|lib|worker)/|^cli\\.ts$' },
      to: { path: '^(test|bench)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // The rule fixtures break the rules on purpose; test/unit/import-rules.test.ts cruises them on their own.
    exclude: { path: '^(dist|node_modules|\\.cache|test/fixtures/import-rules)/' },
    // Type-only imports count: a cycle through types is still a cycle.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.check.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
