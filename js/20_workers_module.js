// The classes behind the `cloudflare:workers` module. Durable Object and RPC
// behaviour arrives with the Durable Objects work; these base classes already
// set `ctx`/`env` the way workerd's do.
export class WorkerEntrypoint {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}

export class DurableObject {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}

export class RpcTarget {}

export class WorkflowEntrypoint {
  constructor() {
    throw new Error("WorkflowEntrypoint (Workflows) is not supported by cellhost yet");
  }
}
