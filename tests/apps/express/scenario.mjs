// The Express app's scenario (see tests/apps.rs): one line per response.
//   node scenario.mjs BASE_URL first|restart
const [base, phase] = process.argv.slice(2);
const shown = ["content-type", "location", "set-cookie", "etag", "x-powered-by", "x-router", "cache-control", "vary"];
async function req(method, path, init = {}) {
  const r = await fetch(new URL(path, base), { method, redirect: "manual", ...init });
  const headers = shown.map((h) => `${h}=${r.headers.get(h)}`).join(" ");
  console.log(method, path, r.status, headers, JSON.stringify(await r.text()));
  return r;
}
const json = (body) => ({ headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
if (phase === "first") {
  await req("GET", "/");
  await req("GET", "/info?a=1&b=two&b=three", { headers: { "x-requested-with": "XMLHttpRequest", "user-agent": "scenario", accept: "text/html" } });
  await req("POST", "/items", json({ name: "pen", tags: ["blue"] }));
  await req("POST", "/items", json({ name: "cup" }));
  await req("POST", "/items", json({ nope: 1 }));
  await req("POST", "/items", { headers: { "content-type": "application/json" }, body: "{bad json" });
  await req("GET", "/items/1");
  await req("GET", "/items/2", { headers: { accept: "text/plain" } });
  await req("DELETE", "/items/1");
  await req("DELETE", "/items/9");
  await req("GET", "/items/9");
  await req("POST", "/form", { headers: { "content-type": "application/x-www-form-urlencoded" }, body: "x=1&y=a+b&z=%C3%A9" });
  await req("GET", "/cookies", { headers: { cookie: "old=1; other=2" } });
  await req("GET", "/redirect");
  const first = await req("GET", "/etag");
  await req("GET", "/etag", { headers: { "if-none-match": first.headers.get("etag") } });
  await req("GET", "/stream");
  await req("GET", "/async");
  await req("GET", "/async?fail=1");
  await req("GET", "/sync-error");
  await req("GET", "/api/users/7/posts/hello%20world");
  await req("HEAD", "/");
  await req("GET", "/missing/path?q=1");
} else {
  await req("GET", "/items/2");
  await req("POST", "/items", json({ name: "again" }));
}
