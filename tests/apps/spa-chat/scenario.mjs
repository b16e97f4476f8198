// The spa-chat app's scenario (see tests/apps.rs): one line per response.
//   node scenario.mjs BASE_URL first|restart
const [base, phase] = process.argv.slice(2);
async function req(method, path, { body, headers } = {}) {
  const r = await fetch(new URL(path, base), {
    method,
    headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    redirect: "manual",
  });
  const text = await r.text();
  const etag = r.headers.get("etag") ? "etag" : "no-etag";
  console.log(method, path, r.status, r.headers.get("content-type"), r.headers.get("location"), etag, text.length > 200 ? text.slice(0, 200) : text);
  return r;
}
const nav = { "sec-fetch-mode": "navigate" };
if (phase === "first") {
  const home = await req("GET", "/");
  await req("GET", "/", { headers: { "if-none-match": home.headers.get("etag") } });
  await req("GET", "/index.html");
  await req("GET", "/rooms/general", { headers: nav });
  await req("GET", "/rooms/general");
  await req("GET", "/assets/chat.js");
  await req("GET", "/assets/missing.js");
  await req("HEAD", "/robots.txt");
  await req("POST", "/api/rooms/general/messages", { body: { author: "ann", text: "hi" } });
  await req("POST", "/api/rooms/general/messages", { body: { author: "bob", text: "hello" } });
  await req("POST", "/api/rooms/other/messages", { body: { author: "cy", text: "darn, elsewhere" } });
  await req("POST", "/api/rooms/other/messages", { body: { author: "mallory", text: "spam" } });
  await req("GET", "/api/rooms/general/messages");
  await req("GET", "/api/shell");
  await req("GET", "/api/unknown");
} else {
  await req("GET", "/api/rooms/general/messages");
  await req("GET", "/api/rooms/other/messages");
  await req("GET", "/rooms/other", { headers: nav });
}
