//! The operator page on the internal listener: `/_cellhost/` (HTML, rendered
//! here, refreshing itself every 2 s) and the same data as JSON under
//! `/_cellhost/api/` (`state`, `nodes`, `cells`, `deployment`, `events`,
//! `fences`).
//! Nodes, cells and the deployment come from the bucket, so every node's
//! page shows the whole fleet; WAL size and last write are this node's
//! (for the cells it holds), and the events are this process's.
//!
//! It needs the fleet secret: `?key=<secret>` once (it is then kept in an
//! HttpOnly cookie), or the `x-cellhost-fleet-secret` header.

use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use cellhost_ext::{Body, BoxError, Router};
use http_body_util::BodyExt;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::Inner;

/// The most cells listed.
const MAX_CELLS: usize = 500;

pub(crate) struct Page {
  pub router: Router,
  pub data_dir: PathBuf,
}

fn respond(
  status: StatusCode,
  ctype: &str,
  body: String,
  cookie: Option<String>,
) -> Response<Body> {
  let mut b = Response::builder()
    .status(status)
    .header("content-type", ctype)
    .header("cache-control", "no-store");
  if let Some(c) = cookie {
    b = b.header("set-cookie", c);
  }
  let body = http_body_util::Full::new(Bytes::from(body))
    .map_err(|e| -> BoxError { match e {} })
    .boxed_unsync();
  b.body(body).expect("a valid response")
}

fn query_key(query: Option<&str>) -> Option<String> {
  query?
    .split('&')
    .find_map(|kv| kv.strip_prefix("key="))
    .map(str::to_string)
}

fn cookie_key(headers: &hyper::HeaderMap) -> Option<String> {
  headers
    .get_all("cookie")
    .iter()
    .filter_map(|v| v.to_str().ok())
    .flat_map(|v| v.split(';'))
    .find_map(|c| c.trim().strip_prefix("cellhost_key=").map(str::to_string))
}

pub(crate) async fn handle(
  inner: &Arc<Inner>,
  page: &Page,
  req: &hyper::Request<hyper::body::Incoming>,
) -> Response<Body> {
  let from_query = query_key(req.uri().query());
  let presented = req
    .headers()
    .get(crate::SECRET_HEADER)
    .map(|v| v.as_bytes().to_vec())
    .or_else(|| from_query.clone().map(String::into_bytes))
    .or_else(|| cookie_key(req.headers()).map(String::into_bytes));
  if !inner.secret.admits(presented.as_deref()) {
    return respond(
      StatusCode::UNAUTHORIZED,
      "text/html;charset=UTF-8",
      "<!doctype html><title>cellhost</title><p>This is a cellhost fleet's operator page. Open it with the fleet secret: <code>/_cellhost/?key=&lt;secret&gt;</code> (the <code>secret</code> of <code>fleet/secret.json</code> in the bucket).</p>\n".into(),
      None,
    );
  }
  let cookie =
    from_query.map(|k| format!("cellhost_key={k}; HttpOnly; SameSite=Strict; Path=/_cellhost"));
  let state = state(inner, page).await;
  let path = req.uri().path();
  let json = |v: &Value| {
    respond(
      StatusCode::OK,
      "application/json",
      format!("{v:#}\n"),
      cookie.clone(),
    )
  };
  match path.trim_end_matches('/') {
    "/_cellhost" => respond(
      StatusCode::OK,
      "text/html;charset=UTF-8",
      render(&state),
      cookie,
    ),
    "/_cellhost/api/state" => json(&state),
    "/_cellhost/api/nodes" => json(&state["nodes"]),
    "/_cellhost/api/cells" => json(&state["cells"]),
    "/_cellhost/api/deployment" => json(&state["deployment"]),
    "/_cellhost/api/events" => json(&state["events"]),
    "/_cellhost/api/fences" => json(&state["fences"]),
    _ => respond(
      StatusCode::NOT_FOUND,
      "text/plain",
      "not found\n".into(),
      None,
    ),
  }
}

