import { WorkerEntrypoint } from "cloudflare:workers";

export class Greeter extends WorkerEntrypoint {
  greet(name) {
    return `hello ${name}`;
  }
  props() {
    return this.ctx.props;
  }
  echo(v) {
    return { got: v, type: Object.prototype.toString.call(v.map) };
  }
  get version() {
    return "v2";
  }
  fail(msg) {
    throw new TypeError(msg);
  }
  failRange() {
    throw new RangeError("out of range");
  }
}

export default class extends WorkerEntrypoint {
  async fetch(req) {
    const u = new URL(req.url);
    if (u.pathname === "/hello") {
      return new Response(`back saw ${u.pathname}${u.search} from ${req.headers.get("x-from")}`, { headers: { "x-back": "yes" } });
    }
    if (u.pathname === "/echo") return new Response(`echo: ${await req.text()}`);
    if (u.pathname === "/throw") throw new Error("back fetch failed");
    return new Response("not here", { status: 404 });
  }
  add(a, b) {
    return a + b;
  }
}
