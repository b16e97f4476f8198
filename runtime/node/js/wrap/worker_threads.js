// node:worker_threads with workerd's export names (registered as
// node:worker_threads itself, src/lib.rs: built on the script behind
// deno_node's synthetic module, which deno_core would link ahead of any
// loader): Worker refuses as workerd's does (a Worker
// starts no threads; deno_node's threw 'op is disabled'), and deno_node's
// `locks` and `threadName` are left out.
import { core } from "ext:core/mod.js";
const m = core.loadExtScript("ext:deno_node/worker_threads.ts");
import { EventEmitter } from "node:events";

export class Worker extends EventEmitter {
  constructor() {
    const e = new Error("The Worker method is not implemented");
    e.code = "ERR_METHOD_NOT_IMPLEMENTED";
    throw e;
  }
}
export const {
  BroadcastChannel, MessageChannel, MessagePort, SHARE_ENV, getEnvironmentData, isInternalThread, isMainThread,
  isMarkedAsUntransferable, markAsUncloneable, markAsUntransferable, moveMessagePortToContext, parentPort,
  postMessageToThread, receiveMessageOnPort, resourceLimits, setEnvironmentData, threadId, workerData,
} = m;
export default {
  BroadcastChannel, MessageChannel, MessagePort, SHARE_ENV, Worker, getEnvironmentData, isInternalThread,
  isMainThread, isMarkedAsUntransferable, markAsUncloneable, markAsUntransferable, moveMessagePortToContext,
  parentPort, postMessageToThread, receiveMessageOnPort, resourceLimits, setEnvironmentData, threadId, workerData,
};