/// Everything the page shows.
async fn state(inner: &Arc<Inner>, page: &Page) -> Value {
  let fleet = &inner.fleet;
  let bucket = fleet.bucket().clone();
  let now = cellhost_fleet::now_ms();
  let (nodes, cells, deployment, fences) = fleet
    .spawn(async move {
      let nodes = nodes(&bucket, now).await;
      let cells = cells(&bucket).await;
      let deployment = deployment(&bucket).await;
      let fences = fences(&bucket).await;
      (nodes, cells, deployment, fences)
    })
    .await;
  let held: std::collections::HashMap<String, u64> = fleet.held().into_iter().collect();
  let cells: Vec<Value> = cells
    .into_iter()
    .map(|mut c| {
      let scope = c["scope"].as_str().unwrap_or_default().to_string();
      if held.contains_key(&scope)
        && let Some((size, modified)) = wal(page, &scope)
      {
        c["wal_bytes"] = json!(size);
        c["last_write_ms"] = json!(modified);
      }
      c
    })
    .collect();
  let events: Vec<Value> = cellhost_fleet::recent()
    .into_iter()
    .rev()
    .take(50)
    .map(|e| json!({"at_ms": e.at_ms, "event": e.event, "scope": e.scope, "detail": e.detail}))
    .collect();
  json!({
    "this_node": fleet.node(),
    "now_ms": now,
    "nodes": nodes,
    "cells": cells,
    "deployment": deployment,
    "events": events,
    "fences": fences,
  })
}

/// The fleet's recent fences, newest first (each fencing node records its
/// own, best effort, in `telemetry/fences/`).
async fn fences(bucket: &cellhost_bucket::Bucket) -> Vec<Value> {
  let Ok(keys) = bucket.list("telemetry/fences").await else {
    return vec![];
  };
  let mut out = Vec::new();
  for o in keys {
    if let Ok(Some((b, _))) = bucket.get(&o.key).await
      && let Ok(v) = serde_json::from_slice::<Value>(&b)
    {
      out.push(v);
    }
  }
  out.sort_by_key(|v| std::cmp::Reverse(v["at_ms"].as_u64().unwrap_or(0)));
  out.truncate(20);
  out
}

/// The WAL of a cell held here: its size and last change (ms).
fn wal(page: &Page, scope: &str) -> Option<(u64, u64)> {
  let (class, id) = cellhost_fleet::split_scope(scope);
  let ns = page
    .router
    .namespaces
    .iter()
    .find(|n| n.class_name == class)?;
  let path = page
    .data_dir
    .join(&ns.unique_key)
    .join(format!("{id}.sqlite-wal"));
  let meta = std::fs::metadata(path).ok()?;
  let modified = meta
    .modified()
    .ok()?
    .duration_since(std::time::UNIX_EPOCH)
    .ok()?
    .as_millis() as u64;
  Some((meta.len(), modified))
}

async fn nodes(bucket: &cellhost_bucket::Bucket, now: u64) -> Vec<Value> {
  let Ok(keys) = bucket.list("nodes").await else {
    return vec![];
  };
  let mut out = Vec::new();
  for o in keys {
    let Some(name) = o
      .key
      .strip_prefix("nodes/")
      .and_then(|k| k.strip_suffix(".json"))
    else {
      continue;
    };
    let Ok(Some((l, _))) = cellhost_fleet::read_lease(bucket, name).await else {
      continue;
    };
    let status = if l.expires_ms == 0 {
      "retired"
    } else if l.expires_ms > now {
      "live"
    } else {
      "lapsed (died or fenced)"
    };
    let info = match bucket.get(&format!("telemetry/nodes/{name}.json")).await {
      Ok(Some((b, _))) => serde_json::from_slice::<Value>(&b).unwrap_or(Value::Null),
      _ => Value::Null,
    };
    out.push(json!({
      "node": l.node,
      "status": status,
      "expires_ms": l.expires_ms,
      "address": l.address,
      "load": l.load,
      "version": info["version"],
      "held_cells": info["held_cells"],
      "durability": info["durability"],
      "inflight": info["inflight"],
      "reported_ms": info["updated_ms"],
    }));
  }
  out
}

