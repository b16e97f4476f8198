// node:console: the Worker's console, with Node's Console class.
import { Console } from "node:console";
const c = globalThis.console;
if (!("Console" in c)) c.Console = Console;
export { Console };
export const {
  assert, clear, context, count, countReset, createTask, debug, dir, dirxml, error, group, groupCollapsed,
  groupEnd, info, log, profile, profileEnd, table, time, timeEnd, timeLog, timeStamp, trace, warn,
} = c;
export default c;
