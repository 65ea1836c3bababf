import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';

const HEALTH_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * OpenTelemetry traces over OTLP/HTTP, only when an endpoint is configured. Health checks are not
 * traced. Spans are flushed when the app closes. The OpenTelemetry packages are loaded only then: with
 * tracing off (the default) their code (a few MB resident) has no business in the process.
 */
export async function registerTracing(app: FastifyInstance, config: Config): Promise<void> {
  const url = config.otel.tracesEndpoint;
  if (!url) return;
  const [{ FastifyOtelInstrumentation }, { OTLPTraceExporter }, { resourceFromAttributes }, { BatchSpanProcessor, NodeTracerProvider }] = await Promise.all([
    import('@fastify/otel'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-node'),
  ]);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.otel.serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }), { scheduledDelayMillis: 500 })],
  });
  provider.register();
  const instrumentation = new FastifyOtelInstrumentation({
    ignorePaths: (opts: { url: string }) => HEALTH_PATHS.has(opts.url.split('?')[0] ?? ''),
    // Query strings can hold personal data (GET /users?q=<email>): spans carry the path only.
    requestHook: (span: { setAttribute(k: string, v: string): unknown }, req: { url: string }) =>
      span.setAttribute('url.path', req.url.split('?')[0] ?? ''),
  });
  instrumentation.setTracerProvider(provider);
  await app.register(instrumentation.plugin());
  app.addHook('onClose', async () => {
    await provider.shutdown();
  });
}
