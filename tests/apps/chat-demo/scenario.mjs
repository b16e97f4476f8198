// The chat demo's scenario (see tests/apps.rs): after each step, every
// client's received frames in order (timestamps left out), then the next.
//   node [--experimental-websocket] scenario.mjs BASE_URL first|restart
// Node.js has a WebSocket client from 22 (20 behind a flag); `ws` otherwise.
const WebSocket = globalThis.WebSocket ?? (await import("ws")).default;
import { readFileSync, writeFileSync } from "node:fs";
const [base, phase] = process.argv.slice(2);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const clients = [];
function join(name, room) {
  const sock = new WebSocket(new URL(`/api/room/${room}/websocket`, base.replace(/^http/, "ws")).href);
  const c = { name, frames: [], sock };
  sock.onmessage = (e) => {
    const f = JSON.parse(e.data);
    delete f.timestamp;
    c.frames.push(JSON.stringify(f));
  };
  clients.push(c);
  return new Promise((r, j) => {
    sock.onopen = () => { sock.send(JSON.stringify({ name })); r(c); };
    sock.onerror = () => j(new Error("ws error"));
  });
}
// Waits for the frames a step should bring (up to 5 s: a runtime under
// load is slow, not wrong), then a moment more for any that should not
// come; without a count, a fixed 250 ms.
async function step(label, expect) {
  const count = () => clients.reduce((n, c) => n + c.frames.length, 0);
  if (expect === undefined) {
    await sleep(250);
  } else {
    const until = Date.now() + 5000;
    while (count() < expect && Date.now() < until) await sleep(20);
    await sleep(150);
  }
  console.log(`-- ${label}`);
  for (const c of clients) {
    for (const f of c.frames) console.log(c.name, f);
    c.frames = [];
  }
}
const say = (c, message) => c.sock.send(JSON.stringify({ message }));

if (phase === "first") {
  const page = await fetch(new URL("/", base));
  const html = await page.text();
  console.log("page", page.status, page.headers.get("content-type"), html.length, html.includes("<h1>Chat</h1>"));
  const created = await fetch(new URL("/api/room", base), { method: "POST" });
  const id = await created.text();
  console.log("new room", created.status, /^[0-9a-f]{64}$/.test(id));
  writeFileSync(".room-id", id);
  const alice = await join("alice", "lobby");
  await step("alice joined", 2);
  const bob = await join("bob", "lobby");
  await step("bob joined", 4);
  say(alice, "hi");
  await step("alice said hi", 2);
  say(bob, "hello");
  await step("bob said hello", 2);
  const carol = await join("carol", id);
  await step("carol joined the new room", 2);
  say(carol, "anyone?");
  await step("carol asked", 1);
  alice.sock.close();
  await step("alice left", 1);
  const bad = await fetch(new URL(`/api/room/${"x".repeat(40)}/websocket`, base));
  console.log("long name", bad.status, await bad.text());
  const nf = await fetch(new URL("/nowhere", base));
  console.log("other path", nf.status, await nf.text());
} else {
  const id = readFileSync(".room-id", "utf8");
  await join("dave", "lobby");
  await step("dave joined after restart");
  await join("erin", id);
  await step("erin joined the new room after restart");
}
for (const c of clients) c.sock.close();
process.exit(0);
