// Durable Object facets (`ctx.facets`): child objects of a Durable Object,
// each its own instance (its own input gate) with its own SQLite database
// kept beside its parent's, running in the parent's isolate. A facet is
// started by the get() callback only when it is not running; it stops with
// its parent (eviction) and starts again from its stored state on the next
// get(). Calls to a facet are RPC within the isolate: arguments and results
// are structured-cloned, errors arrive as remote copies.
import { core, primordials } from "ext:core/mod.js";
import { Cell, setFacetsFactory } from "ext:cellhost/40_cell.js";
import { decode, DurableObjectId, encode, toRequest } from "ext:cellhost/30_durable_objects.js";
import { Fetcher, facetClassOf, stubProxy } from "ext:cellhost/25_services.js";
import { KEY } from "ext:cellhost/01_keys.js";

const {
  Error,
  ObjectPrototypeIsPrototypeOf,
  Promise,
  PromisePrototypeThen,
  SymbolToStringTag,
  TypeError,
} = primordials;
const { op_cell_delete_facet } = core.ops;

const CLASS_TYPE = "DurableObjectClass or LoopbackDurableObjectNamespace or LoopbackColoLocalActorNamespace";

function serialize(v) {
  try {
    return core.serialize(encode(v));
  } catch (e) {
    throw new DOMException(e?.message ?? `${e}`, "DataCloneError");
  }
}

// The startup options the callback gave, checked as workerd checks them.
function startupOptions(parent, opts) {
  const cls = opts === null || opts === undefined ? undefined : facetClassOf(opts.class);
  if (cls === undefined) {
    throw new TypeError(`Incorrect type for the 'class' field on 'StartupOptions': the provided value is not of type '${CLASS_TYPE}'.`);
  }
  let id = opts.id;
  if (id === undefined) id = parent.ctxId;
  else if (!ObjectPrototypeIsPrototypeOf(DurableObjectId.prototype, id)) id = `${id}`;
  return { cls, id };
}

/** One facet of a parent, running or starting. */
class Facet {
  constructor(parent, name, getStartupOptions) {
    this.parent = parent;
    this.name = name;
    this.cell = null;
    this.broken = null;
    const root = parent.facet?.root ?? parent;
    const path = [...(parent.facet?.path ?? []), name];
    this.ready = (async () => {
      const { cls, id } = startupOptions(parent, await getStartupOptions());
      if (this.broken !== null) throw this.broken;
      const cell = new Cell(`${parent.key}#${path.length}:${name}`, { ns: parent.ns, id: parent.hex, name: parent.name }, {
        root,
        path,
        id,
        props: cls.props,
        cls,
      });
      cell.onBroken = (e) => this.stopped(e);
      this.cell = cell;
      return cell;
    })();
    // A callback that failed starts nothing: the next get() tries again.
    PromisePrototypeThen(this.ready, undefined, () => this.forget());
  }

  forget() {
    if (this.parent.facets.get(this.name) === this) this.parent.facets.delete(this.name);
  }

  stopped(e) {
    if (this.broken === null) this.broken = e;
    this.forget();
  }

  idle() {
    return this.cell === null ? this.broken !== null : this.cell.idle();
  }

  abort(reason) {
    const e = reason === undefined ? new Error("Facet aborted.") : reason;
    this.stopped(e);
    if (this.cell !== null) this.cell.break(e);
  }

  close() {
    this.broken ??= new Error("The facet's parent Durable Object was evicted.");
    if (this.cell !== null) this.cell.close();
  }

  async send(job) {
    if (this.broken !== null) throw this.broken;
    const cell = await this.ready;
    if (this.broken !== null) throw this.broken;
    return await new Promise((resolve, reject) => {
      job.resolve = resolve;
      job.reject = reject;
      cell.enqueue(job);
    });
  }

  async call(kind, method, args) {
    const bytes = serialize([kind, encode(args)]);
    return decode(core.deserialize(await this.send({ kind: "facet-rpc", method, args: bytes })));
  }
}


function stub(facet) {
  const fetcher = new Fetcher(KEY, "Fetcher", "a facet", (input, init) =>
    facet.send({ kind: "facet-http", request: toRequest(input, init) }));
  return stubProxy(fetcher, (kind, method, args) => facet.call(kind, method, args));
}

class DurableObjectFacets {
  #cell;
  constructor(cell) {
    this.#cell = cell;
  }
  get [SymbolToStringTag]() {
    return "DurableObjectFacets";
  }

  get(name, getStartupOptions) {
    name = `${name}`;
    if (typeof getStartupOptions !== "function") {
      throw new TypeError("Failed to execute 'get' on 'DurableObjectFacets': parameter 2 is not of type 'function'.");
    }
    let facet = this.#cell.facets.get(name);
    if (facet === undefined) {
      facet = new Facet(this.#cell, name, getStartupOptions);
      this.#cell.facets.set(name, facet);
    }
    return stub(facet);
  }

  abort(name, reason) {
    this.#cell.facets.get(`${name}`)?.abort(reason);
  }

  // Stops the facet and deletes its storage, and its children's.
  delete(name) {
    name = `${name}`;
    this.#cell.facets.get(name)?.abort(new Error("The facet was deleted."));
    const root = this.#cell.facet?.root ?? this.#cell;
    const path = [...(this.#cell.facet?.path ?? []), name];
    op_cell_delete_facet(root.cls.uniqueKey, root.hex, path);
  }

  clone(_src, _dst) {
    throw new Error("ctx.facets.clone() is not supported by cellhost yet");
  }
}

setFacetsFactory((cell) => new DurableObjectFacets(cell));
