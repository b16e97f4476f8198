//! workerd's SQL authorizer for user statements: `_cf_` names are the
//! runtime's (hidden and untouchable), no ATTACH or TEMP objects, only the
//! listed pragmas and virtual-table modules. The storage's own statements
//! (the KV table, deleteAll, sizes) run with the authorizer relaxed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

const PRAGMAS_READ: [&str; 2] = ["data_version", "page_size"];
const PRAGMAS_BOOL: [&str; 7] = [
  "case_sensitive_like",
  "foreign_keys",
  "defer_foreign_keys",
  "ignore_check_constraints",
  "legacy_alter_table",
  "recursive_triggers",
  "reverse_unordered_selects",
];
const PRAGMAS_ARG: [&str; 10] = [
  "foreign_key_check",
  "foreign_key_list",
  "index_info",
  "index_list",
  "index_xinfo",
  "quick_check",
  "optimize",
  "table_info",
  "table_xinfo",
  "table_list",
];
const VTABLES: [&str; 4] = ["fts5", "fts5vocab", "rtree", "rtree_i32"];
const FUNCTIONS_DENIED: [&str; 4] = [
  "sqlite_version",
  "sqlite_source_id",
  "sqlite_compileoption_get",
  "sqlite_compileoption_used",
];

/// A boolean pragma's value as SQLite reads one; anything else is refused,
/// as workerd refuses it.
fn is_bool(v: &str) -> bool {
  let v = v
    .trim_matches(|c| c == '\'' || c == '"')
    .to_ascii_lowercase();
  ["0", "1", "true", "false", "on", "off", "yes", "no"].contains(&v.as_str())
}

fn cf(name: &str) -> bool {
  name.len() >= 4 && name[..4].eq_ignore_ascii_case("_cf_")
}

pub(crate) fn install(conn: &mut rusqlite::Connection) -> rusqlite::Result<Arc<AtomicBool>> {
  let internal = Arc::new(AtomicBool::new(false));
  let flag = internal.clone();
  conn.authorizer(Some(move |ctx: AuthContext<'_>| {
    if flag.load(Ordering::Relaxed) {
      return Authorization::Allow;
    }
    decide(&ctx)
  }))?;
  Ok(internal)
}

fn decide(ctx: &AuthContext<'_>) -> Authorization {
  use AuthAction::*;
  let deny = Authorization::Deny;
  // (For ALTER TABLE ... DROP COLUMN SQLite passes the column here, not a
  // database: the action names its database itself.)
  if !matches!(ctx.action, AlterTable { .. })
    && ctx
      .database_name
      .is_some_and(|d| d != "main" && d != "temp")
  {
    return deny;
  }
  match ctx.action {
    AlterTable { database_name, .. } if database_name != "main" => deny,
    // A whole-database ANALYZE also analyzes the runtime's tables.
    Analyze { .. } => Authorization::Allow,
    // What SQLite build this is stays the runtime's business.
    Function { function_name } if FUNCTIONS_DENIED.contains(&function_name) => deny,
    Read { table_name, .. }
    | Insert { table_name }
    | Delete { table_name }
    | Update { table_name, .. }
    | CreateTable { table_name }
    | DropTable { table_name }
    | AlterTable { table_name, .. }
      if cf(table_name) =>
    {
      deny
    }
    CreateIndex {
      index_name,
      table_name,
    }
    | DropIndex {
      index_name,
      table_name,
    } if cf(index_name) || cf(table_name) => deny,
    CreateTrigger {
      trigger_name,
      table_name,
    }
    | DropTrigger {
      trigger_name,
      table_name,
    } if cf(trigger_name) || cf(table_name) => deny,
    CreateView { view_name } | DropView { view_name } if cf(view_name) => deny,
    CreateTempIndex { .. }
    | CreateTempTable { .. }
    | CreateTempTrigger { .. }
    | CreateTempView { .. }
    | DropTempIndex { .. }
    | DropTempTable { .. }
    | DropTempTrigger { .. }
    | DropTempView { .. }
    | Attach { .. }
    | Detach { .. } => deny,
    CreateVtable {
      module_name,
      table_name,
    }
    | DropVtable {
      module_name,
      table_name,
    } => {
      if cf(table_name) || !VTABLES.iter().any(|m| m.eq_ignore_ascii_case(module_name)) {
        deny
      } else {
        Authorization::Allow
      }
    }
    Pragma {
      pragma_name,
      pragma_value,
    } => {
      let name = pragma_name.to_ascii_lowercase();
      let ok = if PRAGMAS_READ.contains(&name.as_str()) {
        pragma_value.is_none()
      } else if PRAGMAS_BOOL.contains(&name.as_str()) {
        pragma_value.is_none_or(is_bool)
      } else if PRAGMAS_ARG.contains(&name.as_str()) {
        !pragma_value.is_some_and(cf)
      } else {
        false
      };
      if ok { Authorization::Allow } else { deny }
    }
    _ => Authorization::Allow,
  }
}
