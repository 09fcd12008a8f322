package erp

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// genCount generates a data set without a database and returns rows and
// bytes per table.
func genCount(ctx context.Context, scale float64, seed uint64, workers int) (rows, bytes [numTables]int64, err error) {
	return genCountLimit(ctx, scale, seed, workers, flushBytes)
}

func genCountLimit(ctx context.Context, scale float64, seed uint64, workers, limit int) (rows, bytes [numTables]int64, err error) {
	p, err := newPlan(scale, seed, false)
	if err != nil {
		return rows, bytes, err
	}
	var mu sync.Mutex
	var docs atomic.Int64
	send := func(cb *copyBuf) error {
		mu.Lock()
		rows[cb.id] += cb.rows
		bytes[cb.id] += int64(len(cb.finish()))
		mu.Unlock()
		return nil
	}
	newBuf := func() []byte { return make([]byte, 0, flushBytes+64<<10) }
	err = p.generateLimit(ctx, workers, &docs, send, newBuf, limit)
	return rows, bytes, err
}

func TestGenerateScales(t *testing.T) {
	for _, scale := range []float64{0.01, 0.1} {
		rows, bytes, err := genCount(context.Background(), scale, 1, runtime.GOMAXPROCS(0))
		if err != nil {
			t.Fatal(err)
		}
		var tr, tb int64
		for i := range rows {
			tr += rows[i]
			tb += bytes[i]
			t.Logf("scale %g %-22s %9d rows %8.1f MB", scale, tableID(i).name(), rows[i], mb(bytes[i]))
		}
		t.Logf("scale %g total %d rows %.1f MB", scale, tr, mb(tb))
		if want := int64(math.Round(100000 * scale)); rows[tSalesInvoices] != want {
			t.Errorf("scale %g: %d sales invoices, want %d", scale, rows[tSalesInvoices], want)
		}
		// About a quarter as many receipts as sales invoices.
		if r, s := rows[tGoodsReceipts], rows[tSalesInvoices]; r < s/8 || r > s/2 {
			t.Errorf("scale %g: %d receipts for %d sales invoices, want 1/8..1/2", scale, r, s)
		}
	}
}

// The rows generated do not depend on how often buffers are handed on nor
// on the number of workers (every row is encoded into a buffer that is
// still the emitter's).
func TestGenerateIndependentOfBuffering(t *testing.T) {
	a, ab, err := genCountLimit(context.Background(), 0.02, 5, 3, flushBytes)
	if err != nil {
		t.Fatal(err)
	}
	b, bb, err := genCountLimit(context.Background(), 0.02, 5, 1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		// Each handed-on buffer has its own COPY header and trailer.
		if a[i] != b[i] {
			t.Errorf("%s: %d rows with 1 MB buffers, %d with 4 KB buffers", tableID(i).name(), a[i], b[i])
		}
		if ab[i] == 0 && bb[i] != 0 || ab[i] != 0 && bb[i] < ab[i] {
			t.Errorf("%s: %d bytes with 1 MB buffers, %d with 4 KB buffers", tableID(i).name(), ab[i], bb[i])
		}
	}
	p, _ := newPlan(0.02, 5, false)
	if want := int64(p.items + p.itemGroups); a[tItems] != want {
		t.Errorf("items: %d rows, want %d", a[tItems], want)
	}
	if want := int64(p.counterparties + p.cpGroups); a[tCounterparties] != want {
		t.Errorf("counterparties: %d rows, want %d", a[tCounterparties], want)
	}
	if want := int64(p.contracts); a[tContracts] != want {
		t.Errorf("contracts: %d rows, want %d", a[tContracts], want)
	}
}

// BenchmarkGenerate measures pure generation (no database): rows/s and
// MB/s of binary COPY data at scale 0.05 on GOMAXPROCS goroutines.
func BenchmarkGenerate(b *testing.B) {
	const scale = 0.05
	var rowsTotal, bytesTotal int64
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rows, bytes, err := genCount(context.Background(), scale, uint64(i), runtime.GOMAXPROCS(0))
		if err != nil {
			b.Fatal(err)
		}
		for k := range rows {
			rowsTotal += rows[k]
			bytesTotal += bytes[k]
		}
	}
	sec := time.Since(start).Seconds()
	b.ReportMetric(float64(rowsTotal)/sec, "rows/s")
	b.ReportMetric(mb(bytesTotal)/sec, "MB/s")
}

func TestZipfSkew(t *testing.T) {
	const n = 1000
	z := newZipf(n, 0.99)
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, n)
	const draws = 200000
	for i := 0; i < draws; i++ {
		counts[z.rank(r.Float64())]++
	}
	// Rank 0's share should be close to its probability 1/zeta(n).
	want := z.prob(0) * draws
	if got := float64(counts[0]); math.Abs(got-want) > 0.1*want {
		t.Errorf("rank 0 drawn %v times, want about %v", got, want)
	}
	if counts[0] <= 5*counts[9] {
		t.Errorf("rank 0 %d vs rank 9 %d: want strong skew", counts[0], counts[9])
	}
	total := 0.0
	for i := 0; i < n; i++ {
		total += z.prob(i)
	}
	if math.Abs(total-1) > 1e-9 {
		t.Errorf("probabilities sum to %v", total)
	}
}

func TestPermIsBijection(t *testing.T) {
	for _, n := range []int{1, 2, 200, 20000, 1000003} {
		p := newPerm(n, 12345)
		seen := make([]bool, n)
		for i := 0; i < n; i++ {
			j := p.of(i)
			if j < 0 || j >= n || seen[j] {
				t.Fatalf("n=%d: perm(%d)=%d repeats or out of range", n, i, j)
			}
			seen[j] = true
		}
	}
}
