import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, must, type Paths } from '../api/client';
import { ErrorPanel, Field } from '../components/ui';
import { SESSION_KEY, type Onboarding } from '../session';

type OnboardBody = Paths['/tenants/onboard']['post']['requestBody']['content']['application/json'];
type Region = OnboardBody['primary_region'];

const REGIONS: Region[] = ['eu-west', 'eu-central', 'uk-south', 'us-east', 'us-west', 'ca-central', 'ap-southeast', 'ap-northeast'];

/** The slug a name suggests: lower case, dashes between words, 3 to 63 characters. */
export function slugOf(name: string): string {
  return name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
}

/** First sign-in without an organisation: create one; the person becomes its administrator. */
export function OnboardingPage({ onboarding }: { onboarding: Onboarding }) {
  const queryClient = useQueryClient();
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const [slugTouched, setSlugTouched] = useState(false);
  const [region, setRegion] = useState<Region>('eu-west');
  const [displayName, setDisplayName] = useState(onboarding.user.display_name ?? '');
  const done = () => queryClient.invalidateQueries({ queryKey: SESSION_KEY });
  const create = useMutation({
    mutationFn: (body: OnboardBody) => must(api.POST('/tenants/onboard', { body })),
    onSuccess: done,
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name: name.trim(), slug: slugTouched ? slug : slugOf(name), primary_region: region, admin_display_name: displayName.trim() });
  };
  return (
    <main id="main" className="standalone">
      <h1>Welcome to Tollgate</h1>
      <p>
        Signed in as <strong>{onboarding.user.email}</strong>.
      </p>
      <form onSubmit={submit} className="card" aria-label="Create an organisation">
        <h2>Create an organisation</h2>
        <Field label="Organisation name">
          {(id) => <input id={id} required minLength={2} maxLength={200} value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <Field label="Short name (in addresses)" hint="Lower-case letters, digits and dashes; 3 to 63 characters.">
          {(id, hint) => (
            <input
              id={id}
              aria-describedby={hint}
              required
              pattern="[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?"
              minLength={3}
              maxLength={63}
              value={slugTouched ? slug : slugOf(name)}
              onChange={(e) => {
                setSlugTouched(true);
                setSlug(e.target.value);
              }}
            />
          )}
        </Field>
        <Field label="Primary region" hint="Where the organisation's data is kept.">
          {(id, hint) => (
            <select id={id} aria-describedby={hint} value={region} onChange={(e) => setRegion(e.target.value as Region)}>
              {REGIONS.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Your name">
          {(id) => <input id={id} required minLength={2} maxLength={200} value={displayName} onChange={(e) => setDisplayName(e.target.value)} />}
        </Field>
        <button type="submit" className="primary" disabled={create.isPending}>
          {create.isPending ? 'Creating…' : 'Create organisation'}
        </button>
        {create.isError ? <ErrorPanel error={create.error} title="Could not create the organisation" /> : null}
      </form>
    </main>
  );
}
