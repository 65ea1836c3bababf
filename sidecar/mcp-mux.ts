import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo, RequestId } from '@modelcontextprotocol/sdk/types.js';

/** A transport that can answer one HTTP request: the SDK's streamable-HTTP server transport, stateless. */
export interface RequestTransport {
  onmessage?: ((message: JSONRPCMessage, extra?: MessageExtraInfo) => void) | undefined;
  onclose?: (() => void) | undefined;
  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void>;
}

interface Pending {
  transport: RequestTransport;
  id: RequestId;
  /** When the HTTP request arrived (performance.now()). */
  arrived: number;
}

/**
 * Lets one long-lived MCP `Server` answer many HTTP requests at once. The SDK's stateless streamable-HTTP
 * transport serves one request and a `Server` connects to one transport, so instead of a new `Server` (and
 * its handler registrations) per request, each request's transport is attached here: its JSON-RPC requests
 * reach the one `Server` under ids unique to this process (two clients both send id 1), and the answers go
 * back to the transport they came from under their own ids.
 */
export class RequestMux implements Transport {
  onmessage?: (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined;
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  readonly #pending = new Map<string, Pending>();
  #next = 0;

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.#pending.clear();
    this.onclose?.();
  }

  /** When the HTTP request carrying the JSON-RPC request `id` (as the server sees it) arrived. */
  arrival(id: RequestId): number | undefined {
    return this.#pending.get(String(id))?.arrived;
  }

  /** Routes the messages of one HTTP request's transport to the server, and their answers back. */
  attach(transport: RequestTransport, arrived: number): void {
    const mine = new Map<RequestId, string>();
    transport.onmessage = (message, extra) => {
      const m = message as { id?: RequestId; method?: string; params?: { requestId?: RequestId } };
      if (m.method !== undefined && m.id !== undefined) {
        const internal = `r${++this.#next}`;
        mine.set(m.id, internal);
        this.#pending.set(internal, { transport, id: m.id, arrived });
        this.onmessage?.({ ...message, id: internal } as JSONRPCMessage, extra);
      } else if (m.method === 'notifications/cancelled' && m.params?.requestId !== undefined) {
        const internal = mine.get(m.params.requestId);
        if (internal) this.onmessage?.({ ...message, params: { ...m.params, requestId: internal } } as JSONRPCMessage, extra);
      } else if (m.method !== undefined) {
        this.onmessage?.(message, extra);
      }
      // Answers to requests of the server's own: the proxy sends none, so there are none to route.
    };
    transport.onclose = () => {
      for (const internal of mine.values()) this.#pending.delete(internal);
    };
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const m = message as { id?: RequestId; method?: string };
    if (m.method === undefined && m.id !== undefined) {
      // An answer: back to its request's transport, under the client's own id.
      const pending = this.#pending.get(String(m.id));
      if (!pending) return;
      this.#pending.delete(String(m.id));
      await pending.transport.send({ ...message, id: pending.id } as JSONRPCMessage);
      return;
    }
    // A notification or request of the server's, tied to a request: on that request's stream; else dropped
    // (stateless: there is no standalone stream to carry it).
    const related = options?.relatedRequestId === undefined ? undefined : this.#pending.get(String(options.relatedRequestId));
    if (related) await related.transport.send(message, { relatedRequestId: related.id });
  }
}
