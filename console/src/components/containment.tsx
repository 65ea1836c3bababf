import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, must, type Paths } from '../api/client';
import { useSession } from '../session';
import { ConfirmDialog } from './confirm';

export type Agent = Paths['/agents/{agent_id}']['get']['responses'][200]['content']['application/json'];

type Operation = 'suspend' | 'restore' | 'revoke-sessions' | 'revoke' | 'gateway-on' | 'gateway-off';

interface OperationInfo {
  /** The button's label and the dialog's confirm label. */
  label: string;
  title: (name: string) => string;
  /** What happens, said in the dialog before the person confirms. */
  consequence: string;
  danger: boolean;
  done: string;
}

const OPERATIONS: Record<Operation, OperationInfo> = {
  suspend: {
    label: 'Suspend',
    title: (n) => `Suspend ${n}`,
    consequence: 'Its tokens stop working at once, no new token is issued, and its pending approval requests are cancelled. You can restore it later.',
    danger: true,
    done: 'The agent is suspended.',
  },
  restore: {
    label: 'Restore',
    title: (n) => `Restore ${n}`,
    consequence: 'It may ask for tokens again. Tokens issued before the suspension stay dead.',
    danger: false,
    done: 'The agent is restored.',
  },
  'revoke-sessions': {
    label: 'Revoke sessions',
    title: (n) => `Revoke the sessions of ${n}`,
    consequence: 'Every token issued to it so far stops working; it can ask for new ones with its identities.',
    danger: true,
    done: 'The agent’s sessions are revoked.',
  },
  revoke: {
    label: 'Revoke',
    title: (n) => `Revoke ${n} permanently`,
    consequence:
      'This is permanent and cannot be undone: the agent and all its identities are revoked, its open requests are cancelled, and it can never be restored.',
    danger: true,
    done: 'The agent is revoked permanently.',
  },
  'gateway-off': {
    label: 'Turn gateway access off',
    title: (n) => `Turn gateway access off for ${n}`,
    consequence: 'The gateway refuses its calls until access is turned on again.',
    danger: true,
    done: 'Gateway access is off.',
  },
  'gateway-on': {
    label: 'Turn gateway access on',
    title: (n) => `Turn gateway access on for ${n}`,
    consequence: 'The gateway decides its calls again under its bindings and the policies.',
    danger: false,
    done: 'Gateway access is on.',
  },
};

/** The operations that make sense in the agent's state: nothing changes a revoked agent. */
function available(agent: Agent): Operation[] {
  if (agent.status === 'revoked') return [];
  const gateway: Operation = agent.gateway_access ? 'gateway-off' : 'gateway-on';
  // A suspended agent's tokens are already dead, so revoking its sessions would change nothing.
  if (agent.status === 'suspended') return ['restore', gateway, 'revoke'];
  return ['suspend', 'revoke-sessions', gateway, 'revoke'];
}

function send(agentId: string, op: Operation, reason: string) {
  const params = { path: { agent_id: agentId } };
  // The containment operations declare no If-Match (docs/openapi.json): `confirm: true` is their guard.
  const body = { reason, confirm: true };
  switch (op) {
    case 'suspend':
      return must(api.POST('/agents/{agent_id}/suspend', { params, body }));
    case 'restore':
      return must(api.POST('/agents/{agent_id}/restore', { params, body }));
    case 'revoke-sessions':
      return must(api.POST('/agents/{agent_id}/revoke-sessions', { params, body }));
    case 'revoke':
      return must(api.POST('/agents/{agent_id}/revoke', { params, body }));
    case 'gateway-on':
    case 'gateway-off':
      return must(api.POST('/agents/{agent_id}/gateway-access', { params, body: { ...body, enabled: op === 'gateway-on' } }));
  }
}

/**
 * The containment buttons of an agent's page, each behind a confirmation in which the person types the
 * agent's name and gives a reason. Shown only to people with `agent:control` (the API checks again).
 */
export function ContainmentActions({ agent, onDone }: { agent: Agent; onDone: (message: string) => void }) {
  const { can } = useSession();
  const queryClient = useQueryClient();
  const [op, setOp] = useState<Operation | null>(null);
  const run = useMutation({
    mutationFn: (v: { op: Operation; reason: string }) => send(agent.id, v.op, v.reason),
    onSuccess: (updated, v) => {
      queryClient.setQueryData(['agent', agent.id], updated);
      void queryClient.invalidateQueries({ queryKey: ['agent-containment', agent.id] });
      void queryClient.invalidateQueries({ queryKey: ['agents'] });
      // Revoking takes the identities with it; any change can move the risk score.
      void queryClient.invalidateQueries({ queryKey: ['agent-identities', agent.id] });
      void queryClient.invalidateQueries({ queryKey: ['agent-risk', agent.id] });
      setOp(null);
      onDone(OPERATIONS[v.op].done);
    },
  });
  if (!can('agent:control')) return null;
  const ops = available(agent);
  const info = op ? OPERATIONS[op] : null;
  return (
    <>
      {ops.map((o) => (
        <button
          key={o}
          type="button"
          className={OPERATIONS[o].danger ? 'danger' : 'primary'}
          onClick={() => {
            run.reset();
            setOp(o);
          }}
        >
          {OPERATIONS[o].label}
        </button>
      ))}
      <ConfirmDialog
        open={op !== null}
        title={info ? info.title(agent.name) : ''}
        confirmLabel={info?.label ?? ''}
        danger={info?.danger ?? false}
        typedName={agent.name}
        reason={{ label: 'Reason', required: true }}
        busy={run.isPending}
        error={run.error}
        onConfirm={(reason) => op && run.mutate({ op, reason })}
        onClose={() => {
          setOp(null);
          run.reset();
        }}
      >
        <p>{info?.consequence}</p>
        <p className="small muted">The reason is kept in the containment history, the audit log and the evidence chain.</p>
      </ConfirmDialog>
    </>
  );
}
