import { createHash, randomUUID } from 'node:crypto';
import type { Tx } from '../../db/database.js';
import type { EvidenceEvent } from '../evidence/index.js';
import { countAgents, pinUnpinnedBindings } from '../agents/index.js';
import { openFinding } from '../findings/index.js';
import { toolDefinitionHash } from '../inventory/index.js';
import { checkAgentAllowed, getOrganisation } from '../tenants/index.js';
import type { DiscoveredAgent, DiscoveredMCPServer, DiscoveredTool, DiscoveryResult } from './adapters/contract.js';
import { classifyTool, detectPoisoning, readOnlyMismatch } from './classify/index.js';
import {
  agentByExternalRef,
  bindingExists,
  bindingsPinnedElsewhere,
  countAgentVersions,
  delegationExists,
  insertAgentRow,
  insertAgentVersionRow,
  insertBindingRow,
  insertDelegationRow,
  insertModelRow,
  insertOwnerRow,
  insertResourceRow,
  insertServerRow,
  insertToolRow,
  insertToolVersion,
  latestAgentVersion,
  modelByName,
  nextToolVersion,
  resourceByName,
  serverByEndpoint,
  slugInUse,
  toolsByKey,
  updateAgentRow,
  updateServerRow,
  updateToolRow,
  upsertExternalIdentity,
  type ToolRow,
} from './discovery.repository.js';
import { NO_COUNTS } from './integrations.repository.js';
import type { Counters } from './integrations.schemas.js';

/** Classes whose new tools need one approval by default (behaviour.md, Reconciliation). */
const HIGH_IMPACT = new Set(['financial', 'destructive', 'admin']);

export interface ReconcileScope {
  tx: Tx;
  orgId: string;
  runId: string;
  integrationId: string;
  adapterKey: string;
  now: Date;
}

export interface Reconciled {
  counters: Counters;
  warnings: string[];
  /** Evidence to append with the run's own record (trust-state changes made by discovery). */
  evidence: Omit<EvidenceEvent, 'correlationId'>[];
}

/** sha256 over an MCP server's tool set: each tool's key and definition hash, in key order. */
export function capabilityHash(tools: { tool_key: string; hash: string }[]): string {
  const set = [...tools].sort((a, b) => (a.tool_key < b.tool_key ? -1 : a.tool_key > b.tool_key ? 1 : 0)).map((t) => [t.tool_key, t.hash]);
  // An array of pairs of strings: JSON.stringify is already canonical for it.
  return createHash('sha256').update(JSON.stringify(set)).digest('hex');
}

/**
 * Lands a discovery result in the registry, as the spec's Reconciliation table says: models by provider
 * and name, resources by name, MCP servers by endpoint (a new one with unknown or unsigned provenance opens
 * a finding; a changed tool set opens one and sends an approved server back to unknown), tools by key (the
 * service's own class; new financial, destructive and admin tools need one approval; a changed definition
 * is recorded as a tool version and stops bindings pinned to the old one), agents by external reference
 * (a new one opens an owner-attestation finding; a changed model or description makes a new version).
 * Adds and updates; never deletes. Runs inside the run's final transaction: all of it lands, or nothing.
 */
export async function reconcile(s: ReconcileScope, result: DiscoveryResult): Promise<Reconciled> {
  const out: Reconciled = { counters: { ...NO_COUNTS }, warnings: [...result.warnings], evidence: [] };
  const finding = async (f: Parameters<typeof openFinding>[2]) => {
    const { opened } = await openFinding(s.tx, s.orgId, { ...f, run_id: s.runId, now: s.now });
    if (opened) out.counters.findings_opened++;
  };

  for (const m of result.models) {
    if (await modelByName(s.tx, s.orgId, m.provider, m.model_name)) continue;
    await insertModelRow(s.tx, {
      id: randomUUID(),
      org_id: s.orgId,
      provider: m.provider,
      model_name: m.model_name,
      model_version: m.model_version,
      hosting: m.hosting,
      data_policy: m.data_policy,
      max_data_classification: null,
      source: 'discovery',
      created_at: s.now,
      updated_at: s.now,
    });
    out.counters.models_added++;
  }

  for (const r of result.resources) {
    if (await resourceByName(s.tx, s.orgId, r.name)) continue;
    await insertResourceRow(s.tx, {
      id: randomUUID(),
      org_id: s.orgId,
      resource_type: r.kind,
      name: r.name,
      system: r.system,
      base_url: r.kind === 'api' ? r.base_url : null,
      auth_type: r.kind === 'api' ? 'oauth_client_credentials' : null,
      criticality: r.kind === 'api' ? 'medium' : null,
      kind: r.kind === 'data' ? 'dataset' : null,
      classification: r.kind === 'data' ? (r.classification ?? 'internal') : null,
      contains_personal_data: r.kind === 'data' ? (r.contains_personal_data ?? false) : null,
      region: null,
      source: 'discovery',
      created_at: s.now,
    });
    out.counters.resources_added++;
  }

  for (const server of result.mcp_servers) await reconcileServer(s, server, out, finding);
  for (const agent of result.agents) await reconcileAgent(s, agent, out, finding);
  return out;
}

