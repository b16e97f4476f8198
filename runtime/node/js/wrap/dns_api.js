// node:dns, part 4 of 4 (see dns.js): the API.
// ---------------------------------------------------------------------------
// The promise-returning core (internal_dns).

const validFamilies = [0, 4, 6];
const validDnsOrders = ["verbatim", "ipv4first", "ipv6first"];
let defaultDnsOrder = "verbatim";

// Each resolver validates its argument synchronously, then returns a promise.
function resolverFor(fnName, type, syscall, map) {
  const fn = function (name) {
    validateString(name, "name");
    return query(name, type).then((json) => {
      requireAnswer(json.Answer, name, syscall);
      return json.Answer.map(map);
    });
  };
  Object.defineProperty(fn, "name", { value: fnName });
  return fn;
}

const core = {
  getServers: function getServers() {
    return ["1.1.1.1", "2606:4700:4700::1111", "1.0.0.1", "2606:4700:4700::1001"];
  },

  lookup: function lookup(hostname, options, callback) {
    let family = 0;
    let all = false;
    let dnsOrder = core.getDefaultResultOrder();

    if (hostname) validateString(hostname, "hostname");

    if (typeof options === "function") {
      callback = options;
      family = 0;
    } else if (typeof options === "number") {
      validateFunction(callback, "callback");
      validateOneOf(options, "family", validFamilies);
      family = options;
    } else if (options !== undefined && typeof options !== "object") {
      validateFunction(arguments.length === 2 ? options : callback, "callback");
      throw invalidArgType("options", ["integer", "object"], options);
    } else {
      validateFunction(callback, "callback");
      if (options?.hints != null) {
        validateNumber(options.hints, "options.hints");
        throw new ERR_OPTION_NOT_IMPLEMENTED("options.hints");
      }
      if (options?.family != null) {
        if (options.family === "IPv4") family = 4;
        else if (options.family === "IPv6") family = 6;
        else {
          validateOneOf(options.family, "options.family", validFamilies);
          family = options.family;
        }
      }
      if (options?.all != null) {
        validateBoolean(options.all, "options.all");
        all = options.all;
      }
      if (options?.verbatim != null) {
        validateBoolean(options.verbatim, "options.verbatim");
        dnsOrder = options.verbatim ? "verbatim" : "ipv4first";
      }
      if (options?.order != null) {
        validateOneOf(options.order, "options.order", validDnsOrders);
        dnsOrder = options.order;
      }
    }

    if (!hostname) {
      if (all) nextTick(callback, null, []);
      else nextTick(callback, null, null, family === 6 ? 6 : 4);
      return;
    }

    const literal = ipFamily(hostname);
    if (literal) {
      if (all) nextTick(callback, null, [{ address: hostname, family: literal }]);
      else nextTick(callback, null, hostname, literal);
      return;
    }

    if (family === 0) {
      // Ask for A and AAAA together; a failed half counts as empty.
      Promise.all([
        query(hostname, "A").catch(() => ({ Answer: [] })),
        query(hostname, "AAAA").catch(() => ({ Answer: [] })),
      ])
        .then(([v4, v6]) => {
          if (all) {
            const a4 = v4.Answer?.map((a) => ({ address: a.data, family: 4 })) ?? [];
            const a6 = v6.Answer?.map((a) => ({ address: a.data, family: 6 })) ?? [];
            if (a4.length === 0 && a6.length === 0) {
              callback(new DnsError(hostname, NOTFOUND, "queryA"));
              return;
            }
            if (dnsOrder === "ipv6first") callback(null, [...a6, ...a4]);
            else callback(null, [...a4, ...a6]);
            return;
          }
          const first4 = v4.Answer?.at(0)?.data;
          const first6 = v6.Answer?.at(0)?.data;
          if (first4 == null && first6 == null) {
            callback(new DnsError(hostname, NOTFOUND, "queryA"));
            return;
          }
          if (dnsOrder === "ipv6first") {
            if (first6 != null) callback(null, first6, 6);
            else callback(null, first4, 4);
          } else if (first4 != null) {
            callback(null, first4, 4);
          } else {
            callback(null, first6, 6);
          }
        })
        .catch((error) => {
          nextTick(callback, error);
        });
      return;
    }

    const type = family === 4 ? "A" : "AAAA";
    query(hostname, type)
      .then((json) => {
        requireAnswer(json.Answer, hostname, `query${type}`);
        if (all) callback(null, json.Answer.map((a) => ({ address: a.data, family })));
        else callback(null, json.Answer.at(0)?.data, family);
      })
      .catch((error) => {
        nextTick(callback, error);
      });
  },

  lookupService: async function lookupService() {
    throw new Error("Not implemented");
  },

  resolve: function resolve(name, rrtype) {
    validateString(name, "name");
    switch (rrtype) {
      case "A": return core.resolve4(name);
      case "AAAA": return core.resolve6(name);
      case "ANY": return core.resolveAny();
      case "CAA": return core.resolveCaa(name);
      case "CNAME": return core.resolveCname(name);
      case "MX": return core.resolveMx(name);
      case "NAPTR": return core.resolveNaptr(name);
      case "NS": return core.resolveNs(name);
      case "PTR": return core.resolvePtr(name);
      case "SOA": return core.resolveSoa(name);
      case "SRV": return core.resolveSrv(name);
      case "TXT": return core.resolveTxt(name);
      default: throw invalidArgValue("rrtype", rrtype);
    }
  },

  resolve4: function resolve4(name, options) {
    validateString(name, "name");
    const ttl = !!options?.ttl;
    return query(name, "A").then((json) => {
      requireAnswer(json.Answer, name, "queryA");
      return json.Answer.map((a) => (ttl ? { ttl: a.TTL, address: a.data } : a.data));
    });
  },

  resolve6: function resolve6(name, options) {
    validateString(name, "name");
    const ttl = !!options?.ttl;
    return query(name, "AAAA").then((json) => {
      requireAnswer(json.Answer, name, "queryAaaa");
      return json.Answer.map((a) => (ttl ? { ttl: a.TTL, address: a.data } : a.data));
    });
  },

  resolveAny: async function resolveAny() {
    throw new Error("Not implemented");
  },

  resolveCname: resolverFor("resolveCname", "CNAME", "queryCname", ({ data }) => dropFinalDot(data)),
  resolveCaa: resolverFor("resolveCaa", "CAA", "queryCaa", caaRecord),

  resolveMx: function resolveMx(name) {
    validateString(name, "name");
    return query(name, "MX").then((json) => {
      requireAnswer(json.Answer, name, "queryMx");
      return json.Answer.map((a) => mxRecord(name, a));
    });
  },

  resolveNaptr: resolverFor("resolveNaptr", "NAPTR", "queryNaptr", naptrRecord),
  resolveNs: resolverFor("resolveNs", "NS", "queryNs", ({ data }) => dropFinalDot(data)),
  resolvePtr: resolverFor("resolvePtr", "PTR", "queryPtr", ({ data }) => dropFinalDot(data)),

  resolveSoa: function resolveSoa(name) {
    validateString(name, "name");
    return query(name, "SOA").then((json) => {
      requireAnswer(json.Answer, name, "querySoa");
      const first = json.Answer.at(0);
      if (!first) throw new DnsError(name, NOTFOUND, "querySoa");
      return soaRecord(first);
    });
  },

  resolveSrv: resolverFor("resolveSrv", "SRV", "querySrv", srvRecord),
  resolveTxt: resolverFor("resolveTxt", "TXT", "queryTxt", txtRecord),
  // reverse() sends the address as given (no in-addr.arpa rewriting).
  reverse: resolverFor("reverse", "PTR", "queryPtr", ({ data }) => dropFinalDot(data)),

  setDefaultResultOrder: function setDefaultResultOrder(value) {
    validateOneOf(value, "dnsOrder", validDnsOrders);
    defaultDnsOrder = value;
  },

  getDefaultResultOrder: function getDefaultResultOrder() {
    return defaultDnsOrder;
  },

  setServers: function setServers() {
    // Always Cloudflare DNS; the servers cannot be changed.
    throw new Error("Not implemented");
  },
};

