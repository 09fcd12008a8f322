package report

// pageHTML is the report page: inline CSS, inline SVG, no scripts and no
// references to other files (the favicon is an empty data: URL so the
// browser does not ask for /favicon.ico).
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.r-excellent { background: #d8f3dc; } .r-good { background: #e9f5db; } .r-fair { background: #fff3bf; }
.r-poor { background: #ffd8a8; } .r-unacceptable { background: #ffc9c9; } .r-ns { color: #888; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
details { margin: .5em 0; } details td.l { word-break: break-all; max-width: 60em; } code { background: #f6f6f6; padding: .1em .3em; }
.muted { color: #777; font-size: .85em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="muted">Generated {{.Generated}} by erplab report.</p>

<h2 id="summary">Summary</h2>
<table>
<tr><th class="l">run</th><th class="l">workload</th><th class="l">status</th><th class="l">started (UTC)</th><th>duration</th><th>VUs</th><th>connections</th><th>integral APDEX</th><th>executions/s</th><th>executions</th><th>errors</th><th>storms</th></tr>
{{range .Summary}}<tr><td class="l">{{.Name}}</td><td class="l">{{.Workload}}</td><td class="l">{{.Status}}</td><td class="l">{{.Started}}</td><td>{{.Duration}}</td><td>{{.MaxVUs}}</td><td>{{.Connections}}</td><td class="r-{{.Rating}}">{{.Integral}} ({{.Rating}})</td><td>{{.PerSecond}}</td><td>{{.Count}}</td><td>{{.Errors}}</td><td>{{.Storms}}</td></tr>
{{end}}</table>

<h2 id="apdex">APDEX per key operation</h2>
<table>
<tr><th class="l" rowspan="2">key operation</th><th rowspan="2">target T</th><th rowspan="2">priority</th>{{range .Runs}}<th colspan="4">{{.}}</th>{{end}}</tr>
<tr>{{range .Runs}}<th>APDEX</th><th>p50 / p95 / p99</th><th>executions</th><th>errors</th>{{end}}</tr>
{{range .Ops}}<tr><td class="l">{{.Name}}</td><td>{{.Target}}</td><td>{{.Priority}}</td>{{range .Cells}}<td class="{{.Class}}">{{.Apdex}} {{if .Rating}}({{.Rating}}){{end}}</td><td>{{.P50}} / {{.P95}} / {{.P99}}</td><td>{{.Count}}</td><td>{{.Errors}}</td>{{end}}</tr>
{{end}}</table>

<h2 id="observations">Observations (means over the run)</h2>
<table>
<tr><th class="l">run</th><th class="l">top wait events (share of active sessions)</th><th>CPU user</th><th>CPU system</th><th>iowait</th><th>softirq</th><th>catalog before</th><th>catalog after</th><th>catalog growth</th><th>temp files</th></tr>
{{range .Obs}}<tr><td class="l">{{.Name}}</td><td class="l">{{.TopWaits}}</td><td>{{.CPUUser}}</td><td>{{.CPUSystem}}</td><td>{{.CPUIowait}}</td><td>{{.CPUSoftirq}}</td><td>{{.CatalogBefore}}</td><td>{{.CatalogAfter}}</td><td>{{.CatalogGrowth}}</td><td>{{.TempFiles}}</td></tr>
{{end}}</table>
{{if .Storms}}
<h2 id="storms">Storms</h2>
<p>Marked on the time charts: a red line when the storm fired, a shaded span from its baseline point to its end.</p>
<table>
<tr><th class="l">run</th><th>fired at</th><th class="l">span</th><th class="l">wait event</th><th class="l">message</th></tr>
{{range .Storms}}<tr><td class="l">{{.Run}}</td><td>{{.At}}</td><td class="l">{{.Span}}</td><td class="l">{{.Wait}}</td><td class="l">{{.Message}}</td></tr>
{{end}}</table>
{{else}}<p>No storms detected.</p>{{end}}

<h2 id="charts">Charts</h2>
<div class="charts">
{{range .Charts}}<figure id="chart-{{.ID}}">{{svg .SVG}}</figure>
{{end}}</div>

<h2 id="environment">Environment and parameters</h2>
{{range .Env}}<details open><summary><strong>{{.Name}}</strong></summary>
{{if .CommandLine}}<p><code>{{.CommandLine}}</code></p>{{end}}
<table><tr><th class="l">environment</th><th class="l">value</th></tr>
{{range .Environment}}<tr><td class="l">{{.Key}}</td><td class="l">{{.Value}}</td></tr>
{{end}}</table>
<table><tr><th class="l">parameter</th><th class="l">value</th></tr>
{{range .Parameters}}<tr><td class="l">{{.Key}}</td><td class="l">{{.Value}}</td></tr>
{{end}}</table>
</details>
{{end}}
</body>
</html>
`
