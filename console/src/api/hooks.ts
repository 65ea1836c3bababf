import { useInfiniteQuery, useQuery } from '@tanstack/react-query';
import { api, must } from './client';

/**
 * A cursor-paged list of the API (`limit` and `next_cursor`): the pages so far, and `fetchNextPage`
 * for "Load more". `key` must change with the filters; `refetchInterval` keeps the pages live.
 */
export function usePaged<T>(
  key: readonly unknown[],
  fetchPage: (cursor: string | undefined) => Promise<{ items: T[]; next_cursor?: string | null }>,
  opts: { refetchInterval?: number | false } = {},
) {
  const q = useInfiniteQuery({
    refetchInterval: opts.refetchInterval ?? false,
    queryKey: key,
    queryFn: ({ pageParam }) => fetchPage(pageParam),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.next_cursor ?? undefined,
  });
  return { ...q, rows: q.data?.pages.flatMap((p) => p.items) ?? [] };
}

/** One agent, shared by every page that names an agent by its ID (cached for a minute). */
export function useAgent(agentId: string | undefined) {
  return useQuery({
    queryKey: ['agent', agentId],
    queryFn: () => must(api.GET('/agents/{agent_id}', { params: { path: { agent_id: agentId! } } })),
    enabled: agentId !== undefined,
    staleTime: 60_000,
  });
}

/**
 * The address's search parameters as they are now. A filter change builds on these, not on the ones the last
 * render saw, so that a second change made before the first has rendered cannot bring back what the first one
 * removed (main.tsx renders navigations at once; this holds whatever the router does).
 */
export function currentSearchParams(): URLSearchParams {
  return new URLSearchParams(window.location.search);
}

/** The address's parameter `name` when it is one of `choices` (an enumeration of the API's), else undefined. */
export function choiceParam<T extends string>(params: URLSearchParams, name: string, choices: readonly T[]): T | undefined {
  const value = params.get(name);
  return value !== null && (choices as readonly string[]).includes(value) ? (value as T) : undefined;
}
