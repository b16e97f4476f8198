// A chat room per name, in the shape of Cloudflare's chat demo: clients
// connect a WebSocket to /room/<room>/websocket?user=<name>; each message
// is kept in the room's SQL history and broadcast to everyone in the room.
// Sockets are hibernatable, so an idle room is evicted from memory while
// its members stay connected; presence is the sockets' tags.
//
//   server -> client  {type:"history", messages:[{id,user,text,at}]}
//                     {type:"presence", users:[...]}
//                     {type:"joined"|"quit", user}
//                     {type:"message", id, user, text, at}
//                     {type:"pong"}                    (auto-response to "ping")
//   client -> server  any text: a chat message (at most 1000 characters)
import { DurableObject } from "cloudflare:workers";

const HISTORY = 100;

export class ChatRoom extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS messages (
      id INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL, text TEXT NOT NULL, at INTEGER NOT NULL)`);
    // Keep-alive pings are answered without waking the room.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", '{"type":"pong"}'));
  }

  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname.endsWith("/history")) return Response.json(this.history());
    if (request.headers.get("Upgrade") !== "websocket") {
      return new Response("expected a WebSocket upgrade", { status: 426 });
    }
    const user = (url.searchParams.get("user") ?? "").trim().slice(0, 32);
    if (user === "") return new Response("missing ?user=", { status: 400 });
    const [client, server] = Object.values(new WebSocketPair());
    this.ctx.acceptWebSocket(server, [user]);
    server.send(JSON.stringify({ type: "history", messages: this.history() }));
    server.send(JSON.stringify({ type: "presence", users: this.users() }));
    this.broadcast({ type: "joined", user }, server);
    return new Response(null, { status: 101, webSocket: client });
  }

  webSocketMessage(ws, message) {
    if (typeof message !== "string") return;
    const text = message.slice(0, 1000);
    const [user] = this.ctx.getTags(ws);
    const at = Date.now();
    const { id } = this.sql
      .exec("INSERT INTO messages (user, text, at) VALUES (?, ?, ?) RETURNING id", user, text, at)
      .one();
    this.sql.exec("DELETE FROM messages WHERE id <= ?", id - HISTORY);
    this.broadcast({ type: "message", id, user, text, at });
  }

  webSocketClose(ws, code) {
    const [user] = this.ctx.getTags(ws);
    ws.close(code === 1005 ? 1000 : code, "bye");
    this.broadcast({ type: "quit", user }, ws);
  }

  webSocketError(ws) {
    this.webSocketClose(ws, 1011);
  }

  history() {
    return this.sql.exec("SELECT id, user, text, at FROM messages ORDER BY id").toArray();
  }

  users() {
    const names = new Set();
    for (const ws of this.ctx.getWebSockets()) names.add(this.ctx.getTags(ws)[0]);
    return [...names].sort();
  }

  broadcast(event, except) {
    const data = JSON.stringify(event);
    for (const ws of this.ctx.getWebSockets()) {
      if (ws === except) continue;
      try {
        ws.send(data);
      } catch {
        // closing: its webSocketClose() follows
      }
    }
  }
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>cellhost chat</title>
<input id="room" placeholder="room" value="lobby"> <input id="user" placeholder="name">
<button id="join">join</button><pre id="log"></pre><input id="text" size="60" disabled>
<script>
const $ = (id) => document.getElementById(id);
$("join").onclick = () => {
  const ws = new WebSocket(\`\${location.origin.replace("http", "ws")}/room/\${$("room").value}/websocket?user=\${encodeURIComponent($("user").value)}\`);
  const show = (line) => ($("log").textContent += line + "\\n");
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.type === "history") m.messages.forEach((x) => show(x.user + ": " + x.text));
    else if (m.type === "message") show(m.user + ": " + m.text);
    else if (m.type === "presence") show("here: " + m.users.join(", "));
    else if (m.type !== "pong") show("* " + m.user + " " + m.type);
  };
  ws.onopen = () => { $("text").disabled = false; setInterval(() => ws.send("ping"), 30000); };
  $("text").onkeydown = (e) => { if (e.key === "Enter") { ws.send($("text").value); $("text").value = ""; } };
};
</script>`;

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const m = url.pathname.match(/^\/room\/([A-Za-z0-9_-]{1,64})\/(websocket|history)$/);
    if (m) return env.ROOMS.getByName(m[1]).fetch(request);
    if (url.pathname === "/") return new Response(PAGE, { headers: { "content-type": "text/html; charset=utf-8" } });
    return new Response("not found", { status: 404 });
  },
};
