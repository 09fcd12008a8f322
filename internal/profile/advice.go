package profile

import "fmt"

// Advice thresholds, % of the server's samples.
const (
	// AdviceFSPct: file-system time at which temp-table files should move
	// to RAM (the field: 13.5 % on ext4, 1.6 % on tmpfs).
	AdviceFSPct = 10.0
	// AdviceSinvalPct: shared-invalidation time at which catalog DDL per
	// transaction should fall.
	AdviceSinvalPct = 5.0
	// AdviceLockPct: lock-manager time worth a look at relation locks.
	AdviceLockPct = 10.0
	// AdviceCompactionPct: kernel compaction or huge-page clearing time
	// at which transparent huge pages are suspect.
	AdviceCompactionPct = 2.0
)

// Advice returns one line per finding of the field's signatures in s
// (none below the thresholds): the share, what it usually means and the
// erplab command or setting that addresses it.
func Advice(s *Summary) []string {
	if s == nil || s.Samples == 0 {
		return nil
	}
	var out []string
	if v := s.Share(SubFS); v >= AdviceFSPct {
		out = append(out, fmt.Sprintf("file system %.1f %% of server CPU (>= %g %%): with temp-table churn that is creating and unlinking files; put temp tables on a tmpfs temp tablespace: erplab doctor fix tmpfs-temp-tablespace --dsn '<dsn>' prints the procedure", v, AdviceFSPct))
	}
	if v := s.Share(SubSinval); v >= AdviceSinvalPct {
		out = append(out, fmt.Sprintf("shared invalidation %.1f %% of server CPU (>= %g %%): catalog DDL (CREATE/DROP of temp tables and their indexes) floods the invalidation queue; create fewer temp tables per transaction (keep and TRUNCATE them, lsFusion-style) and see erplab doctor's catalog-churn and lwlock-waits checks", v, AdviceSinvalPct))
	}
	if v := s.Share(SubLock); v >= AdviceLockPct {
		out = append(out, fmt.Sprintf("lock manager %.1f %% of server CPU (>= %g %%): relation locks beyond the 16 fast-path slots per backend (many tables and indexes per transaction, temp tables) go through the shared lock table; see erplab doctor's lwlock-waits check", v, AdviceLockPct))
	}
	if v := max(s.Marks["compaction"], s.Marks["huge_page_clearing"]); v >= AdviceCompactionPct {
		out = append(out, fmt.Sprintf("kernel compaction / huge-page clearing %.1f %% of server CPU (>= %g %%): transparent huge pages; echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (erplab doctor's thp checks)", v, AdviceCompactionPct))
	}
	return out
}
