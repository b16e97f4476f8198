// The subrequest budget of one event (a request to the Worker, or one event
// of a Durable Object): every outbound request it starts: fetch(), a
// WebSocket client, a call to a Durable Object: spends one, wherever in the
// event's async work it happens (the budget rides V8's async context, so
// concurrent events on one isolate keep their own count). Past the limit
// the request fails as on Cloudflare: "Too many subrequests."
import { core, primordials } from "ext:core/mod.js";

const { Error } = primordials;
const current = new core.AsyncVariable();
let limit = 0;

/** Sets the limit for this isolate (0: none). */
export function setSubrequestLimit(n) {
  limit = n;
}

/** Runs `fn` (which starts an event) with a fresh budget. */
export function withBudget(fn) {
  const prev = current.enter({ spent: 0, open: 0, waiting: [] });
  try {
    return fn();
  } finally {
    core.setAsyncContext(prev);
  }
}

/** The current event's own object (undefined outside an event): state
 * that lives for one event keys on it (node:fs's /tmp). */
export function currentEvent() {
  return current.get();
}

/** One more subrequest of the current event; throws past the limit. */
export function spendSubrequest() {
  const budget = current.get();
  if (limit === 0 || budget === undefined) return;
  if (++budget.spent > limit) throw new Error("Too many subrequests.");
}

// Connections one event may have open at once (Cloudflare's six); more wait
// in line, as there, so a hostile event cannot fan out without bound.
const MAX_OPEN = 6;

/** Runs `start` (an outbound request) once the event has a free connection;
 * the slot is held until the returned promise settles. */
export async function withConnection(start) {
  const budget = current.get();
  if (budget === undefined) return await start();
  while (budget.open >= MAX_OPEN) {
    await new Promise((resolve) => budget.waiting.push(resolve));
  }
  budget.open++;
  try {
    return await start();
  } finally {
    budget.open--;
    budget.waiting.shift()?.();
  }
}
