#!/usr/bin/env node
// No module of a command is imported here: each command loads its own code when it runs, so `tollgate
// sidecar` (one per agent pod) loads neither the API nor the Kubernetes client (docs/sidecar.md, Footprint).
import type { Config } from './api/config.js';

const USAGE = `usage: tollgate <command>

commands:
  api       start the central API (PORT, DATABASE_URL or the embedded database under DATA_DIR)
  migrate   apply database migrations as the schema owner (MIGRATION_DATABASE_URL or DATABASE_URL)
  controller
            reconcile the tollgate.dev resources of a Kubernetes cluster into the registry
            (TOLLGATE_API_URL, a service account's credential, KUBECONFIG or in-cluster; docs/kubernetes.md)
  sidecar   the gateway sidecar on loopback: the gateway client flow and the MCP proxy
            (TOLLGATE_API_URL, TOLLGATE_IDENTITY_DIR; docs/sidecar.md)
  worker    run the background jobs (discovery runs) from the job queue in PostgreSQL
            (DATABASE_URL, WORKER_PORT for /healthz and /readyz; worker/README.md)
  org set-plan <slug> <developer|team|enterprise> [--reason <text>]
            move one organisation to another plan, audited as tenant.plan_changed (a platform
            operator's command: the schema owner's MIGRATION_DATABASE_URL, or the embedded database
            under DATA_DIR while no API runs on it; docs/registry.md, Plans)
  evidence verify <bundle.tar.gz> [--checkpoint <file.json>]...
            verify an evidence bundle offline, and that its chain passes through stored checkpoints
            (exit 0 valid, 1 broken, 2 bad usage; docs/evidence.md)
  help      show this text
`;

async function main(argv: string[]): Promise<number> {
  const command = argv[0] ?? 'help';
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === 'controller') return runController();
  if (command === 'sidecar') return runSidecar();
  if (command === 'evidence') return runEvidence(argv.slice(1));
  if (command !== 'api' && command !== 'migrate' && command !== 'worker' && command !== 'org') {
    process.stderr.write(`tollgate: unknown command "${command}"\n\n${USAGE}`);
    return 2;
  }
  const { ConfigError, loadCheckedConfig } = await import('./api/config.js');
  let config;
  try {
    config = loadCheckedConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`tollgate ${command}: refusing to start, ${err.message}\n`);
      return 78; // EX_CONFIG
    }
    throw err;
  }
  if (command === 'api' || command === 'worker') {
    const { limitHeapGrowth } = await import('./api/platform/heap-growth.js');
    limitHeapGrowth(config.heapGrowthPercent);
  }
  if (command === 'org') return runOrg(argv.slice(1), config);
  if (command === 'migrate') {
    if (!config.migrationDatabaseUrl) {
      process.stderr.write(
        'tollgate migrate: set MIGRATION_DATABASE_URL (or DATABASE_URL) to the schema owner; the embedded database migrates itself on start\n',
      );
      return 78;
    }
    const { migrate, openOwnerDatabase } = await import('./api/db/database.js');
    const db = openOwnerDatabase(config.migrationDatabaseUrl);
    try {
      const applied = await migrate(db, config.runtimeRole);
      process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
    } finally {
      await db.destroy();
    }
    return 0;
  }
  if (command === 'worker') {
    const { runWorker } = await import('./worker/worker.js');
    return runWorker(config);
  }
  const { startApi } = await import('./api/server.js');
  await startApi(config);
  return -1; // keeps running
}

const PLAN_USAGE = 'usage: tollgate org set-plan <slug> <developer|team|enterprise> [--reason <text>]\n';

