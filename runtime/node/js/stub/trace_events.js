// node:trace_events as workerd has it: tracing that records nothing.
class Tracing {
  get enabled() {
    return false;
  }
  get categories() {
    return "";
  }
  enable() {}
  disable() {}
}
export function createTracing() {
  return new Tracing();
}
export function getEnabledCategories() {
  return undefined;
}
export default { createTracing, getEnabledCategories };
