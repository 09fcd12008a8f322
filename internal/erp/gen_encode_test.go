package erp

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// decimalText formats v / 10^scale as PostgreSQL prints a numeric of that
// display scale.
func decimalText(v int64, scale int) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := fmt.Sprintf("%0*d", scale+1, v)
	if scale > 0 {
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// The hand-written binary encoder must produce values PostgreSQL reads
// back exactly.
func TestCopyEncodingRoundTrip(t *testing.T) {
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	if _, err := pool.Exec(ctx, `CREATE TABLE enc (n numeric, s int, ts timestamp, b boolean, r bytea, tx text, i integer)`); err != nil {
		t.Fatal(err)
	}
	values := []int64{0, 1, -1, 9, 10, 99, 100, 9999, 10000, 10001, 123456789, -987654321, 1000000000000, 999999999999999, -100000}
	when := time.Date(2026, 10, 31, 19, 59, 58, 123456000, time.UTC)
	cb := newCopyBuf(0, "enc", false, nil)
	var want []string
	for _, v := range values {
		for scale := 0; scale <= 3; scale++ {
			ref := makeRef(42, NumItems, uint64(v)&0xffff)
			cb.row(7)
			cb.numeric(v, scale)
			cb.int4(int32(scale))
			cb.tsTime(when)
			cb.boolean(v%2 == 0)
			cb.ref(&ref)
			cb.text("x" + decimalText(v, scale))
			cb.int4(int32(v))
			want = append(want, fmt.Sprintf("%s|%d|2026-10-31 19:59:58.123456|%t|\\x%x|x%s|%d",
				decimalText(v, scale), scale, v%2 == 0, ref[:], decimalText(v, scale), int32(v)))
		}
	}
	cb.row(7) // the platform's special dates
	cb.numeric(0, 0)
	cb.int4(99)
	cb.tsTime(CurrentPeriod)
	cb.boolean(true)
	cb.byte1(TypeUndefined)
	cb.text("")
	cb.int4(0)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(cb.finish()), "COPY enc FROM STDIN (FORMAT binary)"); err != nil {
		t.Fatalf("COPY: %v", err)
	}
	rows, err := pool.Query(ctx, `SELECT n::text || '|' || s || '|' || ts || '|' || b || '|' || r::text || '|' || tx || '|' || i FROM enc WHERE s < 99 ORDER BY ctid`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows read back, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: got %q, want %q", i, got[i], want[i])
		}
	}
	var special string
	if err := pool.QueryRow(ctx, `SELECT ts::text || '|' || r::text FROM enc WHERE s = 99`).Scan(&special); err != nil {
		t.Fatal(err)
	}
	if special != `3999-11-01 00:00:00|\x01` {
		t.Errorf("special row = %q", special)
	}
}
