import { useId, useState, type ReactNode } from 'react';
import { NavLink } from 'react-router';
import { ErrorPanel } from './components/ui';
import { SECTIONS } from './sections';
import { useSession } from './session';

/** The frame of every signed-in page: a skip link, the organisation switch, the navigation, the page. */
export function Layout({ children }: { children: ReactNode }) {
  const { me, can, signOut, switchTenant } = useSession();
  const [error, setError] = useState<unknown>(null);
  const orgId = useId();
  const run = (work: Promise<void>) => work.catch(setError);
  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <span className="brand" aria-label="Tollgate">
          Tollgate
        </span>
        <div className="topbar-right">
          <label htmlFor={orgId} className="sr-only">
            Organisation
          </label>
          <select id={orgId} value={me.tenant.id} onChange={(e) => run(switchTenant(e.target.value))} disabled={me.tenants.length < 2}>
            {me.tenants.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name}
              </option>
            ))}
          </select>
          <span className="who" title={me.user.email}>
            {me.user.display_name}
          </span>
          <button type="button" onClick={() => run(signOut())}>
            Sign out
          </button>
        </div>
      </header>
      <nav className="sidenav" aria-label="Main">
        <ul>
          {SECTIONS.filter((s) => can(s.permission)).map((s) => (
            <li key={s.path}>
              <NavLink to={s.path} end={s.path === '/'}>
                {s.label}
              </NavLink>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        {error ? <ErrorPanel error={error} /> : null}
        {children}
      </main>
    </div>
  );
}