async fn cells(bucket: &cellhost_bucket::Bucket) -> Vec<Value> {
  let Ok(keys) = bucket.list("cells").await else {
    return vec![];
  };
  // scope -> (ltx objects per epoch: (count, bytes, max txid))
  let mut scopes: std::collections::BTreeMap<
    String,
    std::collections::HashMap<u64, (u64, u64, u64)>,
  > = Default::default();
  for o in &keys {
    let Some(rest) = o.key.strip_prefix("cells/") else {
      continue;
    };
    let Some((scope, tail)) = rest.split_once('/') else {
      continue;
    };
    let entry = scopes.entry(scope.to_string()).or_default();
    if tail.starts_with("ltx/")
      && let Some(k) = cellhost_logic::restore::LtxKey::parse(scope, &o.key)
    {
      let e = entry.entry(k.epoch).or_default();
      e.0 += 1;
      e.1 += o.size;
      e.2 = e.2.max(k.max_txid);
    }
  }
  let mut out = Vec::new();
  for (scope, epochs) in scopes.into_iter().take(MAX_CELLS) {
    let own = cellhost_fleet::read_own(bucket, &scope)
      .await
      .ok()
      .flatten();
    let (owner, epoch) = own.map(|(o, _)| (o.node, o.epoch)).unwrap_or_default();
    let (count, bytes, txid) = epochs.get(&epoch).copied().unwrap_or_default();
    let (class, id) = cellhost_fleet::split_scope(&scope);
    out.push(json!({
      "scope": scope,
      "class": class,
      "id": id,
      "owner": owner,
      "epoch": epoch,
      "last_txid": txid,
      "ltx_objects": count,
      "ltx_bytes": bytes,
      "takeovers": epoch.saturating_sub(1),
    }));
  }
  out
}

async fn deployment(bucket: &cellhost_bucket::Bucket) -> Value {
  match cellhost_deploy::read_current(bucket).await {
    Ok(Some((c, _))) => {
      let m = cellhost_deploy::read_manifest(bucket, &c.version)
        .await
        .ok();
      json!({
        "version": c.version,
        "previous": c.previous,
        "switched_ms": c.switched_ms,
        "message": m.as_ref().and_then(|m| m.message.clone()),
        "files": m.as_ref().map(|m| m.files.len()),
        "content_hash": m.as_ref().map(|m| m.content_hash.clone()),
      })
    }
    Ok(None) => json!(null),
    Err(e) => json!({"error": e}),
  }
}

fn esc(v: &Value) -> String {
  let s = match v {
    Value::Null => "—".to_string(),
    Value::String(s) => s.clone(),
    other => other.to_string(),
  };
  s.replace('&', "&amp;")
    .replace('<', "&lt;")
    .replace('>', "&gt;")
    .replace('"', "&quot;")
}

fn table(out: &mut String, id: &str, rows: &[Value], cols: &[(&str, &str)]) {
  let _ = write!(out, "<table id=\"{id}\"><thead><tr>");
  for (_, label) in cols {
    let _ = write!(out, "<th>{label}</th>");
  }
  out.push_str("</tr></thead><tbody>");
  for r in rows {
    out.push_str("<tr>");
    for (key, _) in cols {
      let _ = write!(out, "<td data-col=\"{key}\">{}</td>", esc(&r[*key]));
    }
    out.push_str("</tr>");
  }
  if rows.is_empty() {
    let _ = write!(out, "<tr><td colspan=\"{}\">none</td></tr>", cols.len());
  }
  out.push_str("</tbody></table>");
}

