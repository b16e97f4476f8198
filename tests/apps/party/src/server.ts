import { type Connection, routePartykitRequest, Server } from "partyserver";

export class Chat extends Server {
  static options = { hibernate: true };

  onStart() {
    this.ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT)",
    );
  }

  onConnect(connection: Connection) {
    const rows = this.ctx.storage.sql.exec("SELECT text FROM messages ORDER BY id").toArray();
    connection.send(JSON.stringify({ type: "history", room: this.name, messages: rows.map((r) => r.text) }));
  }

  onMessage(connection: Connection, message: string) {
    this.ctx.storage.sql.exec("INSERT INTO messages (text) VALUES (?)", message);
    this.broadcast(JSON.stringify({ type: "message", text: message }), [connection.id]);
  }
}

export default {
  async fetch(request: Request, env: Record<string, unknown>) {
    return (await routePartykitRequest(request, env)) ?? new Response("not found", { status: 404 });
  },
};
