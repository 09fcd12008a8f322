// Package leftover is erplab's crash-safe record of what a command creates
// outside its own process (throwaway server directories, tmpfs mounts and
// directories of `ab` and `disk`), so that whatever a killed command (kill -9, power cut, OOM kill) leaves
// behind is undone by the next run of any erplab command.
//
// # Where
//
// The record lives in erplab's state directory (StateDir):
// $ERPLAB_STATE_DIR if set, else /var/lib/erplab when running as root, else
// $XDG_STATE_HOME/erplab, else ~/.local/state/erplab. StateDir creates it
// with mode 0700 and refuses one that is not a directory owned by the
// effective user without group or other access: no other local user can
// add, change or read entries (tokens are secrets). Entries are files
// <state>/leftover/<id>.json, one per created thing.
//
// <state>/leftover/left-alone.noticed (no entry: not *.json) holds the
// paths already reported as left alone that no entry names, each with
// the device and inode it had (Record.FirstNotice): such a thing is
// named once, not by every command, and named again only when it was
// replaced. It decides only what is said, never what is touched.
//
// # Protocol for a command that creates something
//
//  1. e, err := rec.Add(kind, path, data) BEFORE creating it. Add writes
//     the entry to a temporary file, fsyncs it, renames it into place and
//     fsyncs the directory: once Add returns, the entry survives a crash.
//     The entry carries a random Token (32 hex digits) the command may
//     write into a marker inside what it creates, to prove later that the
//     thing found at Path is the one it created (a directory in /tmp can be
//     forged by any local user; the record cannot).
//  2. Create the thing. Facts learnt afterwards (a PID, a shared memory
//     key) go in with rec.Update(e, data), written the same crash-safe way.
//  3. After undoing it (unmount, DROP TABLESPACE, rm -r), rec.Remove(e).
//     A thing handed over to the user (erplab run --keep) is also removed
//     from the record: it is no longer erplab's to clean.
//
// If the process dies anywhere in between, the entry stays and names a
// dead owner (PID plus start time from /proc/PID/stat, so a reused PID is
// not taken for the owner).
//
// # Sweep
//
// Sweep(ctx, out), called at the start of every erplab command, lists the
// entries whose owner is gone and hands each to the Undo of its kind
// (Register, called from the init of the package that creates such things;
// pgcluster registers "pgcluster"). Undo must prove the thing is the one
// recorded (token, owner, mode, device...) before touching it, undo it and
// return a few words saying what it did ("" when nothing was left). If it
// cannot prove it, it returns an error wrapping ErrNotOurs: the thing is
// left alone and the entry dropped. If it can prove it but not undo it
// (no password to log in with), it returns an error wrapping ErrByHand
// that says how the user removes it: the thing is named once ("to remove
// by hand") and the entry dropped. Any other error keeps the entry for the
// next run. An entry is locked (flock) while swept, so two commands
// starting at once do not undo the same thing twice. Sweep writes one line
// on out when it did or refused anything, e.g.
//
//	erplab: cleaned up after killed erplab commands: pgcluster /tmp/erplab-pg-1a2b (removed shared memory segment key 0x00986627 id 8, removed dynamic shared memory /dev/shm/PostgreSQL.1804289383, directory removed); left alone: /tmp/erplab-pg-x (not a 0700 directory of root)
//
// Things on disk that look like erplab's but that no entry names (forged
// by another user, or left by an older erplab) are never touched: a kind's
// package may list them in Report.LeftAlone, once each through
// Record.FirstNotice (pgcluster.ReapOrphans does, with the rm command).
//
// Entries are undone newest first, so a thing made inside or on top of an
// older one (files in a mounted tmpfs, a mount inside a throwaway server's
// directory) goes before it.
//
// # Kinds of this package
//
// "mount" (AddMount, KindMount): Path is the mount point, Data the file
// system type and a source "erplab-<16 random hex>" unique to the entry
// that the caller passes to mount(2). Undo unmounts only a mount that
// /proc/self/mountinfo lists at Path with that type and source (lazily,
// MNT_DETACH, when busy): a mount there of another type or source is not
// erplab's (ErrNotOurs). With RemoveDir it then removes the empty mount
// point. Users: disk --tmpfs, ab's tmpfs-temp-tablespace remedy.
//
// "dir" (MkdirTemp, RemoveDir, KindDir): Path is a directory
// <parent>/<prefix><16 random hex> made with mode 0700; Data the creating
// user and, once made, its device and inode. Undo removes it with all it
// holds if it is a real directory (not a symbolic link) with the recorded
// device and inode, or, when the process died before recording them,
// owned by the recorded user with mode 0700. Users: disk's erplab-disk-*
// (micro patterns), erplab-ts-* (macro tablespaces) and --wal-on-path's
// erplab-wal-* directories.
//
// "replay-copy" (registered by cmd/erplab): a database erplab replay
// --template made on the user's server. Path is "<database> on <server>",
// Data the server's DSN without any password and, once made, the
// database's OID. Undo drops it (WITH (FORCE)) when it exists with that
// OID, or names it to drop by hand when the sweep cannot connect.
//
// "thp" (registered by internal/remedy/thp): one transparent_hugepage
// choice file the thp remedy wrote. Path is the file, Data its mode
// before and the mode set. Undo writes the previous mode back when the
// file still reads the mode set (one changed since is left, and said).
//
// Tablespaces have no kind of their own: every tablespace erplab creates
// outside `doctor fix --apply` (whose state file and --undo keep what it
// made, by design) lives in a throwaway server, whose "pgcluster" entry
// stops the server and removes its directory; the tablespace's directory
// outside the data directory is a "dir" entry. The exception is the tmpfs
// remedy of ab --dsn on the user's server: cmd/erplab's "ab-tablespace"
// entry drops the tablespace, then removes the remedy's tablespace
// directory (when erplab made it and it is empty) and its state file
// (tmpfs.FinishSweep).
package leftover
