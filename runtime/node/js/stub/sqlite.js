// node:sqlite as workerd has it: the names, but no database can be opened
// (a Durable Object's ctx.storage.sql is the Worker's SQLite).
import { unimplemented } from "cellhost-node:_errors";
const illegal = () => {
  throw new TypeError("Illegal constructor");
};
export class DatabaseSync {
  constructor() {
    illegal();
  }
}
export class StatementSync {
  constructor() {
    illegal();
  }
}
export const backup = unimplemented("backup");
export const constants = {
  SQLITE_CHANGESET_OMIT: 0,
  SQLITE_CHANGESET_REPLACE: 1,
  SQLITE_CHANGESET_ABORT: 2,
  SQLITE_CHANGESET_DATA: 1,
  SQLITE_CHANGESET_NOTFOUND: 2,
  SQLITE_CHANGESET_CONFLICT: 3,
  SQLITE_CHANGESET_CONSTRAINT: 4,
  SQLITE_CHANGESET_FOREIGN_KEY: 5,
};
export default { DatabaseSync, StatementSync, backup, constants };