// ---------------------------------------------------------------------------
// The promises API (internal_dns_promises).

function promisesLookup(hostname, options) {
  const { promise, resolve, reject } = Promise.withResolvers();
  core.lookup(hostname, options, (error, address, family) => {
    if (error) reject(error);
    else if (Array.isArray(address)) resolve(address);
    else resolve({ address, family });
  });
  return promise;
}
Object.defineProperty(promisesLookup, "name", { value: "lookup" });

class PromisesResolver {
  cancel() {
    throw new Error("Not implemented");
  }
  setLocalAddress() {
    throw new Error("Not implemented");
  }
  getServers() {
    return core.getServers();
  }
  resolve(name, rrtype) {
    return core.resolve(name, rrtype);
  }
  resolve4(input, options) {
    return core.resolve4(input, options);
  }
  resolve6(input, options) {
    return core.resolve6(input, options);
  }
  resolveAny() {
    return core.resolveAny();
  }
  resolveCaa(name) {
    return core.resolveCaa(name);
  }
  resolveCname(name) {
    return core.resolveCname(name);
  }
  resolveMx(name) {
    return core.resolveMx(name);
  }
  resolveNaptr(name) {
    return core.resolveNaptr(name);
  }
  resolveNs(name) {
    return core.resolveNs(name);
  }
  resolvePtr(name) {
    return core.resolvePtr(name);
  }
  resolveSoa(name) {
    return core.resolveSoa(name);
  }
  resolveSrv(name) {
    return core.resolveSrv(name);
  }
  resolveTxt(name) {
    return core.resolveTxt(name);
  }
  reverse(name) {
    return core.reverse(name);
  }
  setServers() {
    core.setServers();
  }
}
Object.defineProperty(PromisesResolver, "name", { value: "Resolver" });

