// The Workers global scope, as data: on request, lists the own property names
// and own symbols of globalThis and each object on its prototype chain (up to
// and including Object.prototype), and of navigator, console, crypto,
// crypto.subtle, performance, the module handler's `env` and `ctx`, and ctx's
// prototype. Output is sorted JSON; see README.md for how it was produced.
//
// Only things that are the same on every run are recorded: names, descriptor
// shape (data value / accessor, writable, enumerable, configurable) and the
// typeof of data values. Accessor getters are not invoked.

function symName(s) {
  return String(s); // "Symbol(description)"
}

function describe(obj, key) {
  const d = Object.getOwnPropertyDescriptor(obj, key);
  if (!d) return "missing";
  let flags = (d.enumerable ? "e" : "-") + (d.configurable ? "c" : "-");
  if ("value" in d) {
    flags += d.writable ? "w" : "-";
    return `value:${typeof d.value}:${flags}`;
  }
  return `accessor:${d.get ? "get" : ""}${d.set ? "set" : ""}:${flags}`;
}

function sortedObject(entries) {
  entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return Object.fromEntries(entries);
}

function ownKeys(obj) {
  if (obj === undefined || obj === null) return { missing: String(obj) };
  const names = Object.getOwnPropertyNames(obj).map((k) => [k, describe(obj, k)]);
  const symbols = Object.getOwnPropertySymbols(obj).map((s) => [symName(s), describe(obj, s)]);
  return {
    names: sortedObject(names),
    symbols: sortedObject(symbols),
  };
}

function ctorName(obj) {
  try {
    const d = Object.getOwnPropertyDescriptor(obj, "constructor");
    if (d && typeof d.value === "function") return d.value.name;
  } catch {}
  return "(no constructor)";
}

function chain(obj) {
  const out = [];
  let p = Object.getPrototypeOf(obj);
  while (p !== null) {
    out.push({
      constructor: ctorName(p),
      isObjectPrototype: p === Object.prototype,
      ...ownKeys(p),
    });
    if (p === Object.prototype) break;
    p = Object.getPrototypeOf(p);
  }
  return out;
}

function count(k) {
  return { names: Object.keys(k.names || {}).length, symbols: Object.keys(k.symbols || {}).length };
}

export default {
  fetch(request, env, ctx) {
    const g = ownKeys(globalThis);
    const out = {
      globalThis: {
        own: g,
        prototypeChain: chain(globalThis),
        toStringTag: Object.prototype.toString.call(globalThis),
      },
      navigator: ownKeys(globalThis.navigator),
      navigatorPrototype: ownKeys(globalThis.navigator && Object.getPrototypeOf(globalThis.navigator)),
      console: ownKeys(globalThis.console),
      crypto: ownKeys(globalThis.crypto),
      cryptoPrototype: ownKeys(globalThis.crypto && Object.getPrototypeOf(globalThis.crypto)),
      cryptoSubtle: ownKeys(globalThis.crypto && globalThis.crypto.subtle),
      cryptoSubtlePrototype: ownKeys(
        globalThis.crypto && globalThis.crypto.subtle && Object.getPrototypeOf(globalThis.crypto.subtle),
      ),
      performance: ownKeys(globalThis.performance),
      performancePrototype: ownKeys(
        globalThis.performance && Object.getPrototypeOf(globalThis.performance),
      ),
      env: ownKeys(env),
      envPrototypeIsObjectPrototype: Object.getPrototypeOf(env) === Object.prototype,
      ctx: ownKeys(ctx),
      ctxPrototype: ownKeys(Object.getPrototypeOf(ctx)),
      ctxPrototypeConstructor: ctorName(Object.getPrototypeOf(ctx)),
    };
    out.counts = {
      globalThisOwn: count(g),
      globalThisPrototypeChain: out.globalThis.prototypeChain.map((p) => ({
        constructor: p.constructor,
        ...count(p),
      })),
    };
    return new Response(JSON.stringify(out, null, 2) + "\n", {
      headers: { "content-type": "application/json" },
    });
  },
};
