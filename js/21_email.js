// `cloudflare:email`: the EmailMessage class apps build messages with. No
// `send_email` binding exists here yet (a config declaring one stops the
// start), so a message is a value: sender, recipient and raw MIME text.
export class EmailMessage {
  #from;
  #to;
  #raw;
  constructor(from, to, raw) {
    this.#from = `${from}`;
    this.#to = `${to}`;
    this.#raw = raw;
  }
  get from() {
    return this.#from;
  }
  get to() {
    return this.#to;
  }
}
