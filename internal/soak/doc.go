// Package soak is the pure logic of `erplab run --soak`: the run cut into
// windows (Builder), each metric's trend over the recent windows with its
// slope and confidence interval (Fit, ordinary least squares), the early
// warning rule calibrated on steady runs (Rule), what a real trend
// projects (APDEX below its band, a p95 at its target T, sessions at
// max_connections) and the collapse limits of --stop-on-collapse. It
// reads no server and no file: loadtest's soak attachment feeds it the
// run's intervals and the samplers' figures, and tests feed it recorded
// windows from testdata/.
//
// The results keep what it made as extra.soak (Section):
//
//	{"format": "erplab-soak/1",
//	 "window_s": 300,                 // --window
//	 "rule": {...},                   // the warning rule's thresholds (RuleParams)
//	 "windows": [                     // one per window, in order (Window)
//	   {"i": 3, "from_s": 900, "to_s": 1200, "steady": true, "vus": 200,
//	    "values": {"apdex": 0.93, "tps": 412.5, "p95_ms/post_goods_receipt": 87.1,
//	               "active": 7.2, "waiting": 3.1, "wait/LWLock:SInvalRead": 1.2,
//	               "catalog_bytes": 2.1e7, "xmin_age": 1200, ...}}],
//	 "trends": [                      // each metric's trend at the end (Trend)
//	   {"metric": "p95_ms/post_goods_receipt", "n": 12, "slope_per_min": 1.9,
//	    "lo_per_min": 1.2, "hi_per_min": 2.6, "mean": 80, "pct_per_10min": 23.7,
//	    "real": true}],
//	 "warnings": [                    // each early warning when it fired (Warning)
//	   {"t_s": 1200, "window": 3, "metrics": ["p95_ms/post_goods_receipt"],
//	    "projection": "APDEX falls below 0.85 in ~25 min", "line": "degrading ..."}],
//	 "collapse": {"t_s": 2400, "window": 7, "reason": "..."},   // --stop-on-collapse only
//	 "thinned": {...}}                // how the series was thinned (Thinned), when it was
//
// A window's values are means over the window (rates, gauges, sizes) and
// for latencies its p95 from the merged histograms; keys are the metric
// keys (Key* constants). A latency's trend is fitted to the logarithm
// of its p95 (Trend.Log): its noise on a busy host is a factor, a spike
// of 4x, and a straight line on it would let one spike hide a trend.
package soak
