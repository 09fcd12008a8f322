package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/erplab/erplab/internal/profile"
)

// relFileFrames are the frames of creating, unlinking and truncating
// relation files: PostgreSQL's (smgr, heap.c) and the kernel's system
// calls.
var relFileFrames = []string{"heap_create", "heap_create_with_catalog", "RelationCreateStorage", "smgrcreate", "smgrdounlinkall", "smgrtruncate",
	"do_unlinkat_[k]", "vfs_unlink_[k]", "ext4_create_[k]", "xfs_create_[k]", "vfs_create_[k]", "do_truncate_[k]"}

func init() {
	register(Check{ID: "profile-file-system", Title: "File-system share of server CPU (profile)", order: secProfile + 40, run: checkProfileFS,
		Rule:    fmt.Sprintf("needs --profile; warning when the file system (ext4/xfs/VFS, open/unlink/truncate/fsync) is >= %g %% of the server's CPU samples, info >= %g %%; the fix is the tmpfs temp tablespace when relation files are created and unlinked (temp-table churn)", profile.AdviceFSPct, profile.AdviceFSPct/2),
		Why:     "Each CREATE, TRUNCATE and DROP of a temp table creates or unlinks files; on ext4 that is inode, directory and block-group work in the kernel (the field: 13.5 % of CPU, 1.6 % on tmpfs).",
		Sources: []string{srcProfile, srcTempTblspc, srcTmpfsKernel, srcFieldCatalog}})
}

// checkProfileFS judges the file system's share of the profile: with
// relation files created and unlinked (temp-table churn) the fix is the
// tmpfs temp tablespace.
func checkProfileFS(_ context.Context, e *env) result {
	s, r, ok := e.profSubsystem(profile.SubFS, profile.AdviceFSPct, "file_system_share_pct")
	if !ok {
		return r
	}
	v := s.Share(profile.SubFS)
	fsName := ""
	for _, name := range []string{"ext4", "xfs", "btrfs", "shmem"} {
		prefix := name + "_"
		if v > 0 && profStacks(s, func(fr string) bool {
			return strings.HasPrefix(fr, prefix) && strings.HasSuffix(fr, profile.KernelSuffix)
		}) >= v/4 {
			fsName = name
			break
		}
	}
	rel := profStacksWith(s, relFileFrames...)
	r.metrics["relation_file_stacks_pct"] = rel
	r.evidence = append(r.evidence, Evidence{Text: fmt.Sprintf("relation files created, unlinked or truncated (heap_create, smgrdounlinkall, unlink, ext4_create, ...) on %.1f %% of the samples' stacks", rel), From: profFrom})
	if tt := e.show("temp_tablespaces"); e.has("temp_tablespaces") {
		if tt == "" {
			tt = "'' (temp tables in the database's default tablespace)"
		}
		r.evidence = append(r.evidence, Evidence{Text: "temp_tablespaces = " + tt, From: "pg_settings"})
	}
	on := ""
	if fsName != "" {
		on = " (" + fsName + ")"
	}
	switch r.sev {
	case OK:
		r.summary = fmt.Sprintf("file system %.1f %% of server CPU (under %g %%)", v, profile.AdviceFSPct/2)
		return r
	case Info:
		r.summary = fmt.Sprintf("file system%s %.1f %% of server CPU: under the %g %% warning", on, v, profile.AdviceFSPct)
	default:
		r.summary = fmt.Sprintf("file system%s %.1f %% of server CPU (>= %g %%)", on, v, profile.AdviceFSPct)
	}
	churn := rel >= v/4
	switch {
	case churn && fsName == "shmem":
		r.summary += ": relation files are created and unlinked already on tmpfs; what remains is that work itself"
		r.fix = []string{"# create fewer temp tables per transaction (check profile-sinval)"}
	case churn:
		r.summary += ": relation files are created and unlinked (temp-table churn); put temp tables on a tmpfs temp tablespace"
		r.fix = []string{
			"erplab doctor fix tmpfs-temp-tablespace --dsn '<dsn>' --size 2G   # prints the procedure; --apply runs it, --undo reverts it",
			"# then check temp-tablespace; the catalogs' own files stay on disk, so create fewer temp tables per transaction too (check profile-sinval)",
		}
	default:
		r.summary += ": not mainly relation files created or unlinked; look at the top functions (fsync: WAL and checkpoints; reads: a cache too small)"
		r.fix = []string{"# read the top functions above; erplab disk measures the storage, and erplab profile --svg FILE draws where the file-system time comes from"}
	}
	return r
}
