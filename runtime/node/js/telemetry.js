// Stands in for Deno's OpenTelemetry extension (see telemetry_util.js):
// tracing is never enabled, so the polyfills never start a span.
(function () {
  return {
    otelState: { TRACING_ENABLED: false, METRICS_ENABLED: false },
    builtinTracer() {
      throw new Error("OpenTelemetry tracing is not supported in a Worker (cellhost)");
    },
    ContextManager: { active: () => undefined },
    SPAN_KEY: Symbol("span"),
  };
})();