/// A time in ms as seconds from `now` ("in 4.2 s", "1.3 s ago").
fn relative(v: &Value, now: u64) -> Value {
  match v.as_u64() {
    Some(0) | None => v.clone(),
    Some(t) if t >= now => json!(format!("in {:.1} s", (t - now) as f64 / 1000.0)),
    Some(t) => json!(format!("{:.1} s ago", (now - t) as f64 / 1000.0)),
  }
}

/// Rows with their time columns made relative to `now`.
fn timed(rows: &Value, cols: &[&str], now: u64) -> Vec<Value> {
  let mut rows: Vec<Value> = rows.as_array().cloned().unwrap_or_default();
  for r in &mut rows {
    for c in cols {
      r[*c] = relative(&r[*c], now);
    }
  }
  rows
}

/// The page: server-rendered, re-fetched every 2 s.
fn render(s: &Value) -> String {
  let now = s["now_ms"].as_u64().unwrap_or(0);
  let mut o = String::new();
  let _ = write!(
    o,
    "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"2\">\
     <title>cellhost fleet — {node}</title><style>\
     body{{font:14px system-ui,sans-serif;margin:1.5em;color:#222}}h1{{font-size:1.3em}}h2{{font-size:1.05em;margin-top:1.5em}}\
     table{{border-collapse:collapse;width:100%}}th,td{{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;font-variant-numeric:tabular-nums}}\
     th{{background:#f4f4f4}}code{{font-size:.95em}}</style></head><body>\
     <h1>cellhost fleet <small>as seen by node <code id=\"this-node\">{node}</code></small></h1>",
    node = esc(&s["this_node"])
  );
  o.push_str("<h2>Deployment</h2>");
  let d = &s["deployment"];
  if d.is_null() {
    o.push_str(
      "<p id=\"deployment\">none (a fixed Worker: <code>cellhost run PATH --bucket</code>)</p>",
    );
  } else {
    let _ = write!(
      o,
      "<p id=\"deployment\">version <code>{}</code> (previous {}), {} files, {}</p>",
      esc(&d["version"]),
      esc(&d["previous"]),
      esc(&d["files"]),
      esc(&d["message"])
    );
  }
  o.push_str("<h2>Nodes</h2>");
  let nodes = timed(&s["nodes"], &["expires_ms"], now);
  table(
    &mut o,
    "nodes",
    &nodes,
    &[
      ("node", "node"),
      ("status", "lease"),
      ("expires_ms", "lease deadline"),
      ("address", "address"),
      ("load", "load"),
      ("version", "version"),
      ("held_cells", "cells held"),
      ("durability", "durability"),
      ("inflight", "in flight"),
    ],
  );
  o.push_str("<h2>Cells</h2>");
  let cells = timed(&s["cells"], &["last_write_ms"], now);
  table(
    &mut o,
    "cells",
    &cells,
    &[
      ("class", "class"),
      ("id", "id"),
      ("owner", "owner"),
      ("epoch", "epoch"),
      ("last_txid", "last TXID"),
      ("ltx_objects", "LTX objects (epoch)"),
      ("ltx_bytes", "LTX bytes"),
      ("takeovers", "epochs before"),
      ("wal_bytes", "WAL bytes (held here)"),
      ("last_write_ms", "last write (held here)"),
    ],
  );
  o.push_str("<h2>Recent ownership events on this node</h2>");
  let events = timed(&s["events"], &["at_ms"], now);
  table(
    &mut o,
    "events",
    &events,
    &[
      ("at_ms", "when"),
      ("event", "event"),
      ("scope", "cell"),
      ("detail", "detail"),
    ],
  );
  o.push_str("<h2>Recent fences in the fleet</h2>");
  let fences = timed(&s["fences"], &["at_ms"], now);
  table(
    &mut o,
    "fences",
    &fences,
    &[("at_ms", "when"), ("node", "node"), ("reason", "reason")],
  );
  o.push_str("<p>Same data as JSON: <a href=\"/_cellhost/api/state\">/_cellhost/api/state</a> (nodes, cells, deployment, events).</p></body></html>\n");
  o
}
