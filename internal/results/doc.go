// Package results owns the on-disk results of `erplab run`: the document
// (X.json, [Document]) and the JSON Lines stream written while the run goes
// (X.jsonl, [StreamLine]), their format name and schema version, writing
// ([Document.WriteFile], [CreateStream]), reading ([Read], which takes
// either file) and validation ([Validate]). Every reader of results
// (compare, report, experiment, versus, summaries) imports this package and
// not the recorder (package record), which produces these types.
//
// # Killed runs
//
// A run killed with SIGKILL (or a host that lost power) leaves a stream
// with a header and the intervals it closed, but no summary line, and
// perhaps a torn last line. [Read] rebuilds a Document from it:
//
//   - Status is "killed: stream ended at t=<last interval>s without a
//     summary"; EndedAt is StartedAt plus that t.
//   - Per operation (names, targets and priorities from the header's
//     parameters.operations), Count, Errors, Skipped, Late, Retries,
//     Retried, ErrorsBySQLState and the APDEX zones are the sums over the
//     intervals; the APDEX score follows from the zones and the target; the
//     response-time histogram is the merge of the intervals' histograms, so
//     Response (mean, percentiles, max, stddev) and histogram_us are exactly
//     those the recorder would have written. PoolWait, DB, Lag and the
//     warm-up counters are not in the stream and stay zero.
//   - Totals sum the operations; ScoredSeconds is the last interval's t
//     minus the header's parameters.warmup_s; Series is the intervals.
//   - Extra holds the sections the interval lines' parts make (Part,
//     Stream.Pend): the observers' samples and storms up to the last whole
//     line (package sampler writes and reads them).
//   - The intervals' cut_short counts (executions the end of the run cut
//     short past 4T, scored frustrated; schema 3) sum into
//     OpResult.CutShort.Frustrated; the not-scored ones are not in the
//     stream. Stages are computed from the intervals ([StageFigures]).
//
// Streams written before intervals carried zones and histograms
// (SchemaVersion 1) are rebuilt with counts only: no APDEX, no latencies
// (the status says so).
//
// # Merge
//
// A run split over several load machines (erplab run --segment) leaves
// one document per segment, each with the run's id, configuration hash
// and its piece of the rational segment sequence (SegmentInfo). [Merge]
// makes the run's document of them: it refuses foreign (another run id,
// configuration or server: environment.server's system identifier and
// database), duplicated, overlapping and (unless
// MergeOptions.AllowPartial) missing or incomplete pieces (a restarted
// piece given with its earlier attempts is incomplete; a partial merge
// uses the latest completed attempt, else the latest, and notes it in
// MergeInfo.Notes), then adds every operation's counts, zones and
// histograms (response, pool wait, database, lag) and the intervals of
// the same index, and computes every percentile, APDEX, the integral,
// the totals and the stages from the sums, so that each figure is the
// one of the union of the segments' samples. docs/results-format.md
// lists the rules field by field.
//
// Extra loses no segment's section. A section equal (as a JSON value) in
// every merged segment is kept once in extra. Otherwise, by name:
// experiment and remedies must be the same on every agent, and a segment
// with another value or none is refused; catalog (sizes each agent
// measured at its start and end) becomes the run's span, before_bytes of
// the segment that started first and after_bytes of the one that ended
// last; observations and profile (the server as each agent saw it over
// the same run) are the first piece's that has one; stress (the load
// machine's own CPU and vmstat) and any section this package does not
// know are not in extra (an unknown one is named in MergeInfo.Notes).
// Every section that was not equal everywhere is kept as each segment
// recorded it in MergedSegment.Extra (merged.segments[].extra). No
// section is summed: none of those written today counts something that
// adds up across agents without counting one server several times.
// Environment is the first segment's; when the segments' environment.host
// (each agent's machine) are not all equal, each is kept in
// MergedSegment.HostFacts.
//
// # Schema version
//
// Format names the document ("erplab-run/1"); SchemaVersion counts
// additive changes within that format (readers ignore fields they do not
// know and treat a missing one as zero, so older files stay readable). A
// document or stream with another format name, or a schema version newer
// than this package knows, is refused by Validate.
package results
