// @request GET /setup
// @request GET /read
// @request GET /types
// @request GET /batch
// @request GET /errors
// @request GET /exec
// @request GET /session
// D1: statements, binding and results, batches as one transaction, exec,
// sessions; meta as far as it is not timing (duration, size).
const out = [];
const t = async (name, f) => {
  try {
    out.push(`${name}: ${JSON.stringify(await f())}`);
  } catch (e) {
    out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message} cause=${e?.cause?.message}`);
  }
};
// rows_read/rows_written compared too: both runtimes count them in SQLite.
const meta = (r) => {
  const { duration, size_after, served_by, timings, ...rest } = r.meta;
  return { ...r, meta: { ...rest, duration: typeof duration, size_after: typeof size_after, served_by: typeof served_by } };
};

export default {
  async fetch(req, env) {
    out.length = 0;
    const { DB } = env;
    switch (new URL(req.url).pathname) {
      case "/setup":
        await t("type", () => [Object.prototype.toString.call(DB), typeof DB.prepare, typeof DB.batch, typeof DB.exec]);
        await t("create", async () => meta(await DB.prepare("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, score REAL, avatar BLOB)").run()));
        await t("insert", async () => meta(await DB.prepare("INSERT INTO users (name, age, score) VALUES (?, ?, ?)").bind("ann", 31, 9.5).run()));
        await t("insert2", async () => meta(await DB.prepare("INSERT INTO users (name, age) VALUES (?1, ?2)").bind("bob", 25).run()));
        await t("insert-blob", async () => meta(await DB.prepare("INSERT INTO users (name, avatar) VALUES (?, ?)").bind("cy", new Uint8Array([1, 2, 255])).run()));
        await t("update", async () => meta(await DB.prepare("UPDATE users SET age = age + 1 WHERE age IS NOT NULL").run()));
        break;
      case "/read":
        await t("all", async () => meta(await DB.prepare("SELECT id, name, age, score FROM users ORDER BY id").all()));
        await t("first", () => DB.prepare("SELECT * FROM users WHERE name = ?").bind("ann").first());
        await t("first-col", () => DB.prepare("SELECT name FROM users ORDER BY id").first("name"));
        await t("first-none", () => DB.prepare("SELECT * FROM users WHERE id = 99").first());
        await t("first-missing-col", () => DB.prepare("SELECT name FROM users").first("nope"));
        await t("raw", () => DB.prepare("SELECT id, name FROM users ORDER BY id").raw());
        await t("raw-names", () => DB.prepare("SELECT id, name FROM users ORDER BY id").raw({ columnNames: true }));
        await t("raw-empty-names", () => DB.prepare("SELECT id, name FROM users WHERE 0").raw({ columnNames: true }));
        await t("count", () => DB.prepare("SELECT count(*) AS n FROM users").first("n"));
        await t("stmt-props", () => {
          const s = DB.prepare("SELECT ?").bind(1, "x");
          return [s.statement, s.params, Object.prototype.toString.call(s)];
        });
        break;
      case "/types":
        await t("blob", () => DB.prepare("SELECT avatar FROM users WHERE name = 'cy'").first("avatar"));
        await t("bool", () => DB.prepare("SELECT ? AS t, ? AS f").bind(true, false).first());
        await t("null", () => DB.prepare("SELECT ? AS n").bind(null).first());
        await t("number", () => DB.prepare("SELECT ? AS i, ? AS f, 7 AS lit, 2.5 AS lf").bind(42, 1.25).first());
        await t("big", () => DB.prepare("SELECT 9007199254740993 AS big").first());
        await t("text", () => DB.prepare("SELECT ? AS s, typeof(?) AS ty").bind("héllo", "x").first());
        await t("arraybuffer", () => DB.prepare("SELECT hex(?) AS h").bind(new Uint8Array([10, 11]).buffer).first());
        await t("byte-array", () => DB.prepare("SELECT hex(?) AS h").bind([1, 2, 3]).first());
        await t("undefined", () => DB.prepare("SELECT ?").bind(undefined).first());
        await t("object", () => DB.prepare("SELECT ?").bind({ a: 1 }).first());
        await t("symbolish", () => DB.prepare("SELECT ?").bind(10n).first());
        await t("json", () => DB.prepare("SELECT json_object('a', 1, 'b', json_array(1, 2)) AS j").first("j"));
        break;
      case "/batch":
        await t("batch", async () => (await DB.batch([
          DB.prepare("INSERT INTO users (name, age) VALUES (?, ?)").bind("dee", 40),
          DB.prepare("SELECT name FROM users ORDER BY id"),
          DB.prepare("SELECT count(*) AS n FROM users"),
        ])).map(meta));
        await t("batch-rollback", async () => {
          try {
            await DB.batch([
              DB.prepare("INSERT INTO users (name) VALUES ('eve')"),
              DB.prepare("INSERT INTO nope VALUES (1)"),
            ]);
          } catch (e) {
            return [e.message, await DB.prepare("SELECT count(*) AS n FROM users WHERE name = 'eve'").first("n")];
          }
        });
        await t("batch-empty", () => DB.batch([]));
        break;
      case "/errors":
        await t("no-table", () => DB.prepare("SELECT * FROM nope").all());
        await t("syntax", () => DB.prepare("SELEC 1").all());
        await t("constraint", () => DB.prepare("INSERT INTO users (name) VALUES (NULL)").run());
        await t("empty", () => DB.prepare("").all());
        await t("comment-only", () => DB.prepare("-- nothing").all());
        await t("too-few-params", () => DB.prepare("SELECT ?, ?").bind(1).all());
        await t("cf-table", () => DB.prepare("CREATE TABLE _cf_x (a)").run());
        await t("begin", () => DB.prepare("BEGIN TRANSACTION").run());
        await t("two-statements", async () => meta(await DB.prepare("SELECT 1; SELECT 2 AS two").all()));
        await t("indented-comment", () => DB.prepare("  -- nothing").all());
        break;
      case "/exec":
        await t("exec", async () => {
          const r = await DB.exec("CREATE TABLE t (a INTEGER);\nINSERT INTO t VALUES (1);\nINSERT INTO t VALUES (2);");
          return [r.count, typeof r.duration, Object.keys(r)];
        });
        await t("exec-read", () => DB.prepare("SELECT sum(a) AS s FROM t").first("s"));
        await t("exec-error", () => DB.exec("INSERT INTO t VALUES (3);\nINSERT INTO nope VALUES (1);"));
        await t("exec-rolled-back", () => DB.prepare("SELECT count(*) AS n FROM t").first("n"));
        await t("exec-empty", () => DB.exec(""));
        break;
      case "/session":
        await t("session", async () => {
          const s = DB.withSession();
          const before = s.getBookmark();
          const r = await s.prepare("SELECT count(*) AS n FROM users").first("n");
          return [before, r, typeof s.getBookmark(), Object.prototype.toString.call(s)];
        });
        await t("session-primary", () => DB.withSession("first-primary").getBookmark());
        await t("session-bookmark", () => DB.withSession("  bm-1 ").getBookmark());
        await t("session-batch", async () => (await DB.withSession().batch([DB.prepare("SELECT 1 AS one")])).map((r) => r.results));
        break;
    }
    return new Response(out.join("\n"));
  },
};