const promisesMembers = {
  reverse: core.reverse,
  resolveTxt: core.resolveTxt,
  resolveCaa: core.resolveCaa,
  resolveMx: core.resolveMx,
  resolveCname: core.resolveCname,
  resolveNs: core.resolveNs,
  resolvePtr: core.resolvePtr,
  resolveSrv: core.resolveSrv,
  resolveSoa: core.resolveSoa,
  resolveNaptr: core.resolveNaptr,
  resolve4: core.resolve4,
  resolve6: core.resolve6,
  getServers: core.getServers,
  setServers: core.setServers,
  getDefaultResultOrder: core.getDefaultResultOrder,
  setDefaultResultOrder: core.setDefaultResultOrder,
  lookup: promisesLookup,
  lookupService: core.lookupService,
  resolve: core.resolve,
  resolveAny: core.resolveAny,
  Resolver: PromisesResolver,
};

// Shaped like a module namespace object (null prototype, sorted keys,
// toStringTag "Module", not extensible), as workerd's `dns.promises` is one.
function namespaceLike(members) {
  const ns = Object.create(null);
  for (const k of Object.keys(members).sort()) {
    Object.defineProperty(ns, k, { value: members[k], writable: true, enumerable: true, configurable: false });
  }
  Object.defineProperty(ns, Symbol.toStringTag, { value: "Module" });
  return Object.preventExtensions(ns);
}

export const promises = namespaceLike({
  ...sortedCodes,
  ...promisesMembers,
  default: { ...promisesMembers, ...sortedCodes },
});

// ---------------------------------------------------------------------------
// The callback API (dns.ts): util.callbackify over bound core functions.

