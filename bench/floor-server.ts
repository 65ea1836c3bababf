import Fastify from 'fastify';
import pg from 'pg';

/**
 * The floor of bench/decisions, run as its own process as `tollgate api` is: a minimal fastify endpoint doing
 * one durable insert per request on a pg pool of the API's size. Driven by the same client at the same
 * concurrency, its rate is what "Node + HTTP + one write" costs, so the decisions' ratio to it is the cost of
 * the decision logic alone. DATABASE_URL, PORT, POOL_MAX.
 */
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL_MAX ?? 10) });
const app = Fastify({ logger: false });
app.get('/healthz', async () => ({ status: 'ok' }));
app.post('/floor', async (req) => {
  const { rows } = await pool.query<{ id: string }>('insert into bench_rows (payload) values ($1) returning id', [JSON.stringify(req.body)]);
  return { id: rows[0]!.id };
});
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
const shutdown = async () => {
  await app.close();
  await pool.end();
  process.exit(0);
};
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());
