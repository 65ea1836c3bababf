/** The approvals module's public face: approval requests of actions, their expiry and cancellation. */
export {
  approvalOfAction,
  cancelApprovals,
  expireIfDue,
  openApprovalsOfAgent,
  type ApprovalRow,
} from './approvals.repository.js';