function callbackify(original) {
  function callbackified(...args) {
    const maybeCb = args.pop();
    validateFunction(maybeCb, "last argument");
    const cb = maybeCb.bind(this);
    Reflect.apply(original, this, args).then(
      (ret) => {
        queueMicrotask(() => cb(null, ret));
      },
      (rej) => {
        queueMicrotask(() => {
          cb(rej || new ERR_FALSY_VALUE_REJECTION(rej));
        });
      },
    );
  }
  const descriptors = Object.getOwnPropertyDescriptors(original);
  if (typeof descriptors.length?.value === "number") descriptors.length.value++;
  if (typeof descriptors.name?.value === "string") descriptors.name.value += "Callbackified";
  for (const d of Object.values(descriptors)) Object.setPrototypeOf(d, null);
  Object.defineProperties(callbackified, descriptors);
  return callbackified;
}

export const reverse = callbackify(core.reverse.bind(core));
export const resolveTxt = callbackify(core.resolveTxt.bind(core));
export const resolveCaa = callbackify(core.resolveCaa.bind(core));
export const resolveMx = callbackify(core.resolveMx.bind(core));
export const resolveCname = callbackify(core.resolveCname.bind(core));
export const resolveNs = callbackify(core.resolveNs.bind(core));
export const resolvePtr = callbackify(core.resolvePtr.bind(core));
export const resolveSrv = callbackify(core.resolveSrv.bind(core));
export const resolveSoa = callbackify(core.resolveSoa.bind(core));
export const resolveNaptr = callbackify(core.resolveNaptr.bind(core));
export const resolve4 = callbackify(core.resolve4.bind(core));
export const resolve6 = callbackify(core.resolve6.bind(core));
export const getServers = core.getServers.bind(core);
export const setServers = core.setServers.bind(core);
export const getDefaultResultOrder = core.getDefaultResultOrder.bind(core);
export const setDefaultResultOrder = core.setDefaultResultOrder.bind(core);
export const lookup = core.lookup.bind(core);
export const lookupService = callbackify(core.lookupService.bind(undefined));
export const resolve = callbackify(core.resolve.bind(undefined));
export const resolveAny = callbackify(core.resolveAny.bind(undefined));

export class Resolver {
  cancel() {
    throw new Error("Not implemented");
  }
  setLocalAddress() {
    throw new Error("Not implemented");
  }
  getServers(...args) {
    return getServers(...args);
  }
  resolve(...args) {
    resolve(...args);
  }
  resolve4(...args) {
    resolve4(...args);
  }
  resolve6(...args) {
    resolve6(...args);
  }
  resolveAny(...args) {
    resolveAny(...args);
  }
  resolveCaa(...args) {
    resolveCaa(...args);
  }
  resolveCname(...args) {
    resolveCname(...args);
  }
  resolveMx(...args) {
    resolveMx(...args);
  }
  resolveNaptr(...args) {
    resolveNaptr(...args);
  }
  resolveNs(...args) {
    resolveNs(...args);
  }
  resolvePtr(...args) {
    resolvePtr(...args);
  }
  resolveSoa(...args) {
    resolveSoa(...args);
  }
  resolveSrv(...args) {
    resolveSrv(...args);
  }
  resolveTxt(...args) {
    resolveTxt(...args);
  }
  reverse(...args) {
    reverse(...args);
  }
  setServers(...args) {
    setServers(...args);
  }
}

export default {
  getServers,
  lookup,
  lookupService,
  resolve,
  resolve4,
  resolve6,
  resolveAny,
  resolveCname,
  resolveCaa,
  resolveMx,
  resolveNaptr,
  resolveNs,
  resolvePtr,
  resolveSoa,
  resolveSrv,
  resolveTxt,
  reverse,
  setDefaultResultOrder,
  getDefaultResultOrder,
  setServers,
  Resolver,
  promises,
  ...sortedCodes,
};
