// Chat fan-out load: N members join one room of examples/chat, one of them
// sends M messages (at most W unanswered at once); every member times each
// message from its send to its arrival. Prints one JSON line of results.
//   node bench/chat-client.mjs PORT N M W
import WebSocket from "../tests/node_modules/ws/index.js";

const [port, n, m, w] = process.argv.slice(2).map(Number);
const room = `bench${Date.now()}`;
const sentAt = new Map();
const latencies = [];
let delivered = 0;
let senderGot = 0;
let sent = 0;
let resolveDone;
const done = new Promise((r) => (resolveDone = r));

function join(user) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/room/${room}/websocket?user=${user}`);
    ws.on("error", reject);
    ws.on("open", () => resolve(ws));
    ws.on("message", (data) => {
      const msg = JSON.parse(data.toString());
      if (msg.type !== "message") return;
      const t0 = sentAt.get(msg.text);
      if (t0 === undefined) return;
      latencies.push(performance.now() - t0);
      delivered++;
      if (user === "u0") {
        senderGot++;
        pump(ws);
        if (senderGot === m) resolveDone();
      }
    });
  });
}

function pump(ws) {
  while (sent < m && sent - senderGot < w) {
    const text = `m${sent++}`;
    sentAt.set(text, performance.now());
    ws.send(text);
  }
}

const members = [];
for (let i = 0; i < n; i++) members.push(await join(`u${i}`));
await new Promise((r) => setTimeout(r, 300)); // joins settle
const start = performance.now();
pump(members[0]);
await done;
// Stragglers: every member should see every message.
const deadline = performance.now() + 5000;
while (delivered < n * m && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
const secs = (performance.now() - start) / 1000;
latencies.sort((a, b) => a - b);
const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))];
console.log(JSON.stringify({
  delivered,
  expected: n * m,
  msgsPerSec: m / secs,
  framesPerSec: delivered / secs,
  p50: q(0.5),
  p99: q(0.99),
}));
for (const ws of members) ws.terminate();
process.exit(0);
