// node:inspector/promises: node:inspector's stubs (see inspector.js).
import inspector from "cellhost-node:inspector";
export { Network, Session, close, console, open, url, waitForDebugger } from "cellhost-node:inspector";
export default inspector;
