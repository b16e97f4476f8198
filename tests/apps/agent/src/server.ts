import { Agent, callable, routeAgentRequest } from "agents";

type State = { count: number };

export class CounterAgent extends Agent<Env, State> {
  initialState: State = { count: 0 };

  @callable()
  increment() {
    this.setState({ count: this.state.count + 1 });
    return this.state.count;
  }

  @callable()
  async later(seconds: number) {
    const s = await this.schedule(seconds, "tick", { n: 1 });
    return s.id.length > 0;
  }

  async tick(payload: { n: number }) {
    this.setState({ count: this.state.count + 100 * payload.n });
  }
}

export default {
  async fetch(request: Request, env: Env) {
    return (await routeAgentRequest(request, env)) ?? new Response("not found", { status: 404 });
  },
};
