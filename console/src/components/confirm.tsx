import { useEffect, useId, useRef, useState, type FormEvent, type ReactNode } from 'react';
import { ErrorPanel } from './ui';

/**
 * A modal confirmation (the browser's own <dialog>: focus is trapped inside it and Escape closes it).
 * With `typedName`, the button stays disabled until the person types that name exactly, as for
 * containment; with `reason`, a reason is asked for and sent with the action.
 */
export function ConfirmDialog({
  open,
  title,
  children,
  confirmLabel,
  typedName,
  reason,
  danger = false,
  busy = false,
  error,
  onConfirm,
  onClose,
}: {
  open: boolean;
  title: string;
  children?: ReactNode;
  confirmLabel: string;
  typedName?: string;
  reason?: { label: string; required: boolean };
  danger?: boolean;
  busy?: boolean;
  error?: unknown;
  onConfirm: (reason: string) => void;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const nameId = useId();
  const reasonId = useId();
  const [typed, setTyped] = useState('');
  const [why, setWhy] = useState('');

  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) {
      setTyped('');
      setWhy('');
      d.showModal();
    } else if (!open && d.open) {
      d.close();
      // Cleared on the way out as well: a dialog reopened for another action must not show the last reason for a frame.
      setTyped('');
      setWhy('');
    }
  }, [open]);

  const nameOk = typedName === undefined || typed === typedName;
  const reasonOk = !reason?.required || why.trim().length > 0;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (nameOk && reasonOk && !busy) onConfirm(why.trim());
  };

  return (
    // The close event also follows our own close() once `open` turns false: only a close the person made (Escape) is reported.
    <dialog ref={ref} aria-labelledby={titleId} onClose={() => open && onClose()} className="dialog">
      <form onSubmit={submit}>
        <h2 id={titleId}>{title}</h2>
        {children}
        {reason ? (
          <div className="field">
            <label htmlFor={reasonId}>
              {reason.label}
              {reason.required ? ' (required)' : ''}
            </label>
            <textarea id={reasonId} value={why} onChange={(e) => setWhy(e.target.value)} required={reason.required} rows={3} maxLength={2000} />
          </div>
        ) : null}
        {typedName !== undefined ? (
          <div className="field">
            <label htmlFor={nameId}>
              Type <strong className="typed-name">{typedName}</strong> to confirm
            </label>
            <input id={nameId} value={typed} onChange={(e) => setTyped(e.target.value)} autoComplete="off" spellCheck={false} />
          </div>
        ) : null}
        {error ? <ErrorPanel error={error} /> : null}
        <div className="dialog-actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className={danger ? 'danger' : 'primary'} disabled={!nameOk || !reasonOk || busy}>
            {busy ? 'Working…' : confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}
