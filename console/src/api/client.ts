import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema.gen';

/**
 * The console's one way to the API: openapi-fetch typed from docs/openapi.json (the build generates
 * schema.gen.ts with openapi-typescript), so a change of the API that the console does not follow
 * fails `make build`. Cookies go with every request (same origin); on POST, PATCH, PUT and DELETE the
 * X-CSRF-Token header carries the value of the CSRF cookie, as the API asks of a browser.
 */
export const CSRF_COOKIE = 'tollgate_csrf';

export function csrfToken(): string | undefined {
  for (const part of document.cookie.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === CSRF_COOKIE) return decodeURIComponent(value.join('='));
  }
  return undefined;
}

const csrf: Middleware = {
  onRequest({ request }) {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      const token = csrfToken();
      if (token) request.headers.set('X-CSRF-Token', token);
    }
    return request;
  },
};

export const api = createClient<paths>({ baseUrl: '/api/v1', credentials: 'same-origin' });
api.use(csrf);

export type Paths = paths;
export type Schemas = import('./schema.gen').components['schemas'];

/** An answer of the API that is not a success: the error envelope's code, message and correlation ID. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly correlationId: string | null,
    readonly details: unknown,
  ) {
    super(message);
    this.name = 'ApiFailure';
  }
}

interface Envelope {
  error: { code: string; message: string; correlation_id?: string; details?: unknown };
}

function isEnvelope(body: unknown): body is Envelope {
  const e = (body as Envelope | null)?.error;
  return typeof e === 'object' && e !== null && typeof e.code === 'string' && typeof e.message === 'string';
}

/** The failure an answer stands for, from its envelope when it has one. */
export function failureOf(response: Response, body: unknown): ApiFailure {
  const correlation = response.headers.get('x-correlation-id');
  if (isEnvelope(body)) {
    const e = body.error;
    return new ApiFailure(response.status, e.code, e.message, e.correlation_id ?? correlation, e.details);
  }
  return new ApiFailure(response.status, `http_${response.status}`, `The API answered ${response.status} ${response.statusText}.`, correlation, undefined);
}

type Answer<T> = { data?: T; error?: unknown; response: Response };

/** The data of an openapi-fetch answer, or the ApiFailure it stands for. */
export async function must<T>(answer: Promise<Answer<T>>): Promise<T> {
  let result: Answer<T>;
  try {
    result = await answer;
  } catch (err) {
    throw new ApiFailure(0, 'network_error', `The API could not be reached (${(err as Error).message}).`, null, undefined);
  }
  if (!result.response.ok) throw failureOf(result.response, result.error);
  return result.data as T;
}
