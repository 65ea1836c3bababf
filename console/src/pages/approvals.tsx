import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, Route, Routes, useParams, useSearchParams } from 'react-router';
import { api, ApiFailure, must, type Paths } from '../api/client';
import { choiceParam, useAgent, usePaged } from '../api/hooks';
import { ConfirmDialog } from '../components/confirm';
import { Badge, ChoiceButtons, DataTable, ErrorPanel, Facts, JsonView, Loading, LoadMore, PageHeader, QueryView, Section, StateBadge, Time } from '../components/ui';
import { useSession } from '../session';

type Status = NonNullable<NonNullable<Paths['/approvals']['get']['parameters']['query']>['status']>;
const STATUSES: Status[] = ['pending', 'approved', 'rejected', 'expired', 'cancelled'];

/** Action states after which nothing more happens to the action. */
const SETTLED = new Set(['executed', 'failed', 'denied', 'rejected', 'expired', 'cancelled']);

/** How often the inbox asks again: a new request shows within this many milliseconds. */
const LIVE_MS = 5_000;

export default function ApprovalsPage() {
  return (
    <Routes>
      <Route index element={<Inbox />} />
      <Route path=":approvalId" element={<ApprovalDetail />} />
    </Routes>
  );
}

function AgentName({ id }: { id: string }) {
  const agent = useAgent(id);
  return <Link to={`/agents/${id}`}>{agent.data?.name ?? id.slice(0, 8)}</Link>;
}

