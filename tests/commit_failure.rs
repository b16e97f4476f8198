//! A commit that fails must never be acknowledged: the replies of the turn
//! (and of every event of the object still in flight) fail with workerd's
//! reset error, the object is rebuilt from its last committed state, and
//! its neighbours on the same isolate carry on. Deferred foreign keys are
//! compared with workerd by the differential fixture
//! `do_commit_failure_await`; this file covers what workerd cannot show: a
//! disk that fills up under a running object.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::*;

const WORKER: &str = r#"
import { DurableObject } from "cloudflare:workers";
export class Obj extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.mem = 0;
  }
  async write(kb) {
    this.mem++;
    this.ctx.storage.put("small", this.mem);
    this.ctx.storage.put("big", "x".repeat(kb * 1024));
    await new Promise((r) => setTimeout(r, 50));
    return `wrote ${kb} KiB`;
  }
  async state() {
    const big = (await this.ctx.storage.get("big")) ?? "";
    return `mem=${this.mem} small=${(await this.ctx.storage.get("small")) ?? "none"} big=${big.length}`;
  }
}
export default {
  async fetch(r, env) {
    const u = new URL(r.url);
    const s = env.OBJ.getByName(u.searchParams.get("name"));
    try {
      const kb = Number(u.searchParams.get("kb") ?? "0");
      return new Response(u.pathname === "/write" ? await s.write(kb) : await s.state());
    } catch (e) {
      return new Response(`${e.message} reset=${e.durableObjectReset ?? false}`, { status: 500 });
    }
  },
};
"#;

fn sh(cmd: &str) {
  let ok = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
  assert!(ok.success(), "{cmd}");
}

/// A small tmpfs mounted for the test's data directory (the tests run as
/// root, as CI does); unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
  fn mount(dir: &Path, size: &str) -> SmallDisk {
    std::fs::create_dir_all(dir).unwrap();
    sh(&format!(
      "mount -t tmpfs -o size={size} tmpfs '{}'",
      dir.display()
    ));
    SmallDisk(dir.to_path_buf())
  }
}

impl Drop for SmallDisk {
  fn drop(&mut self) {
    let _ = Command::new("umount").arg("-l").arg(&self.0).status();
  }
}

#[test]
fn a_full_disk_fails_the_turn_resets_the_object_and_spares_its_neighbours() {
  let d = project("diskfull", WORKER, OBJ_BINDING);
  let data = d.join("data");
  let _disk = SmallDisk::mount(&data, "4m");
  let ch = Cellhost::start(&d, &["--isolates", "1", "--data", &data.to_string_lossy()]);
  // Both objects exist (their files are created) while there is room.
  assert_eq!(get(ch.addr, "/write?name=a&kb=1").text(), "wrote 1 KiB");
  assert_eq!(get(ch.addr, "/write?name=b&kb=1").text(), "wrote 1 KiB");
  // Fill the disk, leaving little room.
  let filler = data.join("filler");
  sh(&format!(
    "dd if=/dev/zero of='{}' bs=64k count=1000 2>/dev/null; sync",
    filler.display()
  ));
  // a's next turn cannot commit: its reply fails with the reset error.
  let r = get(ch.addr, "/write?name=a&kb=600");
  assert_eq!(r.status, 500, "{}", r.text());
  assert!(r.text().contains("reset=true"), "{}", r.text());
  assert!(
    r.text().contains("SQLITE_FULL") || r.text().to_lowercase().contains("full"),
    "{}",
    r.text()
  );
  // The object was rebuilt from its last committed state.
  assert_eq!(
    get(ch.addr, "/state?name=a").text(),
    "mem=0 small=1 big=1024"
  );
  // Its neighbour on the same isolate is unaffected.
  assert_eq!(
    get(ch.addr, "/state?name=b").text(),
    "mem=1 small=1 big=1024"
  );
  // With room again, writes are acknowledged and survive a restart.
  std::fs::remove_file(&filler).unwrap();
  assert_eq!(get(ch.addr, "/write?name=a&kb=2").text(), "wrote 2 KiB");
  drop(ch);
  let ch = Cellhost::start(&d, &["--isolates", "1", "--data", &data.to_string_lossy()]);
  assert_eq!(
    get(ch.addr, "/state?name=a").text(),
    "mem=0 small=1 big=2048"
  );
  std::thread::sleep(Duration::from_millis(10));
}
