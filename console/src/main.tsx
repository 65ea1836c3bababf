import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter } from 'react-router';
import { ApiFailure } from './api/client';
import { App } from './app';
import { SESSION_KEY } from './session';
import './styles.css';

/** A 401 anywhere means the session ended: look again at who is here (the sign-in page follows). */
function onFailure(error: unknown) {
  if (error instanceof ApiFailure && error.status === 401) void queryClient.invalidateQueries({ queryKey: SESSION_KEY });
}

const queryClient: QueryClient = new QueryClient({
  queryCache: new QueryCache({ onError: onFailure }),
  mutationCache: new MutationCache({ onError: onFailure }),
  defaultOptions: {
    queries: {
      // Only what may pass retries: the network or the server's own failure, never a 4xx.
      retry: (count, error) => count < 2 && (!(error instanceof ApiFailure) || error.status === 0 || error.status >= 500),
      staleTime: 10_000,
    },
  },
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      {/* Navigations render at once, not in a transition: filters follow the address, and a person (or a test) acting
          right after a filter change must see the page of that change, not the one before it. */}
      <BrowserRouter useTransitions={false}>
        <App />
      </BrowserRouter>
    </QueryClientProvider>
  </StrictMode>,
);
