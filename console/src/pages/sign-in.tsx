import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useLocation } from 'react-router';
import { api, must } from '../api/client';
import { ErrorPanel, Field, QueryView } from '../components/ui';
import { SESSION_KEY } from '../session';

/**
 * Why a sign-in at the identity provider was refused, in words: the API's callback sends a browser back here with
 * `sign_in_error` (the refusal's reason) instead of showing it the JSON envelope.
 */
const REFUSED: Record<string, string> = {
  mfa_required:
    'Your identity provider did not confirm multi-factor authentication for this sign-in. Sign in there with your authenticator app or passkey, then try again.',
  email_not_verified: 'Your identity provider did not share a verified email address for this account.',
  identity_mismatch: 'This email address already belongs to another account at your identity provider.',
  account_disabled: 'Your account is disabled; ask an administrator of your organisation.',
  no_sign_in_in_progress: 'The sign-in took too long or was started in another browser; start it again.',
};

/** Sign-in: the deployment's providers (OpenID Connect; development sign-in where it is enabled). */
export function SignInPage() {
  const queryClient = useQueryClient();
  const location = useLocation();
  const params = new URLSearchParams(location.search);
  const returnTo = params.get('return_to') ?? '/';
  const refused = params.get('sign_in_error');
  const providers = useQuery({ queryKey: ['auth', 'providers'], queryFn: () => must(api.GET('/auth/providers')) });
  const [email, setEmail] = useState('');
  const devLogin = useMutation({
    mutationFn: (address: string) => must(api.POST('/auth/dev-login', { body: { email: address } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: SESSION_KEY }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    devLogin.mutate(email.trim());
  };
  return (
    <main id="main" className="standalone">
      <h1>Sign in to Tollgate</h1>
      {refused !== null ? (
        <div className="error-panel" role="alert">
          <strong>The sign-in was refused</strong>
          <p>{REFUSED[refused] ?? 'The sign-in could not be completed at your identity provider; start it again.'}</p>
          <p className="small muted">
            Reason <code>{refused.slice(0, 100)}</code>
          </p>
        </div>
      ) : null}
      <QueryView query={providers} isEmpty={(p) => p.providers.length === 0} empty="No sign-in method is configured on this deployment.">
        {(p) => (
          <div className="stack">
            {p.providers
              .filter((x) => x.kind === 'oidc')
              .map((x) => (
                <a key={x.id} className="button primary" href={`${x.login_url}?return_to=${encodeURIComponent(returnTo)}`}>
                  Sign in with {x.name}
                </a>
              ))}
            {p.providers.some((x) => x.kind === 'development') ? (
              <form onSubmit={submit} className="card" aria-label="Development sign-in">
                <h2>Development sign-in</h2>
                <p className="small muted">For trying Tollgate out: signs in as the person with this email, without a password. Production deployments turn it off.</p>
                <Field label="Email">
                  {(id) => <input id={id} type="email" required autoComplete="email" value={email} onChange={(e) => setEmail(e.target.value)} />}
                </Field>
                <button type="submit" className="primary" disabled={devLogin.isPending}>
                  {devLogin.isPending ? 'Signing in…' : 'Sign in'}
                </button>
                {devLogin.isError ? <ErrorPanel error={devLogin.error} title="Could not sign in" /> : null}
              </form>
            ) : null}
          </div>
        )}
      </QueryView>
    </main>
  );
}