function Inbox() {
  const [params, setParams] = useSearchParams();
  const status = choiceParam(params, 'status', STATUSES) ?? 'pending';
  const list = usePaged(
    ['approvals', status],
    (cursor) => must(api.GET('/approvals', { params: { query: { status, limit: 50, ...(cursor ? { cursor } : {}) } } })),
    { refetchInterval: status === 'pending' ? LIVE_MS : false },
  );
  return (
    <>
      <PageHeader title="Approvals" description="Tool calls held for a person's decision. Pending requests refresh by themselves." />
      <ChoiceButtons
        label="Status"
        options={STATUSES.map((s) => ({ value: s, label: s[0]!.toUpperCase() + s.slice(1) }))}
        current={status}
        onPick={(s) => setParams(s === 'pending' ? {} : { status: s })}
      />
      <QueryView query={{ ...list, data: list.rows }} isEmpty={(rows) => rows.length === 0} empty={status === 'pending' ? 'No request is waiting for a decision.' : `No ${status} requests.`}>
        {(rows) => (
          <>
            <DataTable
              caption={`${status} approval requests`}
              rows={rows}
              rowKey={(r) => r.id}
              columns={[
                { header: 'Requested', cell: (r) => <Link to={`/approvals/${r.id}`}><Time value={r.created_at} /></Link> },
                { header: 'Tool', cell: (r) => <code>{r.action.tool}</code> },
                { header: 'Target', cell: (r) => r.action.target },
                { header: 'Agent', cell: (r) => <AgentName id={r.action.agent_id} /> },
                { header: 'On behalf of', cell: (r) => r.action.on_behalf_of ?? <span className="muted">—</span> },
                { header: 'Why held', cell: (r) => r.action.reason_codes.map((c) => <Badge key={c} tone="warn">{c}</Badge>) },
                { header: 'Votes', cell: (r) => `${r.votes.filter((v) => v.decision === 'approve').length} of ${r.approvals_required}` },
                { header: status === 'pending' ? 'Expires' : 'Decided', cell: (r) => <Time value={status === 'pending' ? r.expires_at : r.decided_at} /> },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </>
  );
}

function ApprovalDetail() {
  const { approvalId } = useParams();
  const { can, me } = useSession();
  const queryClient = useQueryClient();
  const approval = useQuery({
    queryKey: ['approval', approvalId],
    queryFn: () => must(api.GET('/approvals/{approval_id}', { params: { path: { approval_id: approvalId! } } })),
    refetchInterval: (q) => (q.state.data?.status === 'pending' ? LIVE_MS : false),
  });
  const [choice, setChoice] = useState<'approve' | 'reject' | null>(null);
  const decide = useMutation({
    mutationFn: (v: { decision: 'approve' | 'reject'; reason: string }) =>
      must(api.POST('/approvals/{approval_id}/decision', { params: { path: { approval_id: approvalId! } }, body: v })),
    onSuccess: (data) => {
      queryClient.setQueryData(['approval', approvalId], data);
      void queryClient.invalidateQueries({ queryKey: ['approvals'] });
      setChoice(null);
    },
  });
  return (
    <QueryView query={approval}>
      {(a) => {
        const mine = a.votes.some((v) => v.approver_id === me.user.id);
        const open = a.status === 'pending' && can('approval:decide');
        return (
          <>
            <PageHeader
              title={`Approval: ${a.action.tool}`}
              description={
                <>
                  <Link to="/approvals">Approvals</Link> · <StateBadge value={a.status} />
                </>
              }
              actions={
                open ? (
                  <>
                    <button type="button" className="primary" onClick={() => setChoice('approve')} disabled={mine}>
                      Approve
                    </button>
                    <button type="button" className="danger" onClick={() => setChoice('reject')} disabled={mine}>
                      Reject
                    </button>
                  </>
                ) : null
              }
            />
            {mine && a.status === 'pending' ? <p className="notice">You have voted; the next vote must come from someone else.</p> : null}
            {decide.isSuccess && !choice ? (
              <p className="success" role="status">
                {a.status === 'pending' ? 'Your vote is recorded; another person must approve too.' : `The request is ${a.status}.`}
              </p>
            ) : null}
            <Section title="The request">
              <Facts
                items={[
                  ['Tool', <code>{a.action.tool}</code>],
                  ['Operation', a.action.operation],
                  ['Target', a.action.target],
                  ['Agent', <AgentName id={a.action.agent_id} />],
                  ['On behalf of', a.action.on_behalf_of],
                  ['Justification', a.action.justification],
                  ['Reason codes', a.action.reason_codes.map((c) => <Badge key={c} tone="warn">{c}</Badge>)],
                  ['Approvals needed', String(a.approvals_required)],
                  ['Requested', <Time value={a.created_at} />],
                  ['Expires', <Time value={a.expires_at} />],
                  ['Action', <Link to={`/actions/${a.action.id}`}><code>{a.action.id}</code></Link>],
                ]}
              />
              <h3>Parameters</h3>
              <p className="small muted">As the agent sent them, with secrets masked.</p>
              <JsonView value={a.action.parameters} label="Parameters" />
            </Section>
            {can('action:read') ? <RuleThatAsked actionId={a.action.id} /> : null}
            <Section title="Votes">
              {a.votes.length === 0 ? (
                <p className="muted">No vote yet.</p>
              ) : (
                <DataTable
                  caption="Votes"
                  rows={a.votes}
                  rowKey={(v) => v.approver_id + v.at}
                  columns={[
                    { header: 'Vote', cell: (v) => <StateBadge value={v.decision === 'approve' ? 'approved' : 'rejected'} /> },
                    { header: 'By', cell: (v) => (v.approver_id === me.user.id ? 'you' : <code>{v.approver_id.slice(0, 8)}</code>) },
                    { header: 'Reason', cell: (v) => v.reason },
                    { header: 'When', cell: (v) => <Time value={v.at} /> },
                  ]}
                />
              )}
            </Section>
            <ConfirmDialog
              open={choice !== null}
              title={choice === 'approve' ? 'Approve this tool call' : 'Reject this tool call'}
              confirmLabel={choice === 'approve' ? 'Approve' : 'Reject'}
              danger={choice === 'reject'}
              reason={{ label: 'Reason', required: true }}
              busy={decide.isPending}
              error={decide.error}
              onConfirm={(reason) => decide.mutate({ decision: choice!, reason })}
              onClose={() => {
                setChoice(null);
                decide.reset();
              }}
            >
              <p>
                <code>{a.action.tool}</code> on <strong>{a.action.target}</strong>.{' '}
                {choice === 'approve' ? 'The agent’s next submission of this call will run.' : 'The agent’s call will not run.'}
              </p>
            </ConfirmDialog>
          </>
        );
      }}
    </QueryView>
  );
}

/** The steps of the decision that held the call for approval, from the action's trace. */
function RuleThatAsked({ actionId }: { actionId: string }) {
  // Live until the action settles: an approved call runs when the agent resubmits it.
  const action = useQuery({
    queryKey: ['action', actionId],
    queryFn: () => must(api.GET('/actions/{action_id}', { params: { path: { action_id: actionId } } })),
    refetchInterval: (q) => (q.state.data && SETTLED.has(q.state.data.state) ? false : LIVE_MS),
  });
  if (action.isPending) return <Loading />;
  if (action.isError) return action.error instanceof ApiFailure && action.error.status === 403 ? null : <ErrorPanel error={action.error} />;
  const steps = (Array.isArray(action.data.trace) ? action.data.trace : []) as Array<{ step: string; outcome: string; reason?: string; detail?: unknown }>;
  const asked = steps.filter((s) => s.outcome === 'require_approval');
  return (
    <Section title="Why it was held">
      <Facts items={[['Action state', <StateBadge value={action.data.state} />], ['Decision', <StateBadge value={action.data.decision} />]]} />
      {asked.length === 0 ? (
        <p className="muted">The trace names no step that asked for approval.</p>
      ) : (
        <ul className="plain">
          {asked.map((s, i) => (
            <li key={i}>
              <strong>{s.step}</strong>
              {s.reason ? <> · <code>{s.reason}</code></> : null}
              {s.detail ? <JsonView value={s.detail} label={`Detail of ${s.step}`} /> : null}
            </li>
          ))}
        </ul>
      )}
    </Section>
  );
}