type Finding = (f: Parameters<typeof openFinding>[2]) => Promise<void>;

async function reconcileServer(s: ReconcileScope, d: DiscoveredMCPServer, out: Reconciled, finding: Finding): Promise<void> {
  const tools = d.tools.map((t) => ({ tool: t, hash: toolDefinitionHash({ description: t.description, input_schema: t.input_schema }) }));
  const capability = capabilityHash(tools.map((t) => ({ tool_key: t.tool.tool_key, hash: t.hash })));
  let server = await serverByEndpoint(s.tx, s.orgId, d.endpoint);
  if (!server) {
    server = await insertServerRow(s.tx, {
      id: randomUUID(),
      org_id: s.orgId,
      name: d.name,
      endpoint: d.endpoint,
      transport: d.transport,
      auth_type: d.auth_type,
      publisher: d.publisher,
      trust_state: d.trust_state,
      capability_hash: capability,
      protocol_version: d.protocol_version,
      source: 'discovery',
      last_seen_at: s.now,
      created_at: s.now,
      updated_at: s.now,
    });
    out.counters.mcp_servers_added++;
    await finding({
      category: 'mcp_provenance',
      severity: d.trust_state === 'unsigned' ? 'high' : 'medium',
      title: `New MCP server ${d.name} with ${d.trust_state} provenance`,
      description:
        `Discovery found the MCP server ${d.endpoint} (publisher ${d.publisher ?? 'not stated'}). It is ${d.trust_state}: ` +
        `its privileged tools are denied (POL-006) until someone with inventory:control approves it.`,
      evidence: { endpoint: d.endpoint, publisher: d.publisher, trust_state: d.trust_state, tools: d.tools.length, capability_hash: capability },
      mcp_server_id: server.id,
      dedupe_key: `mcp_provenance:${server.id}`,
    });
  } else {
    const changed = server.capability_hash !== null && server.capability_hash !== capability;
    const demote = changed && server.trust_state === 'approved';
    await updateServerRow(s.tx, s.orgId, server.id, {
      capability_hash: capability,
      protocol_version: d.protocol_version ?? server.protocol_version,
      last_seen_at: s.now,
      ...(changed ? { updated_at: s.now, version: server.version + 1 } : {}),
      ...(demote ? { trust_state: 'unknown' } : {}),
    });
    if (changed) {
      await finding({
        category: 'mcp_capability_change',
        severity: 'high',
        title: `The tool set of MCP server ${server.name} changed`,
        description:
          `The tools ${server.endpoint} publishes are not those seen before (capability hash ${server.capability_hash!.slice(0, 12)}… → ` +
          `${capability.slice(0, 12)}…).` +
          (demote ? ' It was approved and is back to unknown until someone approves it again.' : ''),
        evidence: { previous_capability_hash: server.capability_hash, capability_hash: capability, trust_state: demote ? { from: 'approved', to: 'unknown' } : server.trust_state },
        mcp_server_id: server.id,
        dedupe_key: `mcp_capability_change:${server.id}:${capability}`,
      });
    }
    if (demote) {
      out.evidence.push({
        eventType: 'mcp_trust_change',
        payload: { mcp_server_id: server.id, reason: 'discovery: its tool set changed', trust_state: { from: 'approved', to: 'unknown' }, run_id: s.runId },
      });
    }
  }
  const existing = await toolsByKey(s.tx, s.orgId, tools.map((t) => t.tool.tool_key));
  for (const { tool, hash } of tools) await reconcileTool(s, server.id, tool, hash, existing.get(tool.tool_key), out, finding);
}

