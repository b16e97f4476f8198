// node:dns as workerd implements it (workerd 1.20261117, src/node/dns.ts and
// src/node/internal/internal_dns*.ts, src/rust/api/dns.rs): DNS-over-HTTPS
// queries against cloudflare-dns.com sent through the Worker's global `fetch`
// (looked up at call time, so a patched globalThis.fetch sees them), JSON
// answers normalised to Node's shapes. Plain JS that imports nothing; the
// module is this file, dns_errors.js, dns_records.js and dns_api.js one
// after another (src/wrap.rs).
//
// `promises` is an object shaped like workerd's internal_dns_promises module
// namespace; node:dns/promises (dns_promises.js) re-exports its members.

// ---------------------------------------------------------------------------
// Constants (internal_dns_constants).

const errorCodes = {
  NODATA: "ENODATA",
  FORMERR: "EFORMERR",
  SERVFAIL: "ESERVFAIL",
  NOTFOUND: "ENOTFOUND",
  NOTIMP: "ENOTIMP",
  REFUSED: "EREFUSED",
  BADQUERY: "EBADQUERY",
  BADNAME: "EBADNAME",
  BADFAMILY: "EBADFAMILY",
  BADRESP: "EBADRESP",
  CONNREFUSED: "ECONNREFUSED",
  TIMEOUT: "ETIMEOUT",
  EOF: "EOF",
  FILE: "EFILE",
  NOMEM: "ENOMEM",
  DESTRUCTION: "EDESTRUCTION",
  BADSTR: "EBADSTR",
  BADFLAGS: "EBADFLAGS",
  NONAME: "ENONAME",
  BADHINTS: "EBADHINTS",
  NOTINITIALIZED: "ENOTINITIALIZED",
  LOADIPHLPAPI: "ELOADIPHLPAPI",
  ADDRGETNETWORKPARAMS: "EADDRGETNETWORKPARAMS",
  CANCELLED: "ECANCELLED",
  ADDRCONFIG: 1024,
  ALL: 256,
  V4MAPPED: 2048,
};
// workerd spreads the constants' module namespace, whose keys are sorted.
const sortedCodes = {};
for (const k of Object.keys(errorCodes).sort()) sortedCodes[k] = errorCodes[k];

export const {
  NODATA, FORMERR, SERVFAIL, NOTFOUND, NOTIMP, REFUSED, BADQUERY, BADNAME,
  BADFAMILY, BADRESP, CONNREFUSED, TIMEOUT, EOF, FILE, NOMEM, DESTRUCTION,
  BADSTR, BADFLAGS, NONAME, BADHINTS, NOTINITIALIZED, LOADIPHLPAPI,
  ADDRGETNETWORKPARAMS, CANCELLED, ADDRCONFIG, ALL, V4MAPPED,
} = errorCodes;

