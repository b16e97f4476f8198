// The partyserver chat room's scenario (see tests/apps.rs): one line per
// frame a client receives.
//   node [--experimental-websocket] scenario.mjs BASE_URL first|restart
// Node.js has a WebSocket client from 22 (20 behind a flag); `ws` otherwise.
const WebSocket = globalThis.WebSocket ?? (await import("ws")).default;
const [base, phase] = process.argv.slice(2);
function client(name, room = "lobby") {
  const sock = new WebSocket(new URL(`/parties/chat/${room}`, base.replace(/^http/, "ws")).href);
  const frames = [];
  const waiting = [];
  sock.onmessage = (e) => {
    if (waiting.length) waiting.shift()(e.data);
    else frames.push(e.data);
  };
  const next = () =>
    frames.length
      ? Promise.resolve(frames.shift())
      : new Promise((resolve, reject) => {
          waiting.push(resolve);
          setTimeout(() => reject(new Error(`${name} timed out`)), 5000);
        });
  const open = new Promise((r, j) => { sock.onopen = r; sock.onerror = () => j(new Error("ws error")); });
  return { name, open, next, send: (t) => sock.send(t), close: () => sock.close() };
}
const show = async (c) => console.log(c.name, "got", await c.next());
if (phase === "first") {
  const a = client("a"), b = client("b");
  await a.open; await b.open;
  await show(a); await show(b);
  a.send("hello from a");
  await show(b);
  b.send("hi from b");
  await show(a);
  const c = client("c");
  await c.open;
  await show(c);
  const other = client("o", "elsewhere");
  await other.open;
  await show(other);
  for (const x of [a, b, c, other]) x.close();
  const r = await fetch(new URL("/nothing", base));
  console.log("other path", r.status, await r.text());
} else {
  const d = client("d");
  await d.open;
  await show(d);
  d.close();
}
process.exit(0);
