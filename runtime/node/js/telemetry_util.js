// deno_node's HTTP client and server report to Deno's OpenTelemetry
// extension; a Worker has none: nothing is traced.
(function () {
  return { updateSpanFromError() {} };
})();
