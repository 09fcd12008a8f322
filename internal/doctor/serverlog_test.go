package doctor

import (
	"os"
	"strings"
	"testing"
)

// TestScanDiskFullRecorded reads the end of a real server log of
// temp_table_storm on a full 4 MB tmpfs temp tablespace (recorded by
// cmd/erplab's TestRunTempTablespaceFull, ERPLAB_RECORD_TEMPFULL).
func TestScanDiskFullRecorded(t *testing.T) {
	f, err := os.Open("testdata/serverlog/tempfull.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := scanDiskFull(f)
	if err != nil {
		t.Fatal(err)
	}
	want := logDiskFull{Tablespace: 16623, Count: 5,
		Example: `could not extend file "pg_tblspc/16623/PG_15_202209061/16384/t4_19131": No space left on device`,
		First:   "2026-12-04 11:05:24.168 UTC [1025]", Last: "2026-12-04 11:05:24.265 UTC [1025]"}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// Only temp files of a tablespace of their own count: not the data
// disk's files (base/), not a permanent relation's, and a line with
// SQLSTATE 53100 in its prefix (%e) counts without the English strerror.
func TestScanDiskFullKinds(t *testing.T) {
	log := strings.Join([]string{
		`2026-12-04 11:00:00.000 UTC [1] ERROR:  could not extend file "base/16384/16400": No space left on device`,
		`2026-12-04 11:00:00.000 UTC [1] ERROR:  could not extend file "pg_tblspc/7/PG_15_202209061/16384/16401": No space left on device`,
		`2026-12-04 11:00:00.000 UTC [1] ERROR:  could not write to file "base/pgsql_tmp/pgsql_tmp1.0": No space left on device`,
		`2026-12-04 11:00:01.000 UTC [2] 53100 ERROR:  не удалось увеличить файл "pg_tblspc/9/PG_15_202209061/16384/t3_5": На устройстве не осталось свободного места`,
		`2026-12-04 11:00:02.000 UTC [3] ERROR:  could not write to file "pg_tblspc/9/PG_15_202209061/pgsql_tmp/pgsql_tmp3.0": No space left on device`,
		`2026-12-04 11:00:03.000 UTC [3] LOG:  temporary file: path "pg_tblspc/9/PG_15_202209061/pgsql_tmp/pgsql_tmp3.0", size 8192`,
	}, "\n")
	got, err := scanDiskFull(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Tablespace != 9 || got[0].Count != 2 || got[0].First != "2026-12-04 11:00:01.000 UTC [2] 53100" || got[0].Last != "2026-12-04 11:00:02.000 UTC [3]" {
		t.Fatalf("got %+v", got)
	}
}
