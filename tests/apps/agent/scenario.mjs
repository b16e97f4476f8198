// The agents app's scenario, run by tests/apps.rs against cellhost and
// against `wrangler dev`: prints one line per observation, compared as text.
//   node [--experimental-websocket] scenario.mjs BASE_URL first|restart
// Node.js has a WebSocket client from 22 (20 behind a flag); `ws` otherwise.
const WebSocket = globalThis.WebSocket ?? (await import("ws")).default;
const [base, phase] = process.argv.slice(2);
const ws = (path) => new URL(path, base.replace(/^http/, "ws")).href;
const log = (...a) => console.log(a.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(" "));

function client(name) {
  const sock = new WebSocket(ws(`/agents/counter-agent/${name}`));
  const waiting = [];
  const frames = [];
  sock.addEventListener("message", (e) => {
    const f = JSON.parse(e.data);
    if (f.type !== "cf_agent_state" && f.type !== "rpc") return;
    const w = waiting.findIndex((p) => p.match(f));
    if (w >= 0) waiting.splice(w, 1)[0].resolve(f);
    else frames.push(f);
  });
  const next = (match, ms = 5000) => {
    const i = frames.findIndex(match);
    if (i >= 0) return Promise.resolve(frames.splice(i, 1)[0]);
    return new Promise((resolve, reject) => {
      waiting.push({ match, resolve });
      setTimeout(() => reject(new Error(`timed out waiting in ${name}`)), ms);
    });
  };
  let id = 0;
  const call = async (method, ...args) => {
    const rid = `r${++id}`;
    sock.send(JSON.stringify({ type: "rpc", id: rid, method, args }));
    const r = await next((f) => f.type === "rpc" && f.id === rid);
    return r.success ? r.result : `error: ${r.error}`;
  };
  const state = () => next((f) => f.type === "cf_agent_state").then((f) => f.state);
  const open = new Promise((r, j) => { sock.onopen = r; sock.onerror = () => j(new Error("ws error")); });
  return { open, call, state, close: () => sock.close() };
}

if (phase === "first") {
  const a = client("room1");
  await a.open;
  log("a initial state", await a.state());
  log("a increment", await a.call("increment"));
  log("a state", await a.state());
  log("a increment", await a.call("increment"));
  log("a state", await a.state());
  const b = client("room1");
  await b.open;
  log("b initial state", await b.state());
  log("a increment", await a.call("increment"));
  log("b sees", await b.state());
  log("a no such method", await a.call("nope"));
  log("a schedules", await a.call("later", 1));
  log("b sees scheduled", await b.state());
  const other = client("room2");
  await other.open;
  log("room2 state", await other.state());
  a.close(); b.close(); other.close();
  const r = await fetch(new URL("/elsewhere", base));
  log("other path", r.status, await r.text());
} else {
  const a = client("room1");
  await a.open;
  log("after restart", await a.state());
  log("increment", await a.call("increment"));
  a.close();
}
process.exit(0);
