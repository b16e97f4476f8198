// node:wasi as workerd has it: no WASI host in a Worker.
import { notImplemented } from "cellhost-node:_errors";
export class WASI {
  constructor() {
    throw notImplemented("WASI");
  }
}
export default { WASI };
