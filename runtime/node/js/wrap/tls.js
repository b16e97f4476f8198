// node:tls with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs): no root certificates (deno_node's would read the
// host's, and threw 'op is disabled'), and none of deno_node's additions
// (the CA certificate getter and setter, CryptoStream, SecurePair).
import * as m from "node:tls";

function secureContextClass() {
  try {
    return m.createSecureContext().constructor;
  } catch {
    return undefined;
  }
}
export const SecureContext = secureContextClass();
export const rootCertificates = Object.freeze([]);
export const {
  CLIENT_RENEG_LIMIT, CLIENT_RENEG_WINDOW, DEFAULT_CIPHERS, DEFAULT_ECDH_CURVE, DEFAULT_MAX_VERSION,
  DEFAULT_MIN_VERSION, Server, TLSSocket, checkServerIdentity, connect, convertALPNProtocols, createSecureContext,
  createSecurePair, createServer, getCiphers,
} = m;
export default {
  CLIENT_RENEG_LIMIT, CLIENT_RENEG_WINDOW, DEFAULT_CIPHERS, DEFAULT_ECDH_CURVE, DEFAULT_MAX_VERSION,
  DEFAULT_MIN_VERSION, SecureContext, Server, TLSSocket, checkServerIdentity, connect, convertALPNProtocols,
  createSecureContext, createSecurePair, createServer, getCiphers, rootCertificates,
};
