package results

import (
	"testing"
)

func TestParseDiskFull(t *testing.T) {
	cases := []struct {
		msg        string
		ok, temp   bool
		tablespace uint32
	}{
		// Recorded on this machine: a temp table's file on a full tmpfs
		// tablespace (TestRunTempTablespaceFull).
		{`could not extend file "pg_tblspc/16623/PG_15_202209061/16384/t4_16626": No space left on device`, true, true, 16623},
		// Its index, a later segment and the free-space map.
		{`could not extend file "pg_tblspc/16623/PG_15_202209061/16384/t12_40000.1": No space left on device`, true, true, 16623},
		{`could not extend file "pg_tblspc/16623/PG_15_202209061/16384/t12_40000_fsm": wrote only 4096 of 8192 bytes at block 2`, true, true, 16623},
		// A sort's temporary file in the temp tablespace.
		{`could not write to file "pg_tblspc/16623/PG_15_202209061/pgsql_tmp/pgsql_tmp4711.0": No space left on device`, true, true, 16623},
		// The data disk: a permanent table, and temp files in base/.
		{`could not extend file "base/16384/16400": No space left on device`, true, false, 0},
		{`could not write to file "base/pgsql_tmp/pgsql_tmp4711.3": No space left on device`, true, true, 0},
		// A permanent table in a tablespace (a file named like a number).
		{`could not extend file "pg_tblspc/16623/PG_15_202209061/16384/16401": No space left on device`, true, false, 16623},
		// Translated wording, same path.
		{`не удалось увеличить файл "pg_tblspc/16623/PG_15_202209061/16384/t4_16626": На устройстве не осталось свободного места`, true, true, 16623},
		// No file, or one elsewhere.
		{`could not write to log file: No space left on device`, false, false, 0},
		{`could not write to file "pg_wal/xlogtemp.123": No space left on device`, false, false, 0},
		{`could not extend file "pg_tblspc/x/PG_15/1/t1_2": No space left`, false, false, 0},
		{`could not extend file "pg_tblspc/16623/PG_15_202209061/16384/tx_1": unterminated`, true, false, 16623},
		{`unterminated "pg_tblspc/16623/`, false, false, 0},
	}
	for _, c := range cases {
		f, ok := ParseDiskFull(c.msg)
		if ok != c.ok || f.Temp != c.temp || f.Tablespace != c.tablespace {
			t.Errorf("%s: %+v ok %v, want ok %v temp %v tablespace %d", c.msg, f, ok, c.ok, c.temp, c.tablespace)
		}
	}
}

// TestTempFullsRecorded reads the results of a real run of
// temp_table_storm against a temp tablespace on a full 4 MB tmpfs
// (recorded by TestRunTempTablespaceFull in cmd/erplab).
func TestTempFullsRecorded(t *testing.T) {
	doc, err := Read("testdata/tempfull-run.json")
	if err != nil {
		t.Fatal(err)
	}
	fulls := TempFulls(doc.Operations)
	if len(fulls) != 1 {
		t.Fatalf("findings %+v, want one", fulls)
	}
	want := `temp tablespace full: temp_table_storm failed 201 of 201 times with 53100 disk_full on a temp table's file ` +
		`(could not extend file "pg_tblspc/16623/PG_15_202209061/16384/t4_16626": No space left on device): ` +
		`the temp tablespace pg_tblspc/16623 (a tmpfs when erplab's tmpfs remedy made it) is full`
	if got := fulls[0].Line(); got != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
	// The same errors on a permanent table: the data disk, not the temp
	// tablespace, so no finding.
	ops := append([]OpResult(nil), doc.Operations...)
	for i := range ops {
		if ops[i].ErrorExamples != nil {
			ops[i].ErrorExamples = map[string]string{CodeDiskFull: `could not extend file "base/16384/16400": No space left on device`}
		}
	}
	if f := TempFulls(ops); len(f) != 0 {
		t.Errorf("permanent table: %+v", f)
	}
	// A temp file in base/: temp_tablespaces is empty, the data disk is
	// full; not the temp tablespace's finding either.
	for i := range ops {
		if ops[i].ErrorExamples != nil {
			ops[i].ErrorExamples = map[string]string{CodeDiskFull: `could not write to file "base/pgsql_tmp/pgsql_tmp4711.3": No space left on device`}
		}
	}
	if f := TempFulls(ops); len(f) != 0 {
		t.Errorf("temp file on the data disk: %+v", f)
	}
}

// A merge keeps each SQLSTATE's example of the first segment that has
// one (in the merged order), so the merged summary can still name a full
// temp tablespace.
func TestMergeKeepsErrorExamples(t *testing.T) {
	docs := readSegments(t)
	docs[1].Operations[0].ErrorExamples = map[string]string{CodeDiskFull: "second segment's", "40001": "only in the second"}
	docs[2].Operations[0].ErrorExamples = map[string]string{CodeDiskFull: "third segment's"}
	m, err := Merge(docs, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	for _, op := range m.Operations {
		if op.Name == docs[0].Operations[0].Name {
			got = op.ErrorExamples
		}
	}
	if len(got) != 2 || got[CodeDiskFull] != "second segment's" || got["40001"] != "only in the second" {
		t.Fatalf("merged examples %q", got)
	}
}
