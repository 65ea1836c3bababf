import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { Link, Route, Routes, useLocation, useNavigate, useParams } from 'react-router';
import { api, ApiFailure, must, type Paths } from '../api/client';
import { ConfirmDialog } from '../components/confirm';
import { Badge, DataTable, ErrorPanel, Facts, Field, JsonView, Loading, PageHeader, QueryView, Section, StateBadge, Time } from '../components/ui';
import { useSession } from '../session';
import './integrations.css';

type Integration = Paths['/integrations']['get']['responses'][200]['content']['application/json']['items'][number];
type Adapter = Paths['/integrations/catalogue']['get']['responses'][200]['content']['application/json']['items'][number];
type Run = Paths['/connectors/{connector_id}/runs']['get']['responses'][200]['content']['application/json']['items'][number];
type NewIntegration = NonNullable<Paths['/integrations']['post']['requestBody']>['content']['application/json'];
type Credential = Paths['/resources/credentials']['get']['responses'][200]['content']['application/json']['items'][number];

/** While a run is running, its connector's runs (and the list's latest run) are asked again this often. */
const RUNNING_MS = 2_000;

/** The counters of a run, in the order and words a person reads them. */
const COUNTERS: Array<[keyof Run['counters'], string]> = [
  ['agents_added', 'Agents added'],
  ['models_added', 'Models added'],
  ['mcp_servers_added', 'MCP servers added'],
  ['tools_added', 'Tools added'],
  ['resources_added', 'Resources added'],
  ['identities_added', 'Identities added'],
  ['tools_changed', 'Tools changed'],
  ['findings_opened', 'Findings opened'],
];

/** The webhook kind receives events and has no adapter in the catalogue: it is offered beside the adapters. */
const WEBHOOK = 'webhook';

export default function IntegrationsPage() {
  const { can } = useSession();
  if (!can('integration:read')) {
    return (
      <>
        <PageHeader title="Integrations" />
        <ErrorPanel
          title="You cannot see the integrations"
          error={new ApiFailure(403, 'forbidden', 'Integrations and their discovery runs are shown to roles that read integrations.', null, { required_permission: 'integration:read' })}
        />
      </>
    );
  }
  return (
    <Routes>
      <Route index element={<IntegrationList />} />
      <Route path=":integrationId" element={<IntegrationDetail />} />
    </Routes>
  );
}

const anyRunning = (items: Integration[] | undefined) => items?.some((i) => i.connector.last_run?.status === 'running') ?? false;

function useIntegrations() {
  return useQuery({
    queryKey: ['integrations'],
    queryFn: () => must(api.GET('/integrations')),
    refetchInterval: (q) => (anyRunning(q.state.data?.items) ? RUNNING_MS : false),
  });
}

function useCatalogue() {
  return useQuery({ queryKey: ['integrations', 'catalogue'], queryFn: () => must(api.GET('/integrations/catalogue')), staleTime: Infinity });
}

/** What a run found, in one line: the counters that are not zero. */
function found(run: Run): string {
  const parts = COUNTERS.filter(([k]) => run.counters[k] > 0).map(([k, label]) => `${label.toLowerCase()}: ${run.counters[k]}`);
  return parts.length > 0 ? parts.join(' · ') : 'nothing new';
}

function RunState({ run }: { run: Run | null }) {
  if (!run) return <span className="muted">never run</span>;
  return (
    <>
      {run.status === 'running' ? <Badge tone="info">running</Badge> : <StateBadge value={run.status} />} <Time value={run.finished_at ?? run.started_at} />
    </>
  );
}

function IntegrationList() {
  const { can } = useSession();
  const list = useIntegrations();
  const [configuring, setConfiguring] = useState(false);
  return (
    <>
      <PageHeader
        title="Integrations"
        description="Sources that discovery reads (model vendors, directories, code hosts, MCP servers), their connectors and runs."
        actions={
          can('integration:manage') && !configuring ? (
            <button type="button" className="primary" onClick={() => setConfiguring(true)}>
              Configure an integration
            </button>
          ) : null
        }
      />
      {configuring ? <ConfigureForm onCancel={() => setConfiguring(false)} /> : null}
      <Section title="Configured integrations">
        <QueryView
          query={list}
          isEmpty={(d) => d.items.length === 0}
          empty={can('integration:manage') ? 'No integration yet. Configure one from the catalogue below; a mock adapter needs no credentials.' : 'No integration yet.'}
        >
          {(d) => (
            <DataTable
              caption="Integrations"
              rows={d.items}
              rowKey={(i) => i.id}
              columns={[
                { header: 'Name', cell: (i) => <Link to={`/integrations/${i.id}`}>{i.name}</Link> },
                { header: 'Kind', cell: (i) => i.kind.replaceAll('_', ' ') },
                { header: 'Mode', cell: (i) => i.mode },
                { header: 'Adapter', cell: (i) => <code>{i.connector.adapter_key}</code> },
                { header: 'Integration', cell: (i) => <StateBadge value={i.status} /> },
                { header: 'Connector', cell: (i) => <Enabled value={i.connector.enabled} /> },
                { header: 'Latest run', cell: (i) => <RunState run={i.connector.last_run} /> },
              ]}
            />
          )}
        </QueryView>
      </Section>
      <Catalogue />
    </>
  );
}

