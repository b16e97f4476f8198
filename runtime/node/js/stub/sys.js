// node:sys: Node's old name for node:util.
import util from "node:util";
export * from "node:util";
export default util;
