package cli

// Usage is the text of `erplab pgbench --help`: pgbench's options in
// pgbench's sections (scripts that grep pgbench's help find the same
// headings), in erplab's words.
const Usage = `erplab pgbench is a benchmarking tool for PostgreSQL with pgbench's command line,
run by erplab's engine (pgbench 15-17 options, and 18's --continue-on-error).

Usage:
  erplab pgbench [OPTION]... [DBNAME]

Initialization options:
  -i, --initialize         create the pgbench tables (initialization mode)
  -I, --init-steps=[dtgGvpf]+ (default "dtgvp")
                           steps: d drop, t create tables, g client-side data,
                           G server-side data, v vacuum, p primary keys, f foreign keys
  -F, --fillfactor=NUM     fill factor of the tables (10..100)
  -n, --no-vacuum          no VACUUM step
  -q, --quiet              one progress line every 5 seconds
  -s, --scale=NUM          scale factor (100,000 accounts per unit)
  --foreign-keys           add foreign keys between the tables
  --index-tablespace=TABLESPACE
                           build the primary keys in this tablespace
  --partition-method=(range|hash)
                           how pgbench_accounts is partitioned (default: range)
  --partitions=NUM         number of partitions of pgbench_accounts (default: 0)
  --tablespace=TABLESPACE  create the tables in this tablespace
  --unlogged-tables        create unlogged tables

Options to select what to run:
  -b, --builtin=NAME[@W]   builtin script NAME with weight W (default: 1);
                           "-b list" lists them
  -f, --file=FILENAME[@W]  script file with weight W (default: 1); "-" is stdin
  -N, --skip-some-updates  same as "-b simple-update"
  -S, --select-only        same as "-b select-only"

Benchmarking options:
  -c, --client=NUM         number of clients, each with its connection (default: 1)
  -C, --connect            a new connection for every transaction
  -D, --define=VARNAME=VALUE
                           a variable for the scripts
  -j, --jobs=NUM           number of threads (default: 1)
  -l, --log                per-transaction log files (pgbench_log.PID[.THREAD])
  -L, --latency-limit=NUM  transactions above NUM ms count as late; with -R,
                           those already late at their start are skipped
  -M, --protocol=simple|extended|prepared
                           query protocol (default: simple)
  -n, --no-vacuum          no VACUUM before the run
  -P, --progress=NUM       a progress line every NUM seconds
  -r, --report-per-command latency, failures and retries of every command
  -R, --rate=NUM           target rate in transactions per second (open model)
  -s, --scale=NUM          scale shown for custom scripts
  -t, --transactions=NUM   transactions per client (default: 10)
  -T, --time=NUM           duration of the run in seconds
  -v, --vacuum-all         also vacuum pgbench_accounts before the run
  --aggregate-interval=NUM log aggregates over NUM seconds instead of transactions
  --continue-on-error      a client goes on after a failed transaction (pgbench 18)
  --exit-on-abort          stop every client when one aborts (pgbench 17)
  --failures-detailed      failures by kind (serialization, deadlock)
  --log-prefix=PREFIX      log file name prefix (default: "pgbench_log")
  --max-tries=NUM          tries of a transaction after a serialization failure or
                           deadlock (default: 1; 0 = unlimited)
  --progress-timestamp     progress lines with Unix epoch timestamps
  --random-seed=SEED       seed of the random functions ("time", "rand", integer)
  --sampling-rate=NUM      fraction of transactions logged (e.g., 0.01 for 1%)
  --show-script=NAME       print a builtin script and exit
  --verbose-errors         print every error, retried ones too

Common options:
  -d, --debug              debugging output
  -h, --host=HOSTNAME      server host or socket directory
  -p, --port=PORT          server port
  -U, --username=USERNAME  user name
  -V, --version            print the version and exit
  -?, --help               print this help and exit

After pgbench's report erplab adds its own lines (percentiles, APDEX per script,
where the results document was written), each starting with "erplab:".
Connection settings not given come from libpq's environment (PGHOST, PGPORT,
PGUSER, PGDATABASE, PGPASSWORD, ~/.pgpass).

Report bugs to the erplab issue tracker.
`
