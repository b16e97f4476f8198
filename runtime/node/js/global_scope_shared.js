// What node:console reads of Deno's global-scope table: the console.
export const windowOrWorkerGlobalScope = {
  console: { value: globalThis.console },
};
