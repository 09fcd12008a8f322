// Package tmpfs moves the files of temporary tables to tmpfs: the fix
// of the field report in docs CONTEXT.md section 3, where temp-table
// churn made file-system calls 13.5 % of the database server's CPU and a
// tmpfs temp tablespace brought them to 1.6 % without a code change.
//
// The procedure, for one database of a running server:
//
//  1. a directory for the tablespace, owned by the server's OS user
//     (the owner of data_directory) with mode 0700;
//  2. CREATE TABLESPACE ... LOCATION, and GRANT CREATE on it to PUBLIC
//     (temp_tablespaces silently skips tablespaces the session's role
//     may not create in: src/backend/commands/tablespace.c,
//     PrepareTempTablespaces);
//  3. a dummy temp table in it, which makes the server create the
//     per-database directory <location>/PG_<major>_<catversion>/<dboid>
//     (TablespaceCreateDbspace); the table is dropped at once;
//  4. a tmpfs mounted over that per-database directory with the server
//     user's uid and gid and mode 0700 (Documentation/filesystems/
//     tmpfs.rst). The per-database directory, not the tablespace root:
//     after a reboot an empty tmpfs there still works, while an empty
//     version directory would not (the server recreates only the
//     per-database level);
//  5. temp_tablespaces set with ALTER SYSTEM (default scope: running
//     sessions pick it up at pg_reload_conf(), which matters for ERP
//     connection pools that live for days; it applies to every database)
//     or ALTER DATABASE (only this database, only new sessions), then
//     pg_reload_conf();
//  6. verification: a new session creates a temp table and
//     pg_relation_filepath shows its relfilenode file under the mount,
//     which /proc/self/mountinfo lists as tmpfs.
//
// # Undo only what was done
//
// Apply records, in a state file, what it creates and changes, and Undo
// reverts exactly that, newest first: temp_tablespaces back to its value
// before Apply at the scope Apply set it (RESET when it was unset; left
// alone, with a line, when someone changed it since), the tmpfs unmounted
// (once no temp file is on it), the tablespace dropped (its grant goes
// with it), the directory removed, or given its owner and mode back when
// it existed (empty) before. Undo refuses, in one line naming what it
// found and changing nothing, what erplab did not create: no state file
// while a tablespace of that name (or a mount under its directory)
// exists, e.g. a DBA's own; a tablespace whose OID is not the recorded
// one; a mount at the recorded point that is not the recorded mount
// (mount ID, device, type). Options.Force (--force) overrides that and
// removes whatever is there, as the procedure without records did.
// Settings erplab did not make that name the tablespace (per role, per
// database) are reported and left. Applying again over a complete record
// verifies and changes nothing; over an incomplete one it asks for
// --undo first.
//
// The steps are one table (procedure in journal.go), each a name, a do
// and an undo that reverts the step from what its do journaled alone.
// Apply runs the table in order, the state file saved with each step's
// record before the next starts; after an error or Ctrl-C in a step
// Apply, and Undo later, run the undos of the journaled steps in
// reverse.
//
// # State file
//
// One file per server and tablespace, named by StatePath:
//
//	<state dir>/tmpfs/<system identifier>-<tablespace, [A-Za-z0-9_] kept, others '_', 40 max>-<12 hex>.json
//
// where <state dir> is StateDir() (/var/lib/erplab for root, else
// $XDG_STATE_HOME/erplab or ~/.local/state/erplab; Options.StateDir in
// tests), both directories mode 0700 and owned by the user, the file mode
// 0600, and <12 hex> the first 6 bytes of SHA-256 over data_directory,
// NUL, tablespace name. The system identifier is
// pg_control_system().system_identifier: with data_directory it tells a
// server from a re-initialised one at the same path.
//
// Every write goes to a temporary file in the same directory, is
// fsynced, renamed over the file, and the directory fsynced: after a
// crash the file is the old or the new version, never torn. Apply writes
// a step's record before the step (done false) and again after it (done
// true, with what only the step can tell: the tablespace's OID, the
// mount's ID and device), so a crash between steps leaves a file Undo
// understands: an intended step may or may not have happened, and Undo
// checks what is there (a tablespace of the name at the recorded
// location, a mount of the recorded type at the recorded point). Undo
// removes each record once reverted and the file at the end.
//
// The content is JSON (State, version 1):
//
//	{
//	  "version": 1,
//	  "system_identifier": "7312345678901234567",  // decimal text
//	  "data_directory": "/var/lib/postgresql/15/main",
//	  "database": "erp", "database_oid": 16384,
//	  "created": "2026-12-01T10:00:00Z", "updated": "...",
//	  "size": "2G", "scope": "system",              // the Apply's options
//	  "directory":  {"path": "/var/lib/postgresql/15/erplab_temp_tmpfs", "existed": false,
//	                 "prev_uid": 0, "prev_gid": 0, "prev_mode": 0, "done": true},
//	  "tablespace": {"name": "erplab_temp_tmpfs", "location": "...", "oid": 16390, "done": true},
//	  "grant":      {"privilege": "CREATE", "to": "PUBLIC", "done": true},
//	  "mount":      {"point": ".../PG_15_202209061/16384", "fs_type": "tmpfs", "size": "2G",
//	                 "options": "size=2G,uid=113,gid=120,mode=0700,nodev,nosuid,noexec",
//	                 "mount_id": 812, "device": "0:61", "mounted": true, "done": true},
//	  "setting":    {"scope": "system", "database": "", "was_set": true, "previous": "pg_default",
//	                 "value": "erplab_temp_tmpfs", "done": true},
//	  "complete": true
//	}
//
// A record absent means the step was never reached (or already undone);
// "prev_*" only with "existed": true; "previous" is the value as the
// server stores it (pg_file_settings.setting of postgresql.auto.conf for
// system scope, the database's pg_db_role_setting entry for database
// scope), restored by splitting it into names (TablespaceNames) and
// setting each as a literal, which the server quotes back the same way.
//
// # No server
//
// The remedy of `erplab ab` (a throwaway server) keeps its state file in
// the server's own directory and records its tmpfs in erplab's crash-safe
// record (package leftover) before mounting it: after a kill -9 of ab
// the next erplab command unmounts that tmpfs (only the mount with the
// recorded source at the recorded point) and removes the server's
// directory with the state file, saying so in one line.
//
// On a server erplab did not start (ab --dsn) the state file is in
// erplab's state directory and the tablespace is recorded too (cmd's
// "ab-tablespace" entry, older than the mount's): after a kill -9 the
// sweep unmounts the tmpfs, drops the tablespace and then FinishSweep
// removes the tablespace directory (only when Apply created it and it is
// empty) and the state file.
//
// Any other state file whose server is gone is cleaned by UndoOrphan (`erplab
// doctor fix tmpfs-temp-tablespace --undo --state FILE`; --states lists
// the files): it refuses while postmaster.pid names a live process,
// unmounts the recorded tmpfs, and once the data directory is gone
// removes the server's PG_* directories under the tablespace directory
// and the directory itself, then the file.
//
// The full-tmpfs failure mode (FullWarning): when the tmpfs is full an
// INSERT into a temp table fails, the file stays, and even TRUNCATE fails
// (it writes a new relfilenode and rebuilds the indexes, whose metapages
// need space); only DROP TABLE frees the space.
//
// The procedure serves `erplab doctor fix tmpfs-temp-tablespace` (Apply,
// Undo, UndoOrphan, States, Procedure with every option) and is the remedy
// tmpfs-temp-tablespace of `erplab ab` (remedy.go: system scope, the
// default tablespace, size from the remedy parameter tmpfs-size, root
// only), registered in the remedy registry from this package's init; the
// remedy goes through Apply and Undo, so its records are the same state
// files.
package tmpfs
