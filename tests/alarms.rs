//! Alarms beyond what the differential fixtures compare: they survive a
//! SIGKILL and restart of the process (the local wake index), and an
//! evicted object is constructed again for its alarm.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::*;

const WORKER: &str = r#"
import { DurableObject } from "cloudflare:workers";
export class Obj extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    const n = (ctx.storage.kv.get("constructed") ?? 0) + 1;
    ctx.storage.kv.put("constructed", n);
  }
  async alarm(info) {
    this.ctx.storage.kv.put("fired", (this.ctx.storage.kv.get("fired") ?? 0) + 1);
    this.ctx.storage.kv.put("name", this.ctx.id.name ?? null);
    this.ctx.storage.kv.put("retry", info.retryCount);
  }
  async arm(ms) {
    await this.ctx.storage.setAlarm(Date.now() + ms);
    return "armed";
  }
  state() {
    const kv = this.ctx.storage.kv;
    return `fired=${kv.get("fired") ?? 0} constructed=${kv.get("constructed")} name=${kv.get("name")}`;
  }
}
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const stub = env.OBJ.getByName(url.searchParams.get("name"));
    if (url.pathname === "/arm") return new Response(await stub.arm(Number(url.searchParams.get("ms"))));
    return new Response(await stub.state());
  },
};
"#;

fn alarms_project(name: &str) -> PathBuf {
  project(&format!("alarms-{name}"), WORKER, OBJ_BINDING)
}

fn body(ch: &Cellhost, path: &str) -> String {
  String::from_utf8_lossy(&get(ch.addr, path).body).into_owned()
}

fn wait_for(ch: &Cellhost, path: &str, want: &str, timeout: Duration) -> String {
  let end = Instant::now() + timeout;
  loop {
    let got = body(ch, path);
    if got.contains(want) || Instant::now() > end {
      return got;
    }
    std::thread::sleep(Duration::from_millis(100));
  }
}

#[test]
fn alarms_survive_sigkill_and_restart() {
  let d = alarms_project("restart");
  let data = d.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let mut ch = Cellhost::start(&d, &args);
  // Acknowledged alarms on several objects, then the process dies at once.
  for i in 0..8 {
    assert_eq!(body(&ch, &format!("/arm?name=o{i}&ms=1500")), "armed");
  }
  ch.child.kill().unwrap(); // SIGKILL
  ch.child.wait().unwrap();
  let ch = Cellhost::start(&d, &args);
  for i in 0..8 {
    let got = wait_for(
      &ch,
      &format!("/?name=o{i}"),
      "fired=1",
      Duration::from_secs(10),
    );
    assert!(got.starts_with("fired=1"), "o{i}: {got}\n{}", ch.log());
    // Woken from the index, the object knows its name again.
    assert!(got.ends_with(&format!("name=o{i}")), "o{i}: {got}");
  }
}

#[test]
fn an_evicted_object_is_woken_for_its_alarm() {
  let d = alarms_project("evicted");
  let data = d.join(".data");
  let ch = Cellhost::start(&d, &["--data", data.to_str().unwrap()]);
  // Objects are evicted 10 s after their last event; the alarm is later.
  assert_eq!(body(&ch, "/arm?name=late&ms=13000"), "armed");
  std::thread::sleep(Duration::from_secs(11));
  let got = wait_for(&ch, "/?name=late", "fired=1", Duration::from_secs(8));
  // Constructed for the arm call, again for the alarm, and the state call
  // found that instance alive.
  assert_eq!(got, "fired=1 constructed=2 name=late", "{}", ch.log());
}
