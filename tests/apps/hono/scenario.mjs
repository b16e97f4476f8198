// The hono app's scenario (see tests/apps.rs): one line per response.
//   node scenario.mjs BASE_URL first|restart
const [base, phase] = process.argv.slice(2);
async function req(method, path) {
  const r = await fetch(new URL(path, base), { method });
  console.log(method, path, r.status, r.headers.get("content-type"), await r.text());
}
if (phase === "first") {
  await req("GET", "/");
  await req("POST", "/counter/a");
  await req("POST", "/counter/a?by=5");
  await req("POST", "/counter/b?by=2");
  await req("GET", "/counter/a");
  await req("GET", "/nope");
  await req("GET", "/throw");
} else {
  await req("GET", "/counter/a");
  await req("GET", "/counter/b");
  await req("POST", "/counter/a");
}
