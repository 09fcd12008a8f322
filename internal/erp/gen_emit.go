package erp

// tableID indexes the tables a generator writes, for array lookups instead
// of map lookups per row.
type tableID int

const (
	tOrganizations tableID = iota
	tCurrencies
	tUnits
	tVATRates
	tDepartments
	tPriceTypes
	tUsers
	tItems
	tCounterparties
	tContracts
	tWarehouses
	tAccessKeys
	tSalesInvoices
	tSalesInvoiceLines
	tGoodsReceipts
	tGoodsReceiptLines
	tGoodsMovements
	tGoodsBalanceTotals
	tSalesMovements
	tSalesTurnoverTotals
	tPrices
	tRLSObjectKeys
	tRLSKeyValues
	tRLSUserValues
	numTables
)

// name is the physical table name of id (AllTables is in tableID order).
func (id tableID) name() string { return AllTables()[id] }

// flushBytes is the buffer size at which a generator hands a table's rows
// to a COPY stream.
const flushBytes = 1 << 20

// emitter collects a generator's rows per table and hands full buffers to
// send (which takes ownership of the buffer and must eventually return its
// storage through newBuf's recycling, or drop it). One emitter per
// generator goroutine.
type emitter struct {
	sep    bool
	names  []string
	bufs   [numTables]*copyBuf
	send   func(*copyBuf) error
	newBuf func() []byte
	limit  int
}

func newEmitter(sep bool, send func(*copyBuf) error, newBuf func() []byte) *emitter {
	return &emitter{sep: sep, names: AllTables(), send: send, newBuf: newBuf, limit: flushBytes}
}

// get returns the current buffer of table id. The buffer is valid only
// until the next check or flush of that table, which may hand it on: get
// it again after each check.
func (e *emitter) get(id tableID) *copyBuf {
	cb := e.bufs[id]
	if cb == nil {
		cb = newCopyBuf(id, e.names[id], e.sep, e.newBuf())
		e.bufs[id] = cb
	}
	return cb
}

// check sends table id's buffer if it is full.
func (e *emitter) check(id tableID) error {
	cb := e.bufs[id]
	if cb == nil || cb.size() < e.limit {
		return nil
	}
	e.bufs[id] = nil
	return e.send(cb)
}

// flush sends every non-empty buffer.
func (e *emitter) flush() error {
	for id, cb := range e.bufs {
		if cb == nil {
			continue
		}
		e.bufs[id] = nil
		if cb.rows == 0 {
			continue
		}
		if err := e.send(cb); err != nil {
			return err
		}
	}
	return nil
}
