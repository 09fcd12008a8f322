package report

// pageHTML is the report page: inline CSS, inline SVG, no scripts and no
// references to other files (the favicon is an empty data: URL so the
// browser does not ask for /favicon.ico). Colours: the runs' colours are
// Okabe-Ito (charts.go); the APDEX rating bands run from blue (excellent)
// to orange (unacceptable), never from green to red. Layout: every table
// in a div.scroll that scrolls sideways, charts in a grid of columns of
// at least 540 px, each SVG as wide as its column, so four runs fit a
// 1400 px window.
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
h3 { font-size: 1em; margin-top: 1.2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.r-excellent { background: #c6dbef; } .r-good { background: #e1ecf6; } .r-fair { background: #f2f2f2; }
.r-poor { background: #fde0c2; } .r-unacceptable { background: #f9bf86; } .r-ns { color: #888; }
tr.diff td { font-weight: bold; } tr.diff td.key::after { content: " ≠"; color: #d55e00; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .4em; vertical-align: -.1em; border-radius: 2px; }
.differs { border: 2px solid #0072b2; padding: .2em 1em .6em; margin: 1em 0; }
.differs td.l { max-width: 40em; word-break: break-word; } .differs td.l:nth-child(-n+2) { white-space: nowrap; }
figure { margin: 1em 0; } figure svg { display: block; width: 100%; height: auto; border: 1px solid #eee; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(540px, 100%), 1fr)); gap: 1em; } .charts figure { margin: 0; min-width: 0; }
.scroll { overflow-x: auto; max-width: 100%; }
details { margin: .5em 0; } code { background: #f6f6f6; padding: .1em .3em; word-break: break-all; }
.muted { color: #777; font-size: .85em; }
figcaption { font-size: .85em; color: #444; margin-top: .3em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="muted">Generated {{.Generated}} by erplab report.</p>
{{$runs := .Runs}}{{$pal := .Palette}}
{{if gt (len .Runs) 1}}<div class="differs">
<h2 id="differs" style="margin-top:.5em">What differs between the runs</h2>
{{if .Differs}}<div class="scroll"><table>
<tr><th class="l">section</th><th class="l">item</th>{{range $i, $r := $runs}}<th class="l"><span class="swatch" style="background:{{index $pal $i}}"></span>{{$r}}</th>{{end}}</tr>
{{range .Differs}}<tr><td class="l">{{.Section}}</td><td class="l">{{.Key}}</td>{{range .Values}}<td class="l">{{.}}</td>{{end}}</tr>
{{end}}</table></div>
{{else}}<p>Nothing recorded differs: same remedies, erplab version, parameters, server settings and host.</p>{{end}}
</div>
{{else if .Remedies}}<p><strong>Remedies:</strong> {{index .Remedies.Values 0}}</p>
{{end}}
{{if .Verdicts}}<h2 id="verdicts">Verdicts of erplab ab</h2>
<p class="muted">{{verdictsNote}}</p>
{{range .Verdicts}}<p><strong>VERDICT {{.Variant}}</strong>{{if .Rounds}} ({{.Rounds}}){{end}}: {{if .Note}}not computed: {{.Note}}{{else}}{{.Line}}{{end}}</p>
{{if .Rows}}<ul>{{range .Rows}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{end}}{{end}}
<h2 id="summary">Summary</h2>
<div class="scroll"><table>
<tr><th class="l">run</th><th class="l">workload</th><th class="l">status</th><th class="l">started (UTC)</th><th>duration</th><th>VUs</th><th>connections</th><th>integral APDEX</th><th>executions/s</th><th>executions</th><th>errors</th><th>storms</th></tr>
{{range $i, $s := .Summary}}<tr><td class="l"><span class="swatch" style="background:{{index $pal $i}}"></span>{{$s.Name}}</td><td class="l">{{$s.Workload}}</td><td class="l">{{$s.Status}}</td><td class="l">{{$s.Started}}</td><td>{{$s.Duration}}</td><td>{{$s.MaxVUs}}</td><td>{{$s.Connections}}</td><td class="r-{{$s.Rating}}">{{$s.Integral}} ({{$s.RatingLabel}})</td><td>{{$s.PerSecond}}</td><td>{{$s.Count}}</td><td>{{$s.Errors}}</td><td>{{$s.Storms}}</td></tr>
{{end}}</table></div>

<h2 id="apdex">APDEX per key operation</h2>
<div class="scroll"><table>
<tr><th class="l" rowspan="2">key operation</th><th rowspan="2">target T</th><th rowspan="2">priority</th>{{range .Runs}}<th colspan="4">{{.}}</th>{{end}}</tr>
<tr>{{range .Runs}}<th>APDEX</th><th>p50 / p95 / p99</th><th>executions</th><th>errors</th>{{end}}</tr>
{{range .Ops}}<tr><td class="l">{{.Name}}</td><td>{{.Target}}</td><td>{{.Priority}}</td>{{range .Cells}}<td class="{{.Class}}"{{if .Small}} title="fewer than 100 samples"{{end}}>{{.Apdex}} {{if .Rating}}({{.Rating}}){{end}}</td><td>{{.P50}} / {{.P95}} / {{.P99}}</td><td>{{.Count}}</td><td>{{.Errors}}</td>{{end}}</tr>
{{end}}</table></div>
<p class="muted">APDEX values are truncated to two decimals, as erplab run prints them (0.9399 shows as 0.93, in its band "good").{{if .Small}} * fewer than 100 samples: APDEX of such operations is indicative only.{{end}}</p>
` + replayHTML + `

{{if .Stages.Rows}}<h2 id="stages">APDEX per stage</h2>
<div class="scroll"><table>
<tr><th class="l">run</th><th>stage</th><th>span</th><th>VUs</th><th>executions/s</th><th>integral APDEX</th>{{range .Stages.Ops}}<th>{{.}}<br>APDEX, p95</th>{{end}}</tr>
{{range .Stages.Rows}}<tr><td class="l">{{.Run}}</td><td>{{.Stage}}</td><td>{{.Span}}</td><td>{{.VUs}}</td><td>{{.PerSecond}}</td><td class="r-{{.Rating}}">{{.Integral}}</td>{{range .Cells}}<td class="{{.Class}}">{{.Apdex}}{{if .P95}}, {{.P95}}{{end}}</td>{{end}}</tr>
{{end}}</table></div>
<p class="muted">Executions count in the stage in which they completed (results: stages[]).</p>
{{end}}
<h2 id="observations">Observations (means over the run)</h2>
<div class="scroll"><table>
<tr><th class="l">run</th><th class="l">top wait events (share of active sessions)</th><th>CPU user</th><th>CPU system</th><th>iowait</th><th>softirq</th><th>catalog before</th><th>catalog after</th><th>catalog growth</th><th>temp files</th></tr>
{{range .Obs}}<tr><td class="l">{{.Name}}</td><td class="l">{{.TopWaits}}</td><td>{{.CPUUser}}</td><td>{{.CPUSystem}}</td><td>{{.CPUIowait}}</td><td>{{.CPUSoftirq}}</td><td>{{.CatalogBefore}}</td><td>{{.CatalogAfter}}</td><td>{{.CatalogGrowth}}</td><td>{{.TempFiles}}</td></tr>
{{end}}</table></div>
` + operationsHTML + `
` + invalHTML + `
{{if .Storms}}
<h2 id="storms">Storms</h2>
<p>Marked on the time charts: a vermillion line when the storm fired, a shaded span from its baseline point to its end.</p>
<div class="scroll"><table>
<tr><th class="l">run</th><th>fired at</th><th class="l">span</th><th class="l">wait event</th><th class="l">message</th></tr>
{{range .Storms}}<tr><td class="l">{{.Run}}</td><td>{{.At}}</td><td class="l">{{.Span}}</td><td class="l">{{.Wait}}</td><td class="l">{{.Message}}</td></tr>
{{end}}</table></div>
{{else}}<p>No storms detected.</p>{{end}}
{{range $i, $s := .Soak}}
<h2 id="soak-{{$i}}">Soak trends: {{$s.Run}}</h2>
<p>{{$s.About}} Each chart: the metric per window (blue, a dot on each steady window that trends count), the line fitted to it (vermillion when the rule finds the trend real in its bad direction, grey dashed when not), an orange vertical line at each early warning and a black one at the collapse. The caption quotes the slope with its interval.</p>
{{if $s.Warnings}}<ul>{{range $s.Warnings}}<li><strong>{{.}}</strong></li>
{{end}}</ul>{{else}}<p>No early warning.</p>{{end}}
{{if $s.Collapse}}<p><strong>{{$s.Collapse}}</strong></p>{{end}}
<div class="charts">
{{range $s.Charts}}<figure id="chart-{{.ID}}">{{svg .SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}</div>
{{if $s.Flat}}<p class="muted">At 0 in every window (no chart): {{$s.Flat}}.</p>{{end}}
{{end}}

{{template "profile" .Profile}}
<h2 id="charts">Charts</h2>
<div class="charts">
{{range .Charts}}<figure id="chart-{{.ID}}">{{svg .SVG}}</figure>
{{end}}</div>

<h2 id="environment">Environment and parameters</h2>
<p class="muted">Rows marked ≠ differ between the runs.</p>
<h3>Parameters</h3>
{{template "items" dict "Runs" $runs "Items" .Params}}
{{if .OpDefs}}<h3>Key operations</h3>
<div class="scroll"><table><tr><th class="l">key operation</th><th>target T</th><th>priority</th><th class="l">description</th>{{if gt (len .Runs) 1}}<th class="l">defined so in</th>{{end}}</tr>
{{range .OpDefs}}<tr><td class="l">{{.Name}}</td><td>{{.Target}}</td><td>{{.Priority}}</td><td class="l">{{.Description}}</td>{{if gt (len $runs) 1}}<td class="l">{{if .Runs}}{{.Runs}}{{else}}all runs{{end}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}
<h3>Server</h3>
{{template "items" dict "Runs" $runs "Items" .Server}}
<h3>Host</h3>
{{template "items" dict "Runs" $runs "Items" .Host}}
<h3>Command lines</h3>
{{range .Env}}<p>{{.Name}}: {{if .CommandLine}}<code>{{.CommandLine}}</code>{{else}}-{{end}}</p>
{{end}}
</body>
</html>
{{define "items"}}<div class="scroll"><table><tr><th class="l">item</th>{{range .Runs}}<th class="l">{{.}}</th>{{end}}</tr>
{{range .Items}}<tr{{if .Differs}} class="diff"{{end}}><td class="l key">{{.Key}}</td>{{range .Values}}<td class="l">{{.}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}`
