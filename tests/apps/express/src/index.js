// An Express 5 app served the way Cloudflare's docs show: app.listen() on
// a port, and cloudflare:node's httpServerHandler as the Worker's fetch.
import express from "express";
import { httpServerHandler } from "cloudflare:node";

const app = express();
app.use(express.json());
app.use(express.urlencoded({ extended: false }));

// Read-only: requests may land on any isolate (as on Cloudflare), so the
// app keeps no state of its own between requests.
const items = new Map([
  [1, { id: 1, name: "pen", tags: ["blue"] }],
  [2, { id: 2, name: "cup", tags: [] }],
]);

app.get("/", (req, res) => {
  res.send("<h1>Express on Workers</h1>");
});

app.get("/info", (req, res) => {
  res.json({
    method: req.method,
    path: req.path,
    query: req.query,
    protocol: req.protocol,
    secure: req.secure,
    hostname: req.hostname,
    ip: req.ip,
    xhr: req.xhr,
    accepts: req.accepts(["json", "html"]),
    ua: req.get("user-agent"),
    fresh: req.fresh,
  });
});

app.post("/items", (req, res) => {
  if (typeof req.body?.name !== "string") {
    return res.status(400).json({ error: "name required", got: req.body ?? null });
  }
  const item = { id: 100 + req.body.name.length, name: req.body.name, tags: req.body.tags ?? [] };
  res.status(201).location(`/items/${item.id}`).json(item);
});

app.get("/items/:id", (req, res, next) => {
  const item = items.get(Number(req.params.id));
  if (!item) return next();
  res.format({
    json: () => res.json(item),
    text: () => res.send(`${item.id}: ${item.name}`),
  });
});

app.delete("/items/:id", (req, res) => {
  res.sendStatus(items.has(Number(req.params.id)) ? 204 : 404);
});

app.post("/form", (req, res) => {
  res.json({ form: req.body, type: req.get("content-type") });
});

app.get("/cookies", (req, res) => {
  res.cookie("session", "abc", { httpOnly: true, path: "/", sameSite: "lax" });
  res.clearCookie("old");
  res.json({ sent: req.get("cookie") ?? null });
});

app.get("/redirect", (req, res) => res.redirect(302, "/info?from=redirect"));

app.get("/etag", (req, res) => {
  res.set("Cache-Control", "no-cache").send("a body that gets an etag");
});

app.get("/stream", (req, res) => {
  res.type("text/plain");
  res.write("first,");
  setTimeout(() => {
    res.write("second,");
    setTimeout(() => res.end("last"), 5);
  }, 5);
});

app.get("/async", async (req, res) => {
  await new Promise((r) => setTimeout(r, 5));
  if (req.query.fail) throw new Error("async failure");
  res.json({ waited: true });
});

app.get("/sync-error", () => {
  throw new Error("sync failure");
});

const router = express.Router();
router.use((req, res, next) => {
  res.set("X-Router", "api");
  next();
});
router.get("/users/:user/posts/:post", (req, res) => res.json(req.params));
app.use("/api", router);

app.use((req, res) => {
  res.status(404).json({ error: "not found", path: req.originalUrl });
});

app.use((err, req, res, next) => {
  res.status(500).json({ error: err.message });
});

app.listen(3000);
export default httpServerHandler({ port: 3000 });