function Enabled({ value }: { value: boolean }) {
  return value ? <Badge tone="good">enabled</Badge> : <Badge tone="bad">disabled</Badge>;
}

function Catalogue() {
  const catalogue = useCatalogue();
  return (
    <Section title="Catalogue">
      <p className="small muted">
        Every adapter Tollgate has: a live one that reads the source, and a mock one with fictional data that needs no network or secret. Secrets never go in the configuration: a live
        adapter that authenticates names a credential reference, and the secret stays in the secret store.
      </p>
      <QueryView query={catalogue}>
        {(d) => (
          <DataTable
            caption="Adapters"
            rows={d.items}
            rowKey={(a) => a.key}
            columns={[
              { header: 'Adapter', cell: (a) => <code>{a.key}</code> },
              { header: 'Kind', cell: (a) => a.kind.replaceAll('_', ' ') },
              { header: 'Mode', cell: (a) => a.mode },
              { header: 'Status', cell: (a) => <Badge tone={a.status === 'GA' ? 'good' : 'info'}>{a.status}</Badge> },
              {
                header: 'Configuration keys',
                cell: (a) =>
                  a.config_keys.length === 0 ? (
                    <span className="muted">none</span>
                  ) : (
                    <ul className="plain keys">
                      {a.config_keys.map((k) => (
                        <li key={k}>
                          <code>{k}</code>
                        </li>
                      ))}
                    </ul>
                  ),
              },
              { header: 'Secret', cell: (a) => (a.needs_secret ? 'credential reference' : <span className="muted">none</span>) },
              { header: 'What it reads', cell: (a) => a.description },
            ]}
          />
        )}
      </QueryView>
    </Section>
  );
}