async function reconcileTool(
  s: ReconcileScope,
  serverId: string,
  d: DiscoveredTool,
  hash: string,
  before: ToolRow | undefined,
  out: Reconciled,
  finding: Finding,
): Promise<void> {
  const classified = classifyTool({ name: d.name, title: d.title, description: d.description, input_schema: d.input_schema });
  let toolId: string;
  if (!before) {
    const row = await insertToolRow(s.tx, {
      id: randomUUID(),
      org_id: s.orgId,
      tool_key: d.tool_key,
      name: d.name,
      title: d.title,
      description: d.description,
      mcp_server_id: serverId,
      api_resource_id: null,
      data_resource_id: null,
      operations: d.operations,
      privilege_class: classified.privilege_class,
      approval_class: HIGH_IMPACT.has(classified.privilege_class) ? 'single' : 'none',
      idempotent: d.idempotent ?? false,
      input_schema: JSON.stringify(d.input_schema),
      credential_ref_id: null,
      rate_limit_per_minute: null,
      read_only_hint: d.read_only_hint,
      definition_hash: hash,
      privilege_source: 'discovery',
      source: 'discovery',
      last_seen_at: s.now,
      created_at: s.now,
      updated_at: s.now,
    });
    toolId = row.id;
    out.counters.tools_added++;
    await recordToolVersion(s, toolId, d, hash);
  } else {
    toolId = before.id;
    if (before.definition_hash === hash) {
      // The definition is as before. What its hash leaves out (the title, readOnlyHint) is still recorded as the
      // server declares it now, and checked below: a server may start claiming read-only for a write tool later.
      const declaredChanged = before.title !== d.title || before.read_only_hint !== d.read_only_hint;
      await updateToolRow(s.tx, s.orgId, toolId, {
        last_seen_at: s.now,
        ...(declaredChanged ? { title: d.title, read_only_hint: d.read_only_hint, updated_at: s.now, version: before.version + 1 } : {}),
      });
      if (!declaredChanged) return;
    } else {
      const firstSight = before.definition_hash === null;
      const textChanged = before.description !== d.description || JSON.stringify(before.input_schema) !== JSON.stringify(d.input_schema);
      // The class a person set (declared on registration, or reclassified) is kept; discovery's own follows the definition.
      const keepClass = before.privilege_source !== 'discovery';
      await updateToolRow(s.tx, s.orgId, toolId, {
        title: d.title,
        description: d.description,
        input_schema: JSON.stringify(d.input_schema),
        read_only_hint: d.read_only_hint,
        definition_hash: hash,
        last_seen_at: s.now,
        updated_at: s.now,
        version: before.version + 1,
        ...(before.mcp_server_id === null && !before.builtin ? { mcp_server_id: serverId } : {}),
        ...(keepClass ? {} : { privilege_class: classified.privilege_class }),
      });
      await recordToolVersion(s, toolId, d, hash);
      if (firstSight) {
        // Bindings granted before the tool was ever discovered pin to what discovery sees first.
        await pinUnpinnedBindings(s.tx, s.orgId, toolId, hash);
        if (textChanged) out.counters.tools_changed++;
      } else {
        out.counters.tools_changed++;
        const stopped = await bindingsPinnedElsewhere(s.tx, s.orgId, toolId, hash);
        await finding({
          category: 'tool_definition_changed',
          severity: stopped > 0 ? 'high' : 'medium',
          title: `The definition of tool ${d.tool_key} changed`,
          description:
            `Its description or input schema is not what was seen before.` +
            (stopped > 0
              ? ` ${stopped} permission binding(s) granted against the earlier definition are refused (TOOL_DEFINITION_CHANGED) until someone with identity:manage re-approves them.`
              : ''),
          evidence: { previous_definition_hash: before.definition_hash, definition_hash: hash, bindings_stopped: stopped, description: d.description.slice(0, 2000) },
          tool_id: toolId,
          mcp_server_id: serverId,
          dedupe_key: `tool_definition_changed:${toolId}:${hash}`,
        });
      }
    }
  }

  // The class that governs the tool: a person's, where one set it, else the classifier's.
  const byPerson = before !== undefined && before.privilege_source !== 'discovery';
  const governing = byPerson ? (before.privilege_class as typeof classified.privilege_class) : classified.privilege_class;
  const why = byPerson ? [`class ${governing} set by a person`] : classified.reasons;
  if (readOnlyMismatch(d.read_only_hint, governing)) {
    await finding({
      category: 'tool_poisoning',
      severity: 'high',
      title: `Tool ${d.tool_key} claims to be read-only but can change things`,
      description: `The server declares readOnlyHint true; the tool is classified ${governing} (${why.join('; ')}).`,
      evidence: { declared_read_only: true, privilege_class: governing, reasons: why },
      tool_id: toolId,
      mcp_server_id: serverId,
      dedupe_key: `tool_poisoning:read_only:${toolId}:${hash}`,
    });
  }
  const detections = detectPoisoning({ name: d.name, title: d.title, description: d.description, input_schema: d.input_schema });
  if (detections.length > 0) {
    await finding({
      category: 'tool_poisoning',
      severity: detections.some((x) => x.severity === 'critical') ? 'critical' : 'high',
      title: `Tool ${d.tool_key} carries instructions aimed at the model`,
      description: `Its definition holds ${[...new Set(detections.map((x) => x.kind))].join(', ')}: ${detections[0]!.evidence}`,
      evidence: { detections: detections.map((x) => ({ kind: x.kind, field: x.field, evidence: x.evidence, severity: x.severity })) },
      tool_id: toolId,
      mcp_server_id: serverId,
      dedupe_key: `tool_poisoning:instructions:${toolId}:${hash}`,
    });
  }
}

