// Package pgcluster starts a throwaway PostgreSQL cluster: initdb into a fresh
// private directory, a postmaster listening on a Unix socket there (and on
// 127.0.0.1 only when asked), and a Stop that leaves nothing behind (no
// process, no directory, no socket, no shared memory: a postmaster that
// was killed outright, by anyone or by Stop itself when frozen, leaves
// its System V segment and /dev/shm segments, which Stop removes as
// ReapOrphans does, below, and names in its error).
//
// It is used by erplab when no --dsn (and no PG* environment) names a server,
// and by the shared test harness internal/pgtest.
//
// # OS user
//
// PostgreSQL refuses to run as root (src/backend/main/main.c,
// check_root), so when the effective uid is 0 the server and initdb run as an
// unprivileged OS user (Options.OSUser, default "postgres") through
// exec.Cmd credentials; otherwise they run as the current user.
//
// # Who can reach the server
//
// The cluster directory os.TempDir()/erplab-pg-<12 hex> is owned by the
// invoking user with mode 0700; when the server runs as another OS user
// (erplab run as root) its group is that user's primary group and its mode
// 0710, so the server can traverse it but no one else can enter or list it:
//
//	erplab-pg-1a2b3c4d5e6f/   invoking user, 0700 (0710 group of the server user)
//	  erplab.owner            marker: the token of erplab's record entry, 0600
//	  pgpass                  passfile "*:*:*:*:<password>", invoking user, 0600
//	  server.log              server output, invoking user, 0600
//	  data/                   PGDATA, server user, 0700
//	  sock/                   Unix socket directory, server user, 0700
//	                          (unix_socket_permissions 0700)
//
// Authentication is scram-sha-256 everywhere (initdb --auth=scram-sha-256:
// "local all all scram-sha-256" and "host all all 127.0.0.1/32
// scram-sha-256" in pg_hba.conf), never trust. The superuser "postgres" gets
// a random 128-bit password per cluster (initdb --pwfile, a 0600 file of
// the server user removed right after). Cluster.DSN names the passfile, not
// the password, so pgx in this process and libpq in children (psql,
// pgbench, which honour passfile=) authenticate without the password ever
// appearing in an argv; Password returns it for PGPASSWORD in a child's
// environment. Keep prints it, as the way to connect to a kept server.
// Options.TrustSocket (internal/pgtest only, for tests of errors that
// follow authentication) makes the private socket "trust"; TCP is never
// trust.
//
// Without Options.TCP the server listens on no TCP address
// (listen_addresses is empty); with it, on 127.0.0.1 only, with the same
// password. A local user other than the invoking one and the server's OS
// user can therefore neither reach the socket nor log in over TCP.
//
// # Leftovers of a killed erplab: ReapOrphans
//
// Start writes an entry in erplab's crash-safe record (internal/leftover;
// /var/lib/erplab when root, else $XDG_STATE_HOME/erplab, mode 0700)
// before it creates the directory, and completes it once the postmaster
// runs: postmaster PID and start time, the postgres binary, the data
// directory's device and inode, the System V key and id of the main shared
// memory segment (postmaster.pid line 7), dynamic_shared_memory_type. Stop
// removes the entry after removing the directory; Keep removes it too (the
// cluster is the user's then).
//
// ReapOrphans (and leftover.Sweep, run by every erplab command) undoes the
// entries of dead erplab processes, and only those: directories in /tmp are
// never taken at their word. For each entry it requires that the directory
// be a real directory (not a symlink) owned by root or the invoking user,
// mode 0700 (or 0710 with the server's group), holding erplab.owner with
// the entry's token; otherwise it leaves the directory alone and says so in
// its one line. It signals a process (SIGQUIT, then SIGKILL after 5 s) only
// if that process runs as the server's uid, its /proc/PID/exe is the
// recorded postgres binary and its data directory (the -D argument of
// /proc/PID/cmdline, else /proc/PID/cwd) is the entry's data directory.
// Then it removes the main System V segment if it is the recorded one (same
// key and id, owner the server's uid, creator the recorded postmaster,
// PGShmemHeader naming that postmaster and data directory, no process
// attached) and the dynamic shared memory segments listed in that
// segment's control segment (/dev/shm/PostgreSQL.<handle> files, or System
// V segments with dynamic_shared_memory_type sysv, each owned by the
// server's uid), as PostgreSQL itself does when it restarts
// (dsm_cleanup_using_control_segment). Other clusters' segments are never
// touched. Finally it removes the directory.
//
// Directories named erplab-pg-* that no entry names but whose marker holds
// a dead PID (an older erplab's, or a forgery) are only reported: once
// each (leftover.Record.FirstNotice remembers them by path, device and
// inode), with the command that removes them ("rm -rf DIR", for the user
// to run if the directory is theirs and no postgres runs from it).
//
// Sources: PostgreSQL docs "initdb" (app-initdb.html), "Resource
// Consumption" (runtime-config-resource.html), "Shutting Down the Server"
// (server-shutdown.html), "Connections and Authentication"
// (runtime-config-connection.html), "The pg_hba.conf File"
// (auth-pg-hba-conf.html), "The Password File" (libpq-pgpass.html),
// "Database File Layout" (storage-file-layout.html); source files
// src/backend/port/sysv_shmem.c and src/backend/storage/ipc/dsm.c.
package pgcluster
