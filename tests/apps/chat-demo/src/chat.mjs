// A chat app in the shape of Cloudflare's workers-chat-demo: the page is a
// Data module (wrangler's `rules`), each room is a Durable Object keyed by
// name or by a unique id, and a RateLimiter object per client address is
// consulted for every message (its client awaits setTimeout(0) between
// calls, as the demo does).
import HTML from "./chat.html";

async function handleErrors(request, func) {
  try {
    return await func();
  } catch (err) {
    if (request.headers.get("Upgrade") == "websocket") {
      const pair = new WebSocketPair();
      pair[1].accept();
      pair[1].send(JSON.stringify({ error: err.stack.split("\n")[0] }));
      pair[1].close(1011, "Uncaught exception during session setup");
      return new Response(null, { status: 101, webSocket: pair[0] });
    }
    return new Response(err.stack.split("\n")[0], { status: 500 });
  }
}

export default {
  async fetch(request, env) {
    return await handleErrors(request, async () => {
      const url = new URL(request.url);
      const path = url.pathname.slice(1).split("/");
      if (!path[0]) {
        return new Response(HTML, { headers: { "Content-Type": "text/html;charset=UTF-8" } });
      }
      if (path[0] === "api") return handleApiRequest(path.slice(1), request, env);
      return new Response("Not found", { status: 404 });
    });
  },
};

async function handleApiRequest(path, request, env) {
  if (path[0] !== "room") return new Response("Not found", { status: 404 });
  if (!path[1]) {
    if (request.method == "POST") {
      const id = env.rooms.newUniqueId();
      return new Response(id.toString(), { headers: { "Access-Control-Allow-Origin": "*" } });
    }
    return new Response("Method not allowed", { status: 405 });
  }
  const name = path[1];
  let id;
  if (name.match(/^[0-9a-f]{64}$/)) {
    id = env.rooms.idFromString(name);
  } else if (name.length <= 32) {
    id = env.rooms.idFromName(name);
  } else {
    return new Response("Name too long", { status: 404 });
  }
  const roomObject = env.rooms.get(id);
  const newUrl = new URL(request.url);
  newUrl.pathname = "/" + path.slice(2).join("/");
  return roomObject.fetch(newUrl, request);
}

export class ChatRoom {
  constructor(state, env) {
    this.storage = state.storage;
    this.env = env;
    this.sessions = [];
    this.lastTimestamp = 0;
  }

  async fetch(request) {
    return await handleErrors(request, async () => {
      const url = new URL(request.url);
      if (url.pathname === "/websocket") {
        if (request.headers.get("Upgrade") != "websocket") {
          return new Response("expected websocket", { status: 400 });
        }
        const ip = request.headers.get("CF-Connecting-IP") ?? "127.0.0.1";
        const pair = new WebSocketPair();
        await this.handleSession(pair[1], ip);
        return new Response(null, { status: 101, webSocket: pair[0] });
      }
      return new Response("Not found", { status: 404 });
    });
  }

  async handleSession(webSocket, ip) {
    webSocket.accept();
    const limiterId = this.env.limiters.idFromName(ip);
    const limiter = new RateLimiterClient(
      () => this.env.limiters.get(limiterId),
      (err) => webSocket.close(1011, err.stack),
    );
    const session = { webSocket, blockedMessages: [] };
    this.sessions.push(session);
    this.sessions.forEach((other) => {
      if (other.name) session.blockedMessages.push(JSON.stringify({ joined: other.name }));
    });
    const storage = await this.storage.list({ reverse: true, limit: 100 });
    const backlog = [...storage.values()];
    backlog.reverse();
    backlog.forEach((value) => session.blockedMessages.push(value));

    let receivedUserInfo = false;
    webSocket.addEventListener("message", async (msg) => {
      try {
        if (session.quit) {
          webSocket.close(1011, "WebSocket broken.");
          return;
        }
        if (!limiter.checkLimit()) {
          webSocket.send(JSON.stringify({ error: "Your IP is being rate-limited, please try again later." }));
          return;
        }
        const data = JSON.parse(msg.data);
        if (!receivedUserInfo) {
          session.name = "" + (data.name || "anonymous");
          if (session.name.length > 32) {
            webSocket.send(JSON.stringify({ error: "Name too long." }));
            webSocket.close(1009, "Name too long.");
            return;
          }
          session.blockedMessages.forEach((queued) => webSocket.send(queued));
          delete session.blockedMessages;
          this.broadcast({ joined: session.name });
          webSocket.send(JSON.stringify({ ready: true }));
          receivedUserInfo = true;
          return;
        }
        const message = { name: session.name, message: "" + data.message };
        if (message.message.length > 256) {
          webSocket.send(JSON.stringify({ error: "Message too long." }));
          return;
        }
        message.timestamp = Math.max(Date.now(), this.lastTimestamp + 1);
        this.lastTimestamp = message.timestamp;
        const dataStr = JSON.stringify(message);
        this.broadcast(dataStr);
        const key = new Date(message.timestamp).toISOString();
        await this.storage.put(key, dataStr);
      } catch (err) {
        webSocket.send(JSON.stringify({ error: err.stack }));
      }
    });

    const closeOrErrorHandler = () => {
      session.quit = true;
      this.sessions = this.sessions.filter((member) => member !== session);
      if (session.name) this.broadcast({ quit: session.name });
    };
    webSocket.addEventListener("close", closeOrErrorHandler);
    webSocket.addEventListener("error", closeOrErrorHandler);
  }

  broadcast(message) {
    if (typeof message !== "string") message = JSON.stringify(message);
    const quitters = [];
    this.sessions = this.sessions.filter((session) => {
      if (session.name) {
        try {
          session.webSocket.send(message);
          return true;
        } catch {
          session.quit = true;
          quitters.push(session);
          return false;
        }
      }
      session.blockedMessages.push(message);
      return true;
    });
    quitters.forEach((quitter) => {
      if (quitter.name) this.broadcast({ quit: quitter.name });
    });
  }
}

export class RateLimiter {
  constructor() {
    this.nextAllowedTime = 0;
  }

  async fetch(request) {
    return await handleErrors(request, async () => {
      const now = Date.now() / 1000;
      this.nextAllowedTime = Math.max(now, this.nextAllowedTime);
      if (request.method == "POST") this.nextAllowedTime += 0.05;
      const cooldown = Math.max(0, this.nextAllowedTime - now - 20);
      return new Response(cooldown);
    });
  }
}

class RateLimiterClient {
  constructor(getLimiterStub, reportError) {
    this.getLimiterStub = getLimiterStub;
    this.reportError = reportError;
    this.limiter = getLimiterStub();
    this.inCooldown = false;
  }

  checkLimit() {
    if (this.inCooldown) return false;
    this.inCooldown = true;
    this.callLimiter();
    return true;
  }

  async callLimiter() {
    try {
      let response;
      try {
        response = await this.limiter.fetch("https://dummy-url", { method: "POST" });
      } catch {
        this.limiter = this.getLimiterStub();
        response = await this.limiter.fetch("https://dummy-url", { method: "POST" });
      }
      const cooldown = +(await response.text());
      await new Promise((resolve) => setTimeout(resolve, cooldown * 1000));
      this.inCooldown = false;
    } catch (err) {
      this.reportError(err);
    }
  }
}