async function recordToolVersion(s: ReconcileScope, toolId: string, d: DiscoveredTool, hash: string): Promise<void> {
  await insertToolVersion(s.tx, {
    id: randomUUID(),
    org_id: s.orgId,
    tool_id: toolId,
    number: await nextToolVersion(s.tx, s.orgId, toolId),
    title: d.title,
    description: d.description,
    input_schema: JSON.stringify(d.input_schema),
    read_only_hint: d.read_only_hint,
    definition_hash: hash,
    run_id: s.runId,
  });
}

const SLUG_MAX = 100;
function slugOf(name: string): string {
  const s = name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, SLUG_MAX - 4);
  return /^[a-z0-9]/.test(s) ? s : `agent-${s}`.replace(/-+$/, '') || 'agent';
}

async function freeSlug(s: ReconcileScope, name: string): Promise<string> {
  const base = slugOf(name);
  if (!(await slugInUse(s.tx, s.orgId, base))) return base;
  for (let n = 2; ; n++) {
    const candidate = `${base.slice(0, SLUG_MAX - String(n).length - 1)}-${n}`;
    if (!(await slugInUse(s.tx, s.orgId, candidate))) return candidate;
  }
}

/** The registry's model for `provider/model_name`, when it has one. */
async function modelIdOf(s: ReconcileScope, model: string | null): Promise<string | null> {
  if (!model) return null;
  const slash = model.indexOf('/');
  if (slash <= 0) return null;
  return (await modelByName(s.tx, s.orgId, model.slice(0, slash), model.slice(slash + 1)))?.id ?? null;
}

