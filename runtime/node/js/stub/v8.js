// node:v8 as workerd has it: no heap or flags to reach from a Worker. The
// statistics are zeros; the rest throws ERR_METHOD_NOT_IMPLEMENTED.
import { notImplemented, unimplemented, validateString } from "cellhost-node:_errors";

export const cachedDataVersionTag = () => 0;
export const getHeapSpaceStatistics = () => [];
export function getHeapStatistics() {
  const keys = [
    "total_heap_size", "total_heap_size_executable", "total_physical_size", "total_available_size",
    "used_heap_size", "heap_size_limit", "malloced_memory", "peak_malloced_memory", "does_zap_garbage",
    "number_of_native_contexts", "number_of_detached_contexts", "total_global_handles_size",
    "used_global_handles_size", "external_memory", "total_allocated_bytes",
  ];
  return Object.fromEntries(keys.map((k) => [k, 0]));
}
export function getHeapCodeStatistics() {
  return {
    code_and_metadata_size: 0,
    bytecode_and_metadata_size: 0,
    external_script_source_size: 0,
    cpu_profiler_metadata_size: 0,
  };
}
export function getCppHeapStatistics(type = "detailed") {
  if (type !== "brief" && type !== "detailed") {
    const e = new TypeError(`The argument 'type' must be one of: 'brief', 'detailed'. Received '${type}'`);
    e.code = "ERR_INVALID_ARG_VALUE";
    throw e;
  }
  return {
    committed_size_bytes: 0,
    resident_size_bytes: 0,
    used_size_bytes: 0,
    space_statistics: [],
    type_names: [],
    detail_level: type,
  };
}
export function setFlagsFromString(flags) {
  validateString(flags, "flags");
  throw notImplemented("setFlagsFromString");
}
export function isStringOneByteRepresentation(content) {
  validateString(content, "content");
  throw notImplemented("isStringOneByteRepresentation");
}
export const writeHeapSnapshot = unimplemented("writeHeapSnapshot");
export const getHeapSnapshot = unimplemented("getHeapSnapshot");
export const setHeapSnapshotNearHeapLimit = unimplemented("setHeapSnapshotNearHeapLimit");
export const serialize = unimplemented("serialize");
export const deserialize = unimplemented("deserialize");
export const queryObjects = unimplemented("queryObjects");
export const takeCoverage = unimplemented("takeCoverage");
export const stopCoverage = unimplemented("stopCoverage");

function stubs(cls, names) {
  for (const n of names) cls.prototype[n] = unimplemented(n);
  return cls;
}
export const Serializer = stubs(
  class Serializer {
    constructor() {
      throw notImplemented("Serializer");
    }
  },
  ["writeHeader", "writeValue", "releaseBuffer", "transferArrayBuffer", "writeUint32", "writeUint64", "writeDouble",
    "writeRawBytes", "_getDataCloneError", "_getSharedArrayBufferId", "_setTreatArrayBufferViewsAsHostObjects",
    "_writeHostObject"],
);
export const Deserializer = stubs(
  class Deserializer {
    constructor() {
      throw notImplemented("Deserializer");
    }
  },
  ["readHeader", "readValue", "transferArrayBuffer", "getWireFormatVersion", "readUint32", "readUint64", "readDouble",
    "readRawBytes", "_readHostObject"],
);
export class DefaultSerializer extends Serializer {}
export class DefaultDeserializer extends Deserializer {}
export class GCProfiler {}
GCProfiler.prototype.start = unimplemented("GCProfiler.start");
GCProfiler.prototype.stop = unimplemented("GCProfiler.stop");
export const promiseHooks = Object.fromEntries(
  ["createHook", "onInit", "onBefore", "onAfter", "onSettled"].map((k) => [k, unimplemented(`promiseHooks.${k}`)]),
);
export const startupSnapshot = {
  addSerializeCallback: unimplemented("startupSnapshot.addSerializeCallback"),
  addDeserializeCallback: unimplemented("startupSnapshot.addDeserializeCallback"),
  setDeserializeMainFunction: unimplemented("startupSnapshot.setDeserializeMainFunction"),
  isBuildingSnapshot: () => false,
};

export default {
  cachedDataVersionTag, getHeapSnapshot, getHeapStatistics, getHeapSpaceStatistics, getHeapCodeStatistics,
  getCppHeapStatistics, setFlagsFromString, Serializer, Deserializer, DefaultSerializer, DefaultDeserializer,
  deserialize, takeCoverage, stopCoverage, serialize, writeHeapSnapshot, promiseHooks, queryObjects,
  startupSnapshot, setHeapSnapshotNearHeapLimit, GCProfiler, isStringOneByteRepresentation,
};
