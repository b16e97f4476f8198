// node:http2 as workerd has it: the constants and names, but no sessions
// or servers (they throw ERR_METHOD_NOT_IMPLEMENTED).
import { http2Constants as constants } from "node:cellhost/internals";
import { notImplemented, unimplemented } from "cellhost-node:_errors";

export { constants };
export const connect = unimplemented("http2.connect");
export const createServer = unimplemented("http2.createServer");
export const createSecureServer = unimplemented("http2.createSecureServer");
export const performServerHandshake = unimplemented("http2.performServerHandshake");
export const getDefaultSettings = () => ({});
export const getPackedSettings = unimplemented("http2.getPackedSettings");
export const getUnpackedSettings = unimplemented("http2.getUnpackedSettings");
export const sensitiveHeaders = Symbol("nodejs.http2.sensitiveHeaders");
export class Http2ServerRequest {
  constructor() {
    throw notImplemented("Http2ServerRequest");
  }
}
export class Http2ServerResponse {
  constructor() {
    throw notImplemented("Http2ServerResponse");
  }
}
export default {
  Http2ServerRequest, Http2ServerResponse, connect, constants, createSecureServer, createServer,
  getDefaultSettings, getPackedSettings, getUnpackedSettings, performServerHandshake, sensitiveHeaders,
};
