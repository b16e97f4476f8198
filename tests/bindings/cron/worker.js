// @cellhost-args --test-scheduled
// @request GET /cdn-cgi/handler/scheduled?cron=*/5+*+*+*+*&time=1767225600000
// @request GET /log
// @request GET /cdn-cgi/handler/scheduled?cron=throw
// @request GET /cdn-cgi/handler/scheduled?cron=0+12+*+*+MON&time=1767614400000
// @request GET /log
// @request GET /cdn-cgi/handler/scheduled?time=1767225600000
// @request GET /log
// Cron Triggers fired by hand, as `wrangler dev` allows: the controller's
// values, ctx, the outcome of a throwing handler.
export default {
  async scheduled(controller, env, ctx) {
    if (controller.cron === "throw") throw new Error("scheduled failed");
    const seen = [
      controller.cron,
      controller.scheduledTime,
      typeof controller.scheduledTime,
      typeof controller.noRetry,
      Object.prototype.toString.call(controller),
      typeof ctx.waitUntil,
    ];
    await env.LOG.put("last", JSON.stringify(seen));
  },
  async fetch(req, env) {
    return new Response((await env.LOG.get("last")) ?? "nothing yet");
  },
};
