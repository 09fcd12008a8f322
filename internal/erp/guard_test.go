package erp

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/workload"
	"github.com/erplab/erplab/internal/workload/smoke"
)

// A server built by `erplab run --workload erp` is erplab's: the smoke
// workload's guard passes on it (erp's tables and marker carry erp's
// Marker, a workload.CreatedComment). A data set an older erplab built
// without the comments gets them at erp's next set-up. A genuinely
// foreign table is still refused, and named alone.
func TestOtherWorkloadsGuardKnowsERPTables(t *testing.T) {
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	erpSetup := func() {
		t.Helper()
		if err := New(WorkloadOptions{}).Setup(ctx, pool, workload.SetupOptions{Scale: testScale, Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	smokeSetup := func() error {
		return smoke.New().Setup(ctx, pool, workload.SetupOptions{Scale: 0.01})
	}
	erpSetup()
	if err := smokeSetup(); err != nil {
		t.Fatalf("smoke on erp's data set: %v", err)
	}

	// As an older erplab left it: no comments; erp's set-up adds them.
	if _, err := pool.Exec(ctx, strings.ReplaceAll(commentSQL("", append(AllTables(), TableMeta)), "'"+Marker+"'", "NULL")); err != nil {
		t.Fatal(err)
	}
	if err := smokeSetup(); !errors.Is(err, workload.ErrForeignDatabase) {
		t.Fatalf("smoke on uncommented erp tables: %v; want ErrForeignDatabase (the guard reads the comment)", err)
	}
	erpSetup()
	if err := smokeSetup(); err != nil {
		t.Fatalf("smoke after erp's set-up marked an older data set: %v", err)
	}

	if _, err := pool.Exec(ctx, `CREATE TABLE public.ledger (id int)`); err != nil {
		t.Fatal(err)
	}
	err := smokeSetup()
	if !errors.Is(err, workload.ErrForeignDatabase) || !strings.Contains(err.Error(), "smoke setup: public.ledger: ") {
		t.Fatalf("smoke next to erp's tables and public.ledger: %v; want ErrForeignDatabase naming public.ledger alone", err)
	}
}