/** `tollgate org set-plan <slug> <plan> [--reason <text>]`: exit 0 changed or already so, 1 refused, 2 bad usage. */
async function runOrg(args: string[], config: Config): Promise<number> {
  const [sub, slug, plan, ...rest] = args;
  const { PLANS, PlanChangeError, changePlan } = await import('./api/modules/tenants/index.js');
  let reason: string | null = null;
  if (rest.length === 2 && rest[0] === '--reason' && rest[1]!.trim()) reason = rest[1]!.trim().slice(0, 500);
  const known = (PLANS as readonly string[]).includes(plan ?? '');
  if (sub !== 'set-plan' || !slug || !plan || !known || (rest.length > 0 && reason === null)) {
    if (plan && !known && sub === 'set-plan') process.stderr.write(`tollgate org set-plan: "${plan}" is not a plan (${PLANS.join(', ')})\n`);
    process.stderr.write(PLAN_USAGE);
    return 2;
  }
  const { openOperatorDatabase } = await import('./api/db/database.js');
  let database;
  try {
    database = await openOperatorDatabase(config);
  } catch (err) {
    process.stderr.write(`tollgate org set-plan: ${(err as Error).message}\n`);
    return 1;
  }
  try {
    const { userInfo, hostname } = await import('node:os');
    // userInfo() throws for a uid without a passwd entry (an arbitrary uid in a container).
    const user = (() => {
      try {
        return userInfo().username;
      } catch {
        return process.env.USER ?? `uid-${process.getuid?.() ?? 'unknown'}`;
      }
    })();
    const { org, from } = await changePlan(database.db, {
      slug,
      plan: plan as (typeof PLANS)[number],
      operator: `${user}@${hostname()}`,
      reason,
      correlationId: `cli-org-set-plan-${Date.now()}`,
      now: new Date(),
    });
    process.stdout.write(
      from === org.plan
        ? `${slug} is already on the ${from} plan; nothing changed\n`
        : `${slug}: ${from} -> ${org.plan} (audited as tenant.plan_changed)\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof PlanChangeError) {
      process.stderr.write(`tollgate org set-plan: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    await database.close();
  }
}

/** `tollgate evidence verify <bundle> [--checkpoint <file>]...`: needs no configuration, no database and no network. */
async function runEvidence(args: string[]): Promise<number> {
  const [sub, bundle, ...rest] = args;
  let usable = sub === 'verify' && bundle !== undefined && !bundle.startsWith('-');
  const checkpointFiles: string[] = [];
  for (let i = 0; i < rest.length; i += 2) {
    const file = rest[i + 1];
    if (rest[i] !== '--checkpoint' || file === undefined) usable = false;
    else checkpointFiles.push(file);
  }
  if (!usable || bundle === undefined) {
    process.stderr.write(`usage: tollgate evidence verify <bundle.tar.gz> [--checkpoint <file.json>]...\n`);
    return 2;
  }
  const { readFile } = await import('node:fs/promises');
  let archive: Buffer;
  const checkpoints: { name: string; value: unknown }[] = [];
  try {
    archive = await readFile(bundle);
    for (const file of checkpointFiles) checkpoints.push({ name: file, value: JSON.parse(await readFile(file, 'utf8')) });
  } catch (err) {
    process.stderr.write(`tollgate evidence verify: ${(err as Error).message}\n`);
    return 2;
  }
  // The verifier is pure (docs/evidence.md): no configuration, no database.
  const { describeVerdict, verifyBundle } = await import('./api/modules/evidence/verify-bundle.js');
  const verdict = await verifyBundle(archive, checkpoints);
  process.stdout.write(`${describeVerdict(verdict).join('\n')}\n`);
  return verdict.valid ? 0 : 1;
}

/** `tollgate controller`: runs until SIGTERM or SIGINT, then finishes what is in flight and releases its Lease. */
async function runController(): Promise<number> {
  const { ControllerConfigError, controllerConfig, startController } = await import('./controller/main.js');
  let config;
  try {
    config = controllerConfig(process.env);
  } catch (err) {
    if (err instanceof ControllerConfigError) {
      process.stderr.write(`tollgate controller: refusing to start, ${err.message}\n`);
      return 78; // EX_CONFIG
    }
    throw err;
  }
  const running = await startController(config);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await running.stop();
  return 0;
}

/** `tollgate sidecar`: runs until SIGTERM or SIGINT. */
async function runSidecar(): Promise<number> {
  const { SidecarConfigError, sidecarConfig, startSidecar } = await import('./sidecar/main.js');
  let config;
  try {
    config = sidecarConfig(process.env);
  } catch (err) {
    if (err instanceof SidecarConfigError) {
      process.stderr.write(`tollgate sidecar: refusing to start, ${err.message}\n`);
      return 78; // EX_CONFIG
    }
    throw err;
  }
  let running;
  try {
    running = await startSidecar(config);
  } catch (err) {
    // Where it was told to listen is unusable (a socket path that is a file, or in use).
    if (err instanceof SidecarConfigError) {
      process.stderr.write(`tollgate sidecar: refusing to start, ${err.message}\n`);
      return 78;
    }
    throw err;
  }
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await running.stop();
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: Error) => {
    process.stderr.write(`tollgate: ${err.message}\n`);
    process.exit(1);
  },
);
