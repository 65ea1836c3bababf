// The oidc-provider package ships no type declarations (and @types/oidc-provider is not installed): the
// little of it that test/support/oidc-provider.ts uses.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  interface Grant {
    addOIDCScope(scope: string): void;
    save(): Promise<string>;
  }

  interface KoaContext {
    path: string;
    body: unknown;
    oidc: {
      session?: { accountId?: string };
      client?: { clientId: string };
      params?: Record<string, unknown>;
      provider: Provider;
    };
  }

  interface Account {
    accountId: string;
    claims(): Promise<Record<string, unknown>>;
  }

  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown> & {
      findAccount?: (ctx: KoaContext, id: string) => Promise<Account | undefined>;
      loadExistingGrant?: (ctx: KoaContext) => Promise<Grant | undefined>;
    });
    Grant: new (init: { clientId: string; accountId: string }) => Grant;
    use(fn: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<{ uid: string; prompt: { name: string } }>;
    interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, options?: { mergeWithLastSubmission?: boolean }): Promise<void>;
  }
}
