import { lazy, Suspense } from 'react';
import { Navigate, Route, Routes, useLocation } from 'react-router';
import { ErrorPanel, Loading } from './components/ui';
import { Layout } from './layout';
import { OnboardingPage } from './pages/onboarding';
import { SignInPage } from './pages/sign-in';
import { SessionProvider, useSessionState } from './session';

// Each page is its own chunk: the graph's drawing library loads only on the graph page.
const Dashboard = lazy(() => import('./pages/dashboard'));
const Approvals = lazy(() => import('./pages/approvals'));
const Agents = lazy(() => import('./pages/agents'));
const Actions = lazy(() => import('./pages/actions'));
const Evidence = lazy(() => import('./pages/evidence'));
const Policies = lazy(() => import('./pages/policies'));
const Inventory = lazy(() => import('./pages/inventory'));
const Findings = lazy(() => import('./pages/findings'));
const Graph = lazy(() => import('./pages/graph'));
const Risk = lazy(() => import('./pages/risk'));
const Governance = lazy(() => import('./pages/governance'));
const Reports = lazy(() => import('./pages/reports'));
const Integrations = lazy(() => import('./pages/integrations'));

export function App() {
  const state = useSessionState();
  const location = useLocation();
  if (state.isPending) return <Loading label="Starting the console…" />;
  if (state.isError)
    return (
      <main id="main" className="standalone">
        <h1>Tollgate</h1>
        <ErrorPanel error={state.error} title="The console could not start" />
      </main>
    );
  const s = state.data;
  if (s.kind === 'signed_out') {
    if (location.pathname === '/sign-in') return <SignInPage />;
    const back = location.pathname + location.search;
    return <Navigate to={back === '/' ? '/sign-in' : `/sign-in?return_to=${encodeURIComponent(back)}`} replace />;
  }
  if (s.kind === 'onboarding') {
    if (location.pathname === '/onboarding') return <OnboardingPage onboarding={s.onboarding} />;
    return <Navigate to="/onboarding" replace />;
  }
  if (location.pathname === '/sign-in' || location.pathname === '/onboarding') {
    return <Navigate to={samePath(new URLSearchParams(location.search).get('return_to'))} replace />;
  }
  return (
    // Keyed by organisation: a switch remounts every page, so nothing of the previous one stays on screen.
    <SessionProvider key={s.me.tenant.id} me={s.me}>
      <Layout>
        <Suspense fallback={<Loading />}>
          <Routes>
            <Route path="/" element={<Dashboard />} />
            <Route path="/approvals/*" element={<Approvals />} />
            <Route path="/agents/*" element={<Agents />} />
            <Route path="/actions/*" element={<Actions />} />
            <Route path="/evidence/*" element={<Evidence />} />
            <Route path="/policies/*" element={<Policies />} />
            <Route path="/inventory/*" element={<Inventory />} />
            <Route path="/findings/*" element={<Findings />} />
            <Route path="/graph/*" element={<Graph />} />
            <Route path="/risk/*" element={<Risk />} />
            <Route path="/governance/*" element={<Governance />} />
            <Route path="/reports/*" element={<Reports />} />
            <Route path="/integrations/*" element={<Integrations />} />
            <Route path="*" element={<NotFound />} />
          </Routes>
        </Suspense>
      </Layout>
    </SessionProvider>
  );
}

/**
 * A return_to to follow after sign-in: a path of this console only ("/x", never "//host" or "/\\host",
 * which a browser reads as another origin), else the dashboard.
 */
export function samePath(back: string | null): string {
  if (!back || !back.startsWith('/') || back.startsWith('//') || /[\\\u0000-\u001f\u007f]/.test(back)) return '/';
  return back;
}

function NotFound() {
  return (
    <>
      <h1>Not found</h1>
      <p>There is no page at this address.</p>
    </>
  );
}
