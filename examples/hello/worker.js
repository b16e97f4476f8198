// The smallest module Worker: answers every request with a greeting.
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    return new Response(`Hello from ${env.GREETING ?? "cellhost"} at ${url.pathname}\n`);
  },
};