async function reconcileAgent(s: ReconcileScope, d: DiscoveredAgent, out: Reconciled, finding: Finding): Promise<void> {
  const modelId = await modelIdOf(s, d.model);
  const before = await agentByExternalRef(s.tx, s.orgId, d.external_ref);
  let agentId: string;
  if (!before) {
    const org = await getOrganisation(s.tx, s.orgId);
    try {
      checkAgentAllowed(org?.plan ?? 'developer', d.environment, await countAgents(s.tx, s.orgId));
    } catch (err) {
      out.warnings.push(`agent ${d.name} (${d.external_ref}) not added: ${(err as Error).message}`);
      return;
    }
    agentId = randomUUID();
    await insertAgentRow(s.tx, {
      id: agentId,
      org_id: s.orgId,
      slug: await freeSlug(s, d.name),
      name: d.name.slice(0, 200),
      description: d.description,
      purpose: d.purpose,
      framework: d.framework || 'custom',
      environment: d.environment,
      business_unit: d.business_unit,
      criticality: 'medium',
      data_classification: d.data_classification ?? 'internal',
      internet_exposure: d.internet_exposure ?? 'none',
      code_execution: d.code_execution ?? 'none',
      persistent_memory: d.persistent_memory ?? 'none',
      human_approval_coverage: d.human_approval_coverage ?? 'none',
      tags: ['discovered'],
      source: 'discovery',
      external_ref: d.external_ref,
      integration_id: s.integrationId,
      risk_band: null,
      last_attested_at: null,
      last_seen_at: s.now,
      created_at: s.now,
      updated_at: s.now,
    });
    if (d.owner_email) {
      await insertOwnerRow(s.tx, { id: randomUUID(), org_id: s.orgId, agent_id: agentId, name: d.owner_name ?? d.owner_email, email: d.owner_email, owner_type: 'accountable' });
    }
    await insertAgentVersionRow(s.tx, {
      id: randomUUID(),
      org_id: s.orgId,
      agent_id: agentId,
      version_label: 'discovered-1',
      model_id: modelId,
      manifest: JSON.stringify(d),
      change_summary: `Discovered by ${s.adapterKey}`,
      created_by: null,
      created_at: s.now,
    });
    out.counters.agents_added++;
    const missing = [!d.owner_email && 'owner', !d.purpose.trim() && 'purpose', !d.data_classification && 'data classification'].filter(Boolean);
    await finding({
      category: 'owner_attestation',
      severity: d.environment === 'production' && missing.length > 0 ? 'high' : 'medium',
      title: `Discovered agent ${d.name} needs its owner's attestation`,
      description:
        `Discovery found ${d.name} (${d.external_ref}). Its owner should attest what it is for and what it may do.` +
        (missing.length > 0 ? ` Its source states no ${missing.join(', ')}.` : ''),
      evidence: { external_ref: d.external_ref, owner_email: d.owner_email, environment: d.environment, missing },
      agent_id: agentId,
      dedupe_key: `owner_attestation:${agentId}`,
    });
  } else {
    agentId = before.id;
    const latest = await latestAgentVersion(s.tx, s.orgId, agentId);
    const modelChanged = modelId !== null && modelId !== (latest?.model_id ?? null);
    const descriptionChanged = d.description !== before.description;
    if (modelChanged || descriptionChanged) {
      const n = (await countAgentVersions(s.tx, s.orgId, agentId)) + 1;
      await insertAgentVersionRow(s.tx, {
        id: randomUUID(),
        org_id: s.orgId,
        agent_id: agentId,
        version_label: `discovered-${n}`,
        model_id: modelId ?? latest?.model_id ?? null,
        manifest: JSON.stringify(d),
        change_summary: [modelChanged && 'model changed', descriptionChanged && 'description changed'].filter(Boolean).join(', ') + ` (${s.adapterKey})`,
        created_by: null,
        created_at: s.now,
      });
    }
    await updateAgentRow(s.tx, s.orgId, agentId, {
      last_seen_at: s.now,
      ...(descriptionChanged ? { description: d.description, updated_at: s.now, version: before.version + 1 } : {}),
    });
  }

  for (const identity of d.identities) {
    const added = await upsertIdentity(s, agentId, identity);
    if (added) out.counters.identities_added++;
  }
  await grant(s, agentId, d, out);
  for (const del of d.delegations) {
    if (await delegationExists(s.tx, s.orgId, agentId, del.principal_ref)) continue;
    await insertDelegationRow(s.tx, { id: randomUUID(), org_id: s.orgId, agent_id: agentId, ...del, created_at: s.now });
  }
}

async function upsertIdentity(s: ReconcileScope, agentId: string, i: DiscoveredAgent['identities'][number]): Promise<boolean> {
  return upsertExternalIdentity(s.tx, {
    id: randomUUID(),
    org_id: s.orgId,
    agent_id: agentId,
    identity_type: i.identity_type,
    subject: i.subject,
    issuer: i.issuer,
    authentication_strength: i.authentication_strength,
    now: s.now,
  });
}

/**
 * The tools and resources the source says the agent may use become permission bindings when they exist in
 * the registry (a tool binding pinned to the definition the tool has now); names the registry does not know
 * are reported as warnings, never invented.
 */
async function grant(s: ReconcileScope, agentId: string, d: DiscoveredAgent, out: Reconciled): Promise<void> {
  const tools = await toolsByKey(s.tx, s.orgId, d.tool_grants);
  for (const key of d.tool_grants) {
    const tool = tools.get(key);
    if (!tool) {
      out.warnings.push(`agent ${d.name}: tool ${key} is not in the inventory; not granted`);
      continue;
    }
    if (await bindingExists(s.tx, s.orgId, agentId, 'tool', tool.id)) continue;
    await insertBindingRow(s.tx, {
      id: randomUUID(),
      org_id: s.orgId,
      agent_id: agentId,
      target_kind: 'tool',
      target_id: tool.id,
      actions: ['invoke'],
      pinned_definition_hash: tool.definition_hash,
      pinned_at: tool.definition_hash ? s.now : null,
      created_at: s.now,
    });
  }
  for (const name of d.resource_grants) {
    const resource = await resourceByName(s.tx, s.orgId, name);
    if (!resource) {
      out.warnings.push(`agent ${d.name}: resource ${name} is not in the inventory; not granted`);
      continue;
    }
    const kind = resource.resource_type === 'api' ? 'api_resource' : 'data_resource';
    if (await bindingExists(s.tx, s.orgId, agentId, kind, resource.id)) continue;
    await insertBindingRow(s.tx, {
      id: randomUUID(),
      org_id: s.orgId,
      agent_id: agentId,
      target_kind: kind,
      target_id: resource.id,
      actions: ['read'],
      pinned_definition_hash: null,
      pinned_at: null,
      created_at: s.now,
    });
  }
}
