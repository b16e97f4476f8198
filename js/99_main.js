// Snapshot entry point: builds the global scope and exposes the hooks the
// host calls after loading a Worker. The host takes both hooks (and
// deno_core's `Deno`/`__bootstrap`) off the global object before any user
// code runs (see runtime/host/src/isolate.rs, `seal`).
import { primordials } from "ext:core/mod.js";
import "ext:cellhost/00_globals.js";
import "ext:cellhost/03_web_spec.js";
import "ext:cellhost/50_websocket.js";
import * as workers from "ext:cellhost/20_workers_module.js";
import * as email from "ext:cellhost/21_email.js";
import * as sockets from "ext:cellhost_sockets/sockets.js";
import { spendSubrequest, withConnection } from "ext:cellhost/06_budget.js";
import { boot, prepare } from "ext:cellhost/10_dispatch.js";

const { SymbolFor } = primordials;

globalThis[SymbolFor("cellhost.boot")] = { prepare, boot };

// connect() spends a subrequest and holds one of the event's connection
// slots until the socket closes, as fetch() does.
sockets.setConnectionGate((open) => {
  spendSubrequest();
  return withConnection(open);
});

// The `cloudflare:*` modules, by name (runtime/host/src/loader.rs, BUILTINS).
globalThis[SymbolFor("cellhost.modules")] = {
  "cloudflare:workers": workers,
  "cloudflare:sockets": { connect: sockets.connect },
  "cloudflare:email": email,
};
