// The modules of undici's layout that lib/undici-dispatchers.ts loads in place of its entry point (which loads
// all of undici): CommonJS, each `module.exports` one of the entry point's own exports. The package declares
// types for its entry point only.
declare module 'undici/lib/dispatcher/dispatcher.js' {
  import type { Dispatcher } from 'undici';
  const DispatcherClass: typeof Dispatcher;
  export default DispatcherClass;
}
declare module 'undici/lib/dispatcher/agent.js' {
  import type { Agent } from 'undici';
  const AgentClass: typeof Agent;
  export default AgentClass;
}
declare module 'undici/lib/dispatcher/pool.js' {
  import type { Pool } from 'undici';
  const PoolClass: typeof Pool;
  export default PoolClass;
}
declare module 'undici/lib/api/api-request.js' {
  import type { Dispatcher } from 'undici';
  const request: Dispatcher['request'];
  export default request;
}