function ConfigureForm({ onCancel }: { onCancel: () => void }) {
  const { can } = useSession();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const catalogue = useCatalogue();
  const [adapterKey, setAdapterKey] = useState('');
  const [name, setName] = useState('');
  const [config, setConfig] = useState<Record<string, string>>({});
  const [credential, setCredential] = useState('');
  const adapter: Adapter | undefined = catalogue.data?.items.find((a) => a.key === adapterKey);
  const create = useMutation({
    mutationFn: (body: NewIntegration) => must(api.POST('/integrations', { body })),
    onSuccess: (created) => {
      queryClient.setQueryData<{ items: Integration[] }>(['integrations'], (old) => (old ? { items: [created, ...old.items] } : old));
      void queryClient.invalidateQueries({ queryKey: ['integrations'], exact: true });
      navigate(`/integrations/${created.id}`, { state: { created: true } });
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (adapterKey === WEBHOOK) {
      create.mutate({ kind: 'webhook', name: name.trim(), mode: 'live', config: {} });
      return;
    }
    if (!adapter) return;
    // Empty fields are left out: the adapter applies its own defaults to keys it does not get.
    const values = Object.fromEntries(adapter.config_keys.map((k) => [k, (config[k] ?? '').trim()]).filter(([, v]) => v !== ''));
    create.mutate({
      kind: adapter.kind,
      mode: adapter.mode,
      name: name.trim(),
      config: values,
      credential_ref_id: adapter.needs_secret && credential ? credential : null,
    });
  };
  return (
    <Section title="Configure an integration">
      <QueryView query={catalogue}>
        {(d) => (
          <form onSubmit={submit} className="configure">
            <Field label="Adapter" hint={adapter?.description ?? (adapterKey === WEBHOOK ? 'Receives events from the source; it has nothing to run.' : 'Pick the source and its mode.')}>
              {(id, hint) => (
                <select
                  id={id}
                  aria-describedby={hint}
                  value={adapterKey}
                  required
                  onChange={(e) => {
                    setAdapterKey(e.target.value);
                    setConfig({});
                    setCredential('');
                  }}
                >
                  <option value="">Choose an adapter…</option>
                  {d.items.map((a) => (
                    <option key={a.key} value={a.key}>
                      {a.key} ({a.kind.replaceAll('_', ' ')}, {a.mode}, {a.status})
                    </option>
                  ))}
                  <option value={WEBHOOK}>webhook (receives events)</option>
                </select>
              )}
            </Field>
            <Field label="Name" hint="How people will know it: 2 to 200 characters.">
              {(id, hint) => <input id={id} aria-describedby={hint} value={name} onChange={(e) => setName(e.target.value)} required minLength={2} maxLength={200} />}
            </Field>
            {adapter && adapter.config_keys.length > 0 ? (
              <fieldset>
                <legend>Configuration</legend>
                <p className="small muted">Non-secret settings; leave a field empty for the adapter’s default. The adapter checks them when you save.</p>
                {adapter.config_keys.map((k) => (
                  <Field key={k} label={k}>
                    {(id) => <input id={id} value={config[k] ?? ''} onChange={(e) => setConfig({ ...config, [k]: e.target.value })} autoComplete="off" spellCheck={false} />}
                  </Field>
                ))}
              </fieldset>
            ) : adapter ? (
              <p className="small muted">This adapter has no settings.</p>
            ) : null}
            {adapter?.needs_secret ? <CredentialPicker value={credential} onChange={setCredential} canList={can('inventory:read')} /> : null}
            {create.error ? <ErrorPanel error={create.error} title="The integration was not saved" /> : null}
            <div className="actions">
              <button type="submit" className="primary" disabled={create.isPending || !adapterKey}>
                {create.isPending ? 'Saving…' : 'Save integration'}
              </button>
              <button type="button" onClick={onCancel}>
                Cancel
              </button>
            </div>
          </form>
        )}
      </QueryView>
    </Section>
  );
}

/** The secret of a live adapter is named by a credential reference of the inventory; the secret itself is never typed here. */
function CredentialPicker({ value, onChange, canList }: { value: string; onChange: (v: string) => void; canList: boolean }) {
  const credentials = useQuery({
    queryKey: ['credentials'],
    queryFn: () => must(api.GET('/resources/credentials')),
    enabled: canList,
  });
  const hint = 'Where the secret lives (vault, a cloud secret manager, an environment variable of the worker). Add references under Inventory.';
  if (!canList) return <p className="notice">This adapter needs a credential reference, and your roles cannot list them (inventory:read). Save it without one, or ask someone who can.</p>;
  if (credentials.isPending) return <Loading label="Loading credential references…" />;
  if (credentials.isError) return <ErrorPanel error={credentials.error} title="Could not load the credential references" />;
  const usable = credentials.data.items.filter((c: Credential) => c.status === 'active');
  return (
    <Field label="Credential reference" hint={usable.length === 0 ? `The inventory has no active credential reference yet. ${hint}` : hint}>
      {(id, h) => (
        <select id={id} aria-describedby={h} value={value} onChange={(e) => onChange(e.target.value)}>
          <option value="">None</option>
          {usable.map((c) => (
            <option key={c.id} value={c.id}>
              {c.name} ({c.provider}: {c.secret_path})
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

/** An idempotency key for one click of "Run now": a retried request then answers the same run. */
function runKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

type Change = { what: 'integration'; to: 'active' | 'disabled' } | { what: 'connector'; to: boolean };

function IntegrationDetail() {
  const { integrationId } = useParams();
  const { can } = useSession();
  const location = useLocation();
  const queryClient = useQueryClient();
  const list = useIntegrations();
  const [change, setChange] = useState<Change | null>(null);
  const [done, setDone] = useState<string | null>((location.state as { created?: boolean } | null)?.created ? 'The integration is configured. Run its connector to discover what the source holds.' : null);

  const replace = (updated: Integration) =>
    queryClient.setQueryData<{ items: Integration[] }>(['integrations'], (old) => (old ? { items: old.items.map((i) => (i.id === updated.id ? updated : i)) } : old));

  const apply = useMutation({
    mutationFn: ({ c, integration, reason }: { c: Change; integration: Integration; reason: string }) =>
      c.what === 'integration'
        ? must(api.POST('/integrations/{integration_id}/status', { params: { path: { integration_id: integration.id } }, body: { status: c.to, reason, confirm: true } }))
        : must(api.POST('/connectors/{connector_id}/enabled', { params: { path: { connector_id: integration.connector.id } }, body: { enabled: c.to, reason, confirm: true } })),
    onSuccess: (updated, { c }) => {
      replace(updated);
      setChange(null);
      setDone(c.what === 'integration' ? `The integration is ${updated.status}.` : `The connector is ${updated.connector.enabled ? 'enabled' : 'disabled'}.`);
    },
  });

  if (list.isPending) return <Loading />;
  if (list.isError) return <ErrorPanel error={list.error} title="Could not load this integration" />;
  const integration = list.data.items.find((i) => i.id === integrationId);
  if (!integration) {
    return (
      <>
        <PageHeader title="Integration" description={<Link to="/integrations">Integrations</Link>} />
        <ErrorPanel error={new ApiFailure(404, 'not_found', `No integration ${integrationId} in this organisation.`, null, undefined)} title="Not found" />
      </>
    );
  }
  const i = integration;
  const manage = can('integration:manage');
  return (
    <>
      <PageHeader
        title={`Integration: ${i.name}`}
        description={
          <>
            <Link to="/integrations">Integrations</Link> · <StateBadge value={i.status} />
          </>
        }
        actions={
          manage ? (
            i.status === 'active' ? (
              <button type="button" className="danger" onClick={() => setChange({ what: 'integration', to: 'disabled' })}>
                Disable integration
              </button>
            ) : (
              <button type="button" onClick={() => setChange({ what: 'integration', to: 'active' })}>
                Activate integration
              </button>
            )
          ) : null
        }
      />
      {done ? (
        <p className="success" role="status">
          {done}
        </p>
      ) : null}
      <Section title="Configuration">
        <Facts
          items={[
            ['Kind', i.kind.replaceAll('_', ' ')],
            ['Mode', i.mode],
            ['Status', <StateBadge value={i.status} />],
            ['Credential reference', i.credential_ref_id ? <code>{i.credential_ref_id}</code> : null],
            ['Created', <Time value={i.created_at} />],
            ['Updated', <Time value={i.updated_at} />],
          ]}
        />
        {Object.keys(i.config).length > 0 ? (
          <>
            <h3>Settings</h3>
            <JsonView value={i.config} label="Settings" />
          </>
        ) : null}
      </Section>
      <ConnectorPanel integration={i} onChange={setChange} onStarted={() => setDone(null)} />
      <ConfirmDialog
        // One dialog per change: a reason typed for one never shows, even for a frame, in the next.
        key={change ? `${change.what}-${String(change.to)}` : 'closed'}
        open={change !== null}
        title={
          change?.what === 'integration'
            ? change.to === 'disabled'
              ? 'Disable this integration'
              : 'Activate this integration'
            : change?.to
              ? 'Enable this connector'
              : 'Disable this connector'
        }
        confirmLabel={change?.what === 'integration' ? (change.to === 'disabled' ? 'Disable' : 'Activate') : change?.to ? 'Enable' : 'Disable'}
        danger={change?.what === 'integration' ? change.to === 'disabled' : change?.to === false}
        reason={{ label: 'Reason', required: true }}
        busy={apply.isPending}
        error={apply.error}
        onConfirm={(reason) => change && apply.mutate({ c: change, integration: i, reason })}
        onClose={() => {
          setChange(null);
          apply.reset();
        }}
      >
        <p>
          {change?.what === 'integration'
            ? change.to === 'disabled'
              ? `${i.name} stops: its connector cannot run until the integration is activated again.`
              : `${i.name} becomes active; its connector can run again if it is enabled.`
            : change?.to
              ? `The connector of ${i.name} may run again.`
              : `The connector of ${i.name} stops: no run starts until it is enabled again.`}{' '}
          The reason is kept in the audit trail and the evidence.
        </p>
      </ConfirmDialog>
    </>
  );
}

function ConnectorPanel({ integration: i, onChange, onStarted }: { integration: Integration; onChange: (c: Change) => void; onStarted: () => void }) {
  const { can } = useSession();
  const queryClient = useQueryClient();
  const connectorId = i.connector.id;
  const runs = useQuery({
    queryKey: ['connector-runs', connectorId],
    queryFn: () => must(api.GET('/connectors/{connector_id}/runs', { params: { path: { connector_id: connectorId } } })),
    refetchInterval: (q) => (q.state.data?.items.some((r) => r.status === 'running') ? RUNNING_MS : false),
  });
  const running = runs.data?.items.some((r) => r.status === 'running') ?? false;
  // When a run ends, the list's "latest run" (and the registry pages) are out of date.
  const wasRunning = useRef(running);
  useEffect(() => {
    if (wasRunning.current && !running) void queryClient.invalidateQueries({ queryKey: ['integrations'], exact: true });
    wasRunning.current = running;
  }, [running, queryClient]);

  const start = useMutation({
    mutationFn: () => must(api.POST('/connectors/{connector_id}/run', { params: { path: { connector_id: connectorId } }, body: { idempotency_key: runKey() } })),
    onSuccess: (run) => {
      onStarted();
      queryClient.setQueryData<{ items: Run[] }>(['connector-runs', connectorId], (old) => ({ items: [run, ...(old?.items.filter((r) => r.id !== run.id) ?? [])] }));
      void queryClient.invalidateQueries({ queryKey: ['integrations'], exact: true });
    },
  });

  const blocked =
    i.kind === WEBHOOK
      ? 'A webhook integration receives events; it has nothing to run.'
      : i.status !== 'active'
        ? 'The integration is disabled: activate it to run its connector.'
        : !i.connector.enabled
          ? 'The connector is disabled: enable it to run.'
          : running
            ? 'A run is in progress; the next can start when it ends.'
            : null;
  const latest = runs.data?.items[0];
  return (
    <>
      <Section
        title="Connector"
        actions={
          <div className="actions">
            {can('connector:run') ? (
              <button type="button" className="primary" onClick={() => start.mutate()} disabled={blocked !== null || start.isPending} aria-describedby={blocked ? 'run-blocked' : undefined}>
                {start.isPending ? 'Starting…' : 'Run now'}
              </button>
            ) : null}
            {can('integration:manage') ? (
              i.connector.enabled ? (
                <button type="button" className="danger" onClick={() => onChange({ what: 'connector', to: false })}>
                  Disable connector
                </button>
              ) : (
                <button type="button" onClick={() => onChange({ what: 'connector', to: true })}>
                  Enable connector
                </button>
              )
            ) : null}
          </div>
        }
      >
        <Facts
          items={[
            ['Adapter', <code>{i.connector.adapter_key}</code>],
            ['Connector', <Enabled value={i.connector.enabled} />],
            ['Last run', i.connector.last_run_at ? <Time value={i.connector.last_run_at} /> : 'never'],
          ]}
        />
        {blocked && can('connector:run') ? (
          <p id="run-blocked" className="small muted">
            {blocked}
          </p>
        ) : null}
        {start.error ? <ErrorPanel error={start.error} title="The run did not start" /> : null}
      </Section>
      <Section title="Latest run">
        <QueryView query={{ ...runs, data: latest }} isEmpty={(r) => r === undefined} empty="The connector has not run yet.">
          {(r) => <RunFacts run={r!} />}
        </QueryView>
      </Section>
      <Section title="Runs">
        <QueryView query={runs} isEmpty={(d) => d.items.length === 0} empty="No run yet.">
          {(d) => (
            <DataTable
              caption="The connector's last 50 runs, newest first"
              rows={d.items}
              rowKey={(r) => r.id}
              columns={[
                { header: 'Started', cell: (r) => <Time value={r.started_at} /> },
                { header: 'Status', cell: (r) => (r.status === 'running' ? <Badge tone="info">running</Badge> : <StateBadge value={r.status} />) },
                { header: 'Finished', cell: (r) => <Time value={r.finished_at} /> },
                { header: 'Found', cell: (r) => (r.status === 'running' ? <span className="muted">—</span> : found(r)) },
                { header: 'Warnings', cell: (r) => (r.warnings.length === 0 ? <span className="muted">none</span> : String(r.warnings.length)), className: 'num' },
                { header: 'Error', cell: (r) => r.error_message ?? <span className="muted">—</span> },
              ]}
            />
          )}
        </QueryView>
      </Section>
    </>
  );
}

function RunFacts({ run }: { run: Run }) {
  return (
    <div aria-live="polite" aria-busy={run.status === 'running'}>
      <Facts
        items={[
          ['Status', run.status === 'running' ? <Badge tone="info">running</Badge> : <StateBadge value={run.status} />],
          ['Started', <Time value={run.started_at} />],
          ['Finished', run.finished_at ? <Time value={run.finished_at} /> : 'not yet'],
          ['Correlation ID', <code>{run.correlation_id}</code>],
          ...(run.status === 'running' ? [] : COUNTERS.map(([k, label]): [string, string] => [label, String(run.counters[k])])),
        ]}
      />
      {run.error_message ? (
        <div className="error-panel" role="alert">
          <strong>The run failed</strong>
          <p>{run.error_message}</p>
        </div>
      ) : null}
      {run.warnings.length > 0 ? (
        <>
          <h3>Warnings</h3>
          <ul>
            {run.warnings.map((w, n) => (
              <li key={n}>{w}</li>
            ))}
          </ul>
        </>
      ) : null}
    </div>
  );
}
